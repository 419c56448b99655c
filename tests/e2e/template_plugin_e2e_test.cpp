// A template plugin end to end (issue 20, item 3): `emmy tune --backend cpu --plugin-path DIR`
// with the example template examples/blas_sgemm on the plugin path. The lowering pass offers it
// beside the generated matmul (matmul.template), both are measured and checked against the
// reference, and the tune keeps the faster: on a product where OpenBLAS wins, blas_sgemm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "process.hpp"

namespace {

using emmy::test::Completed;
using json = nlohmann::json;

// A small odd-sized product. Which of OpenBLAS and the generated kernel is faster on it depends on
// the machine and its load (on the 2-core CI machine: 13-17 us each at deploy, either ahead, and
// OpenBLAS's two threads lose when ctest runs another test beside it), so the test checks that
// the tune measured both and kept the one it measured faster, not which one that is: a speed
// claim is a benchmark's.
constexpr const char* kProduct = "torch.matmul(torch.randn(37,100), torch.randn(100,45))";

// Whether /proc/cpuinfo's flags name `flag` (x86 Linux; false elsewhere).
bool cpu_has(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("flags", 0) == 0)
      return (line + " ").find(" " + flag + " ") != std::string::npos;
  return false;
}

class TemplatePluginE2E : public ::testing::Test, protected emmy::test::EmmyHome {
 protected:
  void SetUp() override {
    // OpenBLAS (DYNAMIC_ARCH) picks its kernels by the CPU's model; a virtual machine that calls
    // itself "Intel(R) Xeon(R) Processor" gets its Prescott (SSE3) kernels, slower than the
    // generated matmul here (18.5 against 15 us). What this test is about is the plugin's path
    // through the tune, so where the CPU has AVX2 and FMA and nothing says otherwise, OpenBLAS
    // is told to use its Haswell kernels (the child processes inherit the variable).
    if (!std::getenv("OPENBLAS_CORETYPE") && cpu_has("avx2") && cpu_has("fma"))
      setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  }

  std::vector<std::string> tune(const std::string& report, bool with_plugin) const {
    std::vector<std::string> args = {"tune",     "--backend",     "cpu",    "--code",
                                     kProduct,   "--patience",    "6",      "--prior",
                                     "roofline", "--no-progress", "--json", path(report)};
    if (with_plugin) args.insert(args.begin(), {"--plugin-path", EMMY_EXAMPLE_PLUGIN_DIR});
    return args;
  }

  // The measured rows of the kernel: ok rows per template, and rows that are failures (a refusal
  // is no failure: the template said it does not take the kernel); the fastest ok deploy row of
  // run `run_id` per template (the assembled program's rows aside).
  std::map<std::string, int> ok_rows_per_template(int* failed, const std::string& run_id,
                                                  std::map<std::string, double>* fastest) const {
    Completed c = emmy({"eval", "variants", "--kernel", "matmul", "--json", "--limit", "0"});
    EXPECT_EQ(c.exit_code, 0) << c.err;
    std::map<std::string, int> ok;
    for (const auto& group : json::parse(c.out))
      for (const auto& row : group.at("variants")) {
        const std::string templ = row.at("template").get<std::string>();
        if (row.at("status") == "ok") {
          ++ok[templ];
          if (row.at("regime") == "deploy" && row.at("run_id") == run_id && templ != "assembled") {
            const double us = row.at("time_us").get<double>();
            if (!fastest->count(templ) || us < fastest->at(templ)) (*fastest)[templ] = us;
          }
        } else if (row.at("status") != "refused") {
          ++*failed;
        }
      }
    return ok;
  }
};

TEST_F(TemplatePluginE2E, TuneMeasuresThePluginBesideTheGeneratedKernelAndKeepsTheFaster) {
  // Without the plugin on the path nothing offers it: the generated matmul, tuned.
  Completed without = emmy(tune("without.json", false));
  ASSERT_EQ(without.exit_code, 0) << without.err;
  json r0 = json::parse(emmy::test::read_file(path("without.json")));
  ASSERT_EQ(r0.at("kernels").size(), 1u) << r0.dump(2);
  EXPECT_EQ(r0.at("kernels")[0].at("template"), "matmul") << r0.dump(2);
  EXPECT_EQ(r0.at("env").get<std::string>().find("blas_sgemm"), std::string::npos) << r0.at("env");

  // With it: offered at matmul.template, measured beside the generated kernel and checked against
  // the reference (no failure row), and the faster of the two at deploy kept.
  Completed with = emmy(tune("with.json", true));
  ASSERT_EQ(with.exit_code, 0) << with.err;
  json r = json::parse(emmy::test::read_file(path("with.json")));
  ASSERT_EQ(r.at("status"), "ok") << r.dump(2);
  ASSERT_EQ(r.at("kernels").size(), 1u) << r.dump(2);
  const json& kernel = r.at("kernels")[0];
  // The plugin's library is part of the environment its rows are stored under.
  EXPECT_NE(r.at("env").get<std::string>().find("|blas_sgemm OpenBLAS"), std::string::npos)
      << r.at("env");
  int failed = 0;
  std::map<std::string, double> fastest;
  std::map<std::string, int> ok =
      ok_rows_per_template(&failed, r.at("run_id").get<std::string>(), &fastest);
  EXPECT_GE(ok["blas_sgemm"], 1) << with.out;
  EXPECT_GE(ok["matmul"], 1) << with.out;
  EXPECT_EQ(failed, 0) << with.out;
  // The kept one is the fastest at deploy in this run. (Both templates were measured at rank,
  // above; one whose rank time is beyond the deploy band of the best is not measured at deploy,
  // which on a machine where OpenBLAS is slow can be either.)
  ASSERT_FALSE(fastest.empty()) << with.out;
  const auto best = std::min_element(fastest.begin(), fastest.end(),
                                     [](auto& a, auto& b) { return a.second < b.second; });
  EXPECT_EQ(kernel.at("template"), best->first) << with.out;
  EXPECT_EQ(kernel.at("best_deploy_us").get<double>(), best->second) << with.out;
  // The report names the kept template.
  EXPECT_NE(with.out.find(kernel.at("template").get<std::string>()), std::string::npos) << with.out;
  // The assembled program (the kept kernel alone here) was built and measured too.
  EXPECT_GT(r.at("assembled_us").get<double>(), 0) << r.dump(2);
}

}  // namespace
