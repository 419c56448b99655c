// `emmy export` and `emmy run` end to end on the cpu backend (issue 22): a tuned matmul and the
// Qwen layer exported from the database, run through libemmy_runtime and checked against the
// reference interpreter; an untuned graph and a damaged export refused by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>
#include <vector>

#include "process.hpp"

using emmy::test::Completed;

namespace {

const char* kMatmul = "torch.matmul(torch.randn(64,64), torch.randn(64,64))";
const char* kOtherMatmul = "torch.matmul(torch.randn(48,64), torch.randn(64,32))";

class ExportE2E : public ::testing::Test, protected emmy::test::EmmyHome {
 protected:
  Completed tune_code(const char* code) const {
    return emmy({"tune", "--backend", "cpu", "--code", code, "--patience", "1", "--samples", "3",
                 "--warmup", "1", "--prior", "roofline", "--no-progress"});
  }
  Completed export_code(const char* code, const std::string& out) const {
    return emmy({"export", "--backend", "cpu", "--code", code, "--out", path(out)});
  }
};

TEST_F(ExportE2E, HelpIsTrue) {
  Completed c = emmy({"export", "--help"});
  EXPECT_EQ(c.exit_code, 0);
  EXPECT_NE(c.out.find("plan.emmyplan"), std::string::npos);
  EXPECT_NE(c.out.find("--out"), std::string::npos);
  Completed top = emmy({"--help"});
  EXPECT_NE(top.out.find("export"), std::string::npos);
  EXPECT_NE(top.out.find("run "), std::string::npos);
}

TEST_F(ExportE2E, TunedMatmulExportsRunsAndMatchesTheInterpreter) {
  Completed tuned = tune_code(kMatmul);
  ASSERT_EQ(tuned.exit_code, 0) << tuned.err;
  Completed exported = export_code(kMatmul, "mm.emmy");
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_NE(exported.out.find("exported 1 kernels"), std::string::npos) << exported.out;
  // Where the export's time went, step by step (the whole model's export is held to a second).
  EXPECT_TRUE(std::regex_search(exported.out,
                                std::regex("in [0-9.]+ s: plugins [0-9.]+, backend [0-9.]+, graph "
                                           "[0-9.]+, database [0-9.]+, build [0-9.]+, plan "
                                           "[0-9.]+, write [0-9.]+\n")))
      << exported.out;
  EXPECT_TRUE(std::filesystem::exists(path("mm.emmy/plan.emmyplan")));
  EXPECT_TRUE(std::filesystem::exists(path("mm.emmy/kernels.so")));
  Completed ran = emmy({"run", path("mm.emmy"), "--seed", "3"});
  ASSERT_EQ(ran.exit_code, 0) << ran.out << ran.err;
  EXPECT_NE(ran.out.find("PASS"), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("max abs error"), std::string::npos) << ran.out;
  // Given inputs by name (raw bytes), the others random; a file of the wrong size is named.
  Completed listed = emmy({"-v", "run", path("mm.emmy")});
  EXPECT_NE(listed.out.find("input arg0 f32[64,64] (input)"), std::string::npos) << listed.out;
  std::filesystem::create_directories(path("inputs"));
  {
    std::vector<float> ones(64 * 64, 1.0f);
    std::ofstream(path("inputs/arg0.bin"), std::ios::binary)
        .write(reinterpret_cast<const char*>(ones.data()),
               static_cast<std::streamsize>(ones.size() * 4));
  }
  Completed given = emmy({"run", path("mm.emmy"), "--inputs", path("inputs")});
  EXPECT_EQ(given.exit_code, 0) << given.out << given.err;
  EXPECT_NE(given.out.find("input arg0 from"), std::string::npos) << given.out;
  std::ofstream(path("inputs/arg1.bin")) << "short";
  Completed short_input = emmy({"run", path("mm.emmy"), "--inputs", path("inputs")});
  EXPECT_EQ(short_input.exit_code, 2) << short_input.out;
  EXPECT_NE(short_input.err.find("arg1.bin: 5 bytes; input 'arg1' is f32[64,64]"),
            std::string::npos)
      << short_input.err;
  // Exporting again over the earlier export is allowed; over a folder of the user's it is not.
  EXPECT_EQ(export_code(kMatmul, "mm.emmy").exit_code, 0);
  std::filesystem::create_directories(path("mine"));
  std::ofstream(path("mine/notes.txt")) << "keep";
  Completed refused = export_code(kMatmul, "mine");
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("folder with other files"), std::string::npos) << refused.err;

  // A damaged plan and a replaced library are refused by name (exit 2).
  {
    std::fstream f(path("mm.emmy/plan.emmyplan"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  Completed damaged = emmy({"run", path("mm.emmy")});
  EXPECT_EQ(damaged.exit_code, 2) << damaged.out;
  EXPECT_NE(damaged.err.find("damaged"), std::string::npos) << damaged.err;
  ASSERT_EQ(export_code(kMatmul, "mm.emmy").exit_code, 0);
  std::ofstream(path("mm.emmy/kernels.so"), std::ios::app) << "tail";
  Completed mixed = emmy({"run", path("mm.emmy")});
  EXPECT_EQ(mixed.exit_code, 2);
  EXPECT_NE(mixed.err.find("is not the library this plan was exported with"), std::string::npos)
      << mixed.err;
  std::ofstream(path("foreign.emmyplan")) << "not a plan";
  Completed foreign = emmy({"run", path("foreign.emmyplan")});
  EXPECT_EQ(foreign.exit_code, 2);
  EXPECT_NE(foreign.err.find("not an Emmy export plan"), std::string::npos) << foreign.err;
}

TEST_F(ExportE2E, AnUntunedGraphIsRefusedNamingItsKernels) {
  // No database at all.
  Completed none = export_code(kMatmul, "none.emmy");
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_NE(none.err.find("nothing is tuned"), std::string::npos) << none.err;
  // A database with another graph tuned: this one's kernel is named as untuned.
  ASSERT_EQ(tune_code(kOtherMatmul).exit_code, 0);
  Completed untuned = export_code(kMatmul, "untuned.emmy");
  EXPECT_EQ(untuned.exit_code, 2) << untuned.err;
  EXPECT_NE(untuned.err.find("no tuned plan for this graph"), std::string::npos) << untuned.err;
  EXPECT_NE(untuned.err.find("untuned kernels: matmul ["), std::string::npos) << untuned.err;
  EXPECT_FALSE(std::filesystem::exists(path("untuned.emmy")));
  // The same graph tuned with one worker of fewer cores is another environment: its plan is named.
  if (std::thread::hardware_concurrency() >= 2) {
    Completed wrong_env = emmy({"export", "--backend", "cpu", "--code", kOtherMatmul,
                                "--backend-option", "cores_per_worker=1", "--out", path("e.emmy")});
    EXPECT_EQ(wrong_env.exit_code, 2) << wrong_env.err;
    EXPECT_NE(wrong_env.err.find("other environments"), std::string::npos) << wrong_env.err;
  }
}

TEST_F(ExportE2E, QwenLayerExportsAndRunsAtASmallSequence) {
  const std::vector<std::string> model = {"Qwen/Qwen3-Embedding-0.6B",
                                          "--layer",
                                          "0",
                                          "--batch",
                                          "1",
                                          "--seq",
                                          "8",
                                          "--backend",
                                          "cpu"};
  std::vector<std::string> tune = {"tune"};
  tune.insert(tune.end(), model.begin(), model.end());
  for (const char* a : {"--patience", "1", "--samples", "3", "--warmup", "1", "--prior", "roofline",
                        "--no-progress", "--no-validate"})
    tune.push_back(a);
  Completed tuned = emmy(tune);
  ASSERT_EQ(tuned.exit_code, 0) << tuned.err;
  std::vector<std::string> exp = {"export"};
  exp.insert(exp.end(), model.begin(), model.end());
  exp.push_back("--out");
  exp.push_back(path("layer0.emmy"));
  Completed exported = emmy(exp);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  Completed ran = emmy({"run", path("layer0.emmy")});
  ASSERT_EQ(ran.exit_code, 0) << ran.out << ran.err;
  EXPECT_NE(ran.out.find("PASS"), std::string::npos) << ran.out;
}

}  // namespace
