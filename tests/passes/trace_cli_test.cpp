// `emmy trace` end to end: the hf frontend's Qwen3-Embedding-0.6B layer 0 through the default
// pipeline, read back from --json; and the errors for bad usage.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct CliRun {
  int rc = -1;
  std::string out;
};

CliRun emmy(const std::string& args) {
  std::string cmd = std::string(EMMY_BIN) + " " + args + " 2>&1";
  CliRun r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  int status = pclose(pipe);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(TraceCli, Qwen3EmbeddingLayer0) {
  CliRun r = emmy("trace Qwen/Qwen3-Embedding-0.6B --layer 0 --seq 32 --backend none --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["frontend"], "hf");
  EXPECT_EQ(j["ops"]["linear"], 7);
  EXPECT_EQ(j["ops"]["softmax"], 1);
  EXPECT_EQ(j["kernels"], 9);  // q_norm and k_norm in one kernel: the sibling fork's first answer
  EXPECT_EQ(j["distinct_kernels"], 8);
  EXPECT_EQ(j["templates"]["attention"], 1);
  EXPECT_EQ(j["structural_forks"].size(), 6u);
  int total = 0;
  for (const auto& d : j["distinct"]) total += d["count"].get<int>();
  EXPECT_EQ(total, 9);
}

TEST(TraceCli, GroupingOfTheWholeModelInTheRunDescription) {
  CliRun r = emmy(
      "trace Qwen/Qwen3-Embedding-0.6B --seq 32 --backend none --fork fuse_horizontal=split "
      "--json");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kernels"], 337);  // the user's run description's count: 28 x 12 + the final norm
}

TEST(TraceCli, IrTextAndErrors) {
  CliRun ir = emmy("trace Qwen/Qwen3-Embedding-0.6B --layer 0 --seq 16 --backend none --ir");
  ASSERT_EQ(ir.rc, 0) << ir.out;
  EXPECT_NE(ir.out.find("kernels: 9, distinct: 8"), std::string::npos) << ir.out;
  EXPECT_NE(ir.out.find("= linear("), std::string::npos);
  EXPECT_NE(ir.out.find("kernel 8 ["), std::string::npos);
  EXPECT_EQ(emmy("trace").rc, 2);
  CliRun bad = emmy("trace Qwen/Qwen3-Embedding-0.6B --layer 0 --fork fuse_attention=nope");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.out.find("has options fused, split"), std::string::npos) << bad.out;
}

}  // namespace
