// `emmy tune` end to end on the CPU backend: a real frontend, passes, search, RocksDB store,
// generated C++ built by the system compiler and timed in a worker process.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "process.hpp"

using emmy::test::Completed;
using json = nlohmann::json;

namespace {

const char* kMatmul = "torch.matmul(torch.randn(96,96), torch.randn(96,96))";

class TuneE2E : public ::testing::Test, protected emmy::test::EmmyHome {
 protected:
  std::vector<std::string> tune_matmul(const std::string& report, int patience) const {
    return {"tune",
            "--backend",
            "cpu",
            "--code",
            kMatmul,
            "--patience",
            std::to_string(patience),
            "--samples",
            "5",
            "--warmup",
            "1",
            "--prior",
            "roofline",
            "--no-progress",
            "--json",
            path(report)};
  }

  json report(const std::string& name) const {
    return json::parse(emmy::test::read_file(path(name)));
  }

  // Measurements of `kernel` stored so far (read through `emmy eval`, which works while a tune
  // holds the database).
  int stored_variants(const std::string& kernel) const {
    Completed c = emmy({"eval", "variants", "--kernel", kernel, "--json", "--limit", "0"});
    if (c.exit_code != 0) return 0;
    int n = 0;
    for (const auto& group : json::parse(c.out)) n += static_cast<int>(group["variants"].size());
    return n;
  }

  // Failure rows stored so far, of every kernel and kind.
  int stored_failures() const {
    Completed c = emmy({"eval", "failures", "--json"});
    if (c.exit_code != 0) return -1;
    int n = 0;
    for (const auto& group : json::parse(c.out)) n += group["count"].get<int>();
    return n;
  }

  bool cuda_plugin_found() const { return emmy({"plugins"}).out.find("cuda") != std::string::npos; }

  // Waits (up to two minutes) until a tune has stored at least `n` measurements of `kernel`.
  bool wait_for_variants(const std::string& kernel, int n) const {
    for (int i = 0; i < 240; ++i) {
      if (stored_variants(kernel) >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return false;
  }
};

TEST_F(TuneE2E, MatmulTunesAndIdenticalRerunLaunchesNothing) {
  Completed first = emmy(tune_matmul("first.json", 3));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  json r1 = report("first.json");
  EXPECT_EQ(r1["status"], "ok");
  EXPECT_EQ(r1["kernels_distinct"], 1);
  EXPECT_GT(r1["launches"].get<int>(), 0);
  EXPECT_GT(r1["candidates_measured"].get<int>(), 0);
  EXPECT_GE(r1["deploy_measurements"].get<int>(), 1);
  EXPECT_GT(r1["best_total_us"].get<double>(), 0);
  EXPECT_GT(r1["assembled_us"].get<double>(), 0) << r1.dump(2);
  for (const char* field :
       {"kernels_total", "candidates_built", "cache_hits", "validation_gap_pct", "wall_s"})
    EXPECT_TRUE(r1.contains(field)) << field;
  EXPECT_EQ(r1["built_ahead"], 0);  // the cpu backend builds nothing ahead unless asked
  EXPECT_NE(first.out.find("matmul"), std::string::npos) << first.out;

  Completed second = emmy(tune_matmul("second.json", 3));
  ASSERT_EQ(second.exit_code, 0) << second.err;
  json r2 = report("second.json");
  EXPECT_EQ(r2["launches"], 0);
  EXPECT_EQ(r2["candidates_built"], 0);
  EXPECT_EQ(r2["cache_hits"].get<int>(),
            r1["candidates_measured"].get<int>() + r1["deploy_measurements"].get<int>() + 1);
  EXPECT_EQ(r2["best_total_us"], r1["best_total_us"]);
  EXPECT_EQ(r2["assembled_us"], r1["assembled_us"]);

  // What was measured reads back, best first.
  Completed variants = emmy({"eval", "variants", "--kernel", "matmul", "--json", "--limit", "0"});
  ASSERT_EQ(variants.exit_code, 0) << variants.err;
  json groups = json::parse(variants.out);
  ASSERT_EQ(groups.size(), 1u);
  double previous = 0;
  int rank_rows = 0;
  for (const auto& row : groups[0]["variants"]) {
    if (row["status"] != "ok" || row["regime"] != "rank") continue;
    double t = row["time_us"].get<double>();
    EXPECT_GE(t, previous) << "variants are not best first";
    previous = t;
    ++rank_rows;
  }
  EXPECT_GE(rank_rows, 1);
  EXPECT_LE(rank_rows, r1["candidates_measured"].get<int>());
  Completed runs = emmy({"eval", "runs", "--json"});
  ASSERT_EQ(runs.exit_code, 0) << runs.err;
  EXPECT_EQ(json::parse(runs.out).size(), 2u);
}

TEST_F(TuneE2E, SigkillMidRunThenRerunContinues) {
  pid_t pid = emmy::test::start(argv(tune_matmul("killed.json", 40)), env(), path("killed"));
  ASSERT_TRUE(wait_for_variants("matmul", 3)) << emmy::test::read_file(path("killed.err"));
  kill(pid, SIGKILL);
  EXPECT_EQ(emmy::test::wait_for(pid), 128 + SIGKILL);
  int kept = stored_variants("matmul");
  EXPECT_GE(kept, 3);

  Completed again = emmy(tune_matmul("again.json", 3));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  json r = report("again.json");
  EXPECT_GT(r["cache_hits"].get<int>(), 0) << "the re-run did not reuse what the killed run stored";
  EXPECT_GE(stored_variants("matmul"), kept);
}

// Ctrl-C at a terminal reaches the whole process group: emmy, its measurement worker and a
// compiler in flight. The run stops with 130, and the worker's death is not the candidate's.
TEST_F(TuneE2E, SecondWriterRefusedAndCtrlCKeepsMeasurements) {
  pid_t pid = emmy::test::start(argv(tune_matmul("long.json", 40)), env(), path("long"),
                                /*own_group=*/true);
  ASSERT_TRUE(wait_for_variants("matmul", 2)) << emmy::test::read_file(path("long.err"));

  Completed second = emmy(tune_matmul("second.json", 3));
  EXPECT_EQ(second.exit_code, 3) << second.err;
  EXPECT_NE(second.err.find("in use"), std::string::npos) << second.err;

  kill(-pid, SIGINT);
  EXPECT_EQ(emmy::test::wait_for(pid), 130) << emmy::test::read_file(path("long.err"));
  int kept = stored_variants("matmul");
  EXPECT_GE(kept, 2);
  EXPECT_EQ(stored_failures(), 0) << emmy({"eval", "failures"}).out;
  json interrupted = report("long.json");
  EXPECT_EQ(interrupted["status"], "interrupted");

  Completed next = emmy(tune_matmul("next.json", 3));
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_GT(report("next.json")["cache_hits"].get<int>(), 0);
}

// SIGINT to emmy alone (as `timeout -s INT` sends it) while it validates the best grouping: the
// validation's requests look at it too, so the run stops there with 130 (it used to finish the
// validation and store a plan as if nothing had been asked), keeping every measurement and
// storing no plan.
TEST_F(TuneE2E, CtrlCDuringTheValidationStopsIt) {
  std::vector<std::string> args = {"tune",
                                   "--backend",
                                   "cpu",
                                   "--code",
                                   "torch.matmul(torch.randn(256,256), torch.randn(256,256))",
                                   "--patience",
                                   "1",
                                   "--samples",
                                   "300",
                                   "--prior",
                                   "roofline",
                                   "-v",
                                   "--no-progress",
                                   "--json",
                                   path("validating.json")};
  pid_t pid = emmy::test::start(argv(args), env(), path("validating"));
  bool validating = false;
  for (int i = 0; i < 6000 && !validating; ++i) {
    validating = emmy::test::read_file(path("validating.err")).find("validating the best") !=
                 std::string::npos;
    if (!validating) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(validating) << emmy::test::read_file(path("validating.err"));
  kill(pid, SIGINT);
  EXPECT_EQ(emmy::test::wait_for(pid), 130) << emmy::test::read_file(path("validating.err"));
  EXPECT_EQ(report("validating.json")["status"], "interrupted");
  EXPECT_GE(stored_variants("matmul"), 1);
  Completed exported =
      emmy({"export", "--backend", "cpu", "--code", args[4], "--out", path("validating.emmy")});
  EXPECT_NE(exported.exit_code, 0) << "an interrupted validation stored a plan";
  EXPECT_NE(exported.err.find("no tuned plan for this graph"), std::string::npos) << exported.err;
}

// SIGINT to emmy alone while a candidate's compiler runs (a compiler that would take 300 s): emmy
// passes the signal on to its children, as a terminal's Ctrl-C reaches the process group, so the
// build ends at once and the run stops with 130. The killed build is the machinery's failure, so
// no failure row is stored. Without the forwarding emmy waited for the compiler to end.
TEST_F(TuneE2E, InterruptReachesTheCompilerStillRunning) {
  const std::string cc = path("slowcc"), started = path("slowcc.started");
  {
    std::ofstream script(cc);
    script << "#!/bin/sh\n"
           << "if [ \"$1\" = \"--version\" ]; then echo 'slowcc 1.0'; exit 0; fi\n"
           << "touch '" << started << "'\n"
           << "exec sleep 300\n";
  }
  std::filesystem::permissions(cc, std::filesystem::perms::owner_all);
  std::vector<std::string> args = {
      "tune",   "--backend",        "cpu", "--backend-option", "compiler=" + cc, "--code",
      kMatmul,  "--patience",       "1",   "--prior",          "roofline",       "--no-progress",
      "--json", path("slowcc.json")};
  pid_t pid = emmy::test::start(argv(args), env(), path("slowrun"));
  for (int i = 0; i < 3000 && !std::filesystem::exists(started); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(std::filesystem::exists(started)) << emmy::test::read_file(path("slowrun.err"));
  kill(pid, SIGINT);
  // Far below the compiler's 300 s: a run that waits for it has not passed the signal on.
  int status = 0;
  bool ended = false;
  for (int i = 0; i < 600 && !ended; ++i) {
    ended = waitpid(pid, &status, WNOHANG) == pid;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!ended) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "emmy did not stop within 60 s of SIGINT while its compiler ran\n"
           << emmy::test::read_file(path("slowrun.err"));
  }
  ASSERT_TRUE(WIFEXITED(status)) << emmy::test::read_file(path("slowrun.err"));
  EXPECT_EQ(WEXITSTATUS(status), 130) << emmy::test::read_file(path("slowrun.err"));
  EXPECT_EQ(report("slowcc.json")["status"], "interrupted");
  EXPECT_EQ(stored_failures(), 0) << "the killed build was stored as the candidate's failure";
}

TEST_F(TuneE2E, BadInputIsAClearErrorWithExitCode2) {
  Completed none = emmy({"tune", "--backend", "cpu"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("--code"), std::string::npos) << none.err;

  Completed backend = emmy({"tune", "--backend", "nosuch", "--code", kMatmul});
  EXPECT_EQ(backend.exit_code, 2) << backend.err;
  EXPECT_NE(backend.err.find("nosuch"), std::string::npos) << backend.err;

  Completed prior = emmy({"tune", "--backend", "cpu", "--prior", "nosuchprior", "--code", kMatmul});
  EXPECT_EQ(prior.exit_code, 2) << prior.err;
  EXPECT_NE(prior.err.find("nosuchprior"), std::string::npos) << prior.err;

  Completed model = emmy({"tune", "NoSuchOrg/no-such-model", "--backend", "cpu"});
  EXPECT_EQ(model.exit_code, 2) << model.err;
  EXPECT_NE(model.err.find("no-such-model"), std::string::npos) << model.err;

  Completed first = emmy({"tune", "--backend", "cpu", "--first", "best", "--code", kMatmul});
  EXPECT_EQ(first.exit_code, 2) << first.err;
  EXPECT_NE(first.err.find("--first 'best' is not defaults, prior or prior-then-defaults"),
            std::string::npos)
      << first.err;
}

// --first: each kernel's search starts from the backend's untuned configuration (defaults, the
// default), from the configuration its prior predicts fastest (prior), or from that one with the
// defaults second (prior-then-defaults). The roofline prior ranks a 96x96 matmul's default tiles
// (128 x 256 x 256) below smaller ones, so the first candidates differ; the report says which
// start the run took.
TEST_F(TuneE2E, FirstCandidateIsTheDefaultsOrThePriorsFavourite) {
  // The configurations of steps 0 and 1: the knobs between the step number and the time.
  auto first_steps = [&](const std::string& first) {
    std::vector<std::string> args = tune_matmul(first + ".json", 1);
    for (const char* a : {"--no-validate", "-v", "--first"}) args.push_back(a);
    args.push_back(first);
    Completed c = emmy(args);
    EXPECT_EQ(c.exit_code, 0) << c.err;
    EXPECT_EQ(report(first + ".json")["first"], first);
    const std::string log = c.out + c.err;
    std::vector<std::string> steps;
    for (const char* step : {"step 0 ", "step 1 "}) {
      const size_t at = log.find(step);
      if (at == std::string::npos)
        return std::vector<std::string>{"(no " + std::string(step) + "in: " + log + ")", ""};
      const std::string line = log.substr(at + 7, log.find('\n', at) - at - 7);
      steps.push_back(line.substr(0, line.rfind("  ", line.find(" us"))));
    }
    return steps;
  };
  const auto defaults = first_steps("defaults");
  const auto prior = first_steps("prior");
  const auto both = first_steps("prior-then-defaults");
  EXPECT_NE(defaults[0].find("tile_m=128 tile_n=256"), std::string::npos) << defaults[0];
  EXPECT_EQ(prior[0].find("tile_m=128 tile_n=256"), std::string::npos) << prior[0];
  // The prior learns between these runs (one home), so its favourite may move; the defaults not.
  EXPECT_EQ(both[0].find("tile_m=128 tile_n=256"), std::string::npos) << both[0];
  EXPECT_EQ(both[1], defaults[0]);
}

// Options are checked before anything is loaded or written: no database appears.
TEST_F(TuneE2E, TimeoutAndDeviceListsAreCheckedBeforeAnythingIsWritten) {
  for (const char* t : {"nan", "inf", "1e99", "0.001", "0", "-5"}) {
    Completed c =
        emmy({"tune", "--backend", "cpu", "--code", kMatmul, std::string("--timeout=") + t});
    EXPECT_EQ(c.exit_code, 2) << t << ": " << c.err;
    EXPECT_NE(c.err.find("is not a number of seconds from 0.1 to 3600"), std::string::npos)
        << c.err;
  }
  struct Case {
    std::vector<std::string> flags;
    const char* says;
  };
  for (const Case& k : {Case{{"--devices", "0,0"}, "device 0 is listed twice"},
                        Case{{"--gpus", "2", "--devices", "0,1"}, "not both"},
                        Case{{"--devices=0,-1"}, "'-1' is not a device number"},
                        Case{{"--devices", "0,x"}, "'x' is not a device number"},
                        Case{{"--devices", "0,,1"}, "an empty entry"},
                        Case{{"--gpus", "0"}, "not a positive number"}}) {
    std::vector<std::string> args = {"tune", "--code", kMatmul};
    args.insert(args.end(), k.flags.begin(), k.flags.end());
    Completed c = emmy(args);
    EXPECT_EQ(c.exit_code, 2) << k.flags[0] << ": " << c.err;
    EXPECT_NE(c.err.find(k.says), std::string::npos) << c.err;
  }
  for (const char* n : {"-1", "65", "x"}) {
    Completed c = emmy({"tune", "--backend", "cpu", "--code", kMatmul, "--build-ahead", n});
    EXPECT_EQ(c.exit_code, 2) << n << ": " << c.err;
    EXPECT_NE(c.err.find("build-ahead"), std::string::npos) << c.err;
  }
  EXPECT_FALSE(std::filesystem::exists(db()));
  EXPECT_NE(emmy({"tune", "--help"}).out.find("3600"), std::string::npos);
}

// --build-ahead on the cpu backend (off by default there): candidates the search would evaluate
// next are built on other threads while one is measured, the run reports how many and how many
// the search then picked, and an identical re-run measures and builds nothing for its search.
TEST_F(TuneE2E, BuildingAheadIsReportedAndARerunBuildsNothing) {
  std::vector<std::string> args = tune_matmul("ahead.json", 4);
  args.insert(args.end(), {"--build-ahead", "2", "--no-validate"});
  Completed first = emmy(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  json r = report("ahead.json");
  EXPECT_EQ(r["status"], "ok");
  EXPECT_GT(r["built_ahead"].get<int>(), 0) << r.dump(2);
  EXPECT_LE(r["built_ahead_used"].get<int>(), r["built_ahead"].get<int>());
  EXPECT_NE(first.out.find("built ahead while others were measured"), std::string::npos)
      << first.out;
  args[args.size() - 4] = path("again.json");  // the --json value
  Completed again = emmy(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  json a = report("again.json");
  EXPECT_EQ(a["candidates_built"], 0);
  EXPECT_EQ(a["launches"], 0);
  // Every candidate on the re-run's path was found in the database, so nothing built ahead was
  // asked for. (How many builds it starts past its path is a race between the build threads and
  // the next plan, on either run: not compared.)
  EXPECT_EQ(a["built_ahead_used"], 0) << a.dump(2);
}

// Without a usable CUDA device (this machine has no driver): --backend cuda, --gpus and an
// expression on device 'cuda' stop before the search with exit 2 and nothing written; with no
// --backend at all the run takes the cpu backend and says why.
TEST_F(TuneE2E, CudaThatCannotMeasureStopsBeforeTheSearchAndTheDefaultFallsBackToCpu) {
  if (!cuda_plugin_found()) GTEST_SKIP() << "the cuda backend is not built here";
  Completed asked =
      emmy({"tune", "--backend", "cuda", "--code", kMatmul, "--json", path("cuda.json")});
  if (asked.exit_code == 0) GTEST_SKIP() << "a CUDA device is usable here";
  EXPECT_EQ(asked.exit_code, 2) << asked.err;
  EXPECT_NE(asked.err.find("no usable CUDA"), std::string::npos) << asked.err;
  Completed gpus = emmy({"tune", "--gpus", "1", "--code", kMatmul});
  EXPECT_EQ(gpus.exit_code, 2) << gpus.err;
  EXPECT_NE(gpus.err.find("--gpus chooses GPUs"), std::string::npos) << gpus.err;
  Completed on_cuda =
      emmy({"tune", "--code",
            "torch.matmul(torch.randn(64,64,device='cuda'), torch.randn(64,64,device='cuda'))"});
  EXPECT_EQ(on_cuda.exit_code, 2) << on_cuda.err;
  EXPECT_NE(on_cuda.err.find("asks for device 'cuda'"), std::string::npos) << on_cuda.err;
  EXPECT_FALSE(std::filesystem::exists(db()));
  EXPECT_FALSE(std::filesystem::exists(path("cuda.json")));

  Completed chosen =
      emmy({"tune", "--code", kMatmul, "--patience", "1", "--samples", "3", "--warmup", "0",
            "--prior", "roofline", "--no-progress", "--json", path("auto.json")});
  ASSERT_EQ(chosen.exit_code, 0) << chosen.err;
  EXPECT_EQ(
      chosen.out.rfind("backend cpu: the cuda backend cannot measure here (no usable CUDA", 0), 0u)
      << chosen.out;
  EXPECT_EQ(report("auto.json")["backend"], "cpu");
}

// A worker that cannot measure (here /bin/false, which exits at once) is the machinery's
// failure: the run stops after one retry with exit 1, stores no failure row, and the re-run with
// a good worker measures every configuration as if nothing had happened.
TEST_F(TuneE2E, ABrokenWorkerStoresNoFailureAndTheRerunWithAGoodOneSucceeds) {
  std::vector<std::string> broken = tune_matmul("broken.json", 2);
  broken.insert(broken.end(), {"--backend-option", "worker=/bin/false"});
  Completed c = emmy(broken);
  EXPECT_EQ(c.exit_code, 1) << c.err;
  EXPECT_NE(c.err.find("could not measure twice"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("not the candidate's failure"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("/bin/false"), std::string::npos) << c.err;
  EXPECT_EQ(stored_failures(), 0);
  EXPECT_EQ(stored_variants("matmul"), 0);

  Completed good = emmy(tune_matmul("good.json", 2));
  ASSERT_EQ(good.exit_code, 0) << good.err;
  EXPECT_EQ(report("good.json")["status"], "ok");
  EXPECT_GT(report("good.json")["launches"].get<int>(), 0);
  EXPECT_GT(stored_variants("matmul"), 0);
}

TEST_F(TuneE2E, ThirdPartyPassWhoseKnobReachesNoCodeIsRefusedBeforeTheSearch) {
  // hello_pass (examples/) is found in the plugin path and added to the default pipeline, but no
  // cpu template reads its knob hello_unroll: every answer would build the same kernel, so the
  // run is refused (exit 2) before anything is built, naming the pass, its fork and the knob.
  Completed c = emmy({"tune", "--backend", "cpu", "--code", kMatmul, "--patience", "2", "--samples",
                      "3", "--warmup", "0", "--prior", "roofline", "--no-progress", "--passes",
                      "+hello_pass", "-v"});
  EXPECT_EQ(c.exit_code, 2) << c.err;
  EXPECT_NE(c.err.find("pass 'hello_pass'"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("fork 'hello.unroll_hint' for knob 'hello_unroll', which no template of "
                       "the cpu backend reads"),
            std::string::npos)
      << c.err;
  EXPECT_EQ(c.err.find("step "), std::string::npos) << "the search ran:\n" << c.err;
  EXPECT_FALSE(std::filesystem::exists(db())) << "refused, yet the database was created";
  // Its option is checked against its manifest, from the command line and the config file.
  Completed bad =
      emmy({"tune", "--backend", "cpu", "--code", kMatmul, "--pass-option", "hello_pass.factor=2"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("pass plugin 'hello_pass' has no option 'factor' (it takes: factors"),
            std::string::npos)
      << bad.err;
  {
    std::ofstream ini(path("plugins.ini"));
    ini << "[plugin roofline]\npeak_gflops = 300\nbogus = 1\n";
  }
  Completed file = emmy({"tune", "--backend", "cpu", "--code", kMatmul, "--prior", "roofline",
                         "--config", path("plugins.ini")});
  EXPECT_EQ(file.exit_code, 2) << file.err;
  EXPECT_NE(file.err.find("prior plugin 'roofline' has no option 'bogus' (it takes: peak_gflops"),
            std::string::npos)
      << file.err;
  {
    std::ofstream ini(path("plugins.ini"));
    ini << "[plugin nosuch]\nx = 1\n";
  }
  Completed unknown_plugin =
      emmy({"tune", "--backend", "cpu", "--code", kMatmul, "--config", path("plugins.ini")});
  EXPECT_EQ(unknown_plugin.exit_code, 2) << unknown_plugin.err;
  EXPECT_NE(unknown_plugin.err.find("no plugin named 'nosuch' was found"), std::string::npos)
      << unknown_plugin.err;
  Completed unknown = emmy({"tune", "--backend", "cpu", "--code", kMatmul, "--passes", "+nosuch"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.err;
  EXPECT_NE(unknown.err.find("nosuch"), std::string::npos) << unknown.err;
}

// A one-kernel graph's graph key and program equal its kernel's: the assembled measurement has
// a key space of its own, so it is a launch of its own, not the kernel's cached deploy row. A run
// that does not measure the assembled graph reports its gap as null with the reason, never 0.
TEST_F(TuneE2E, OneKernelGraphIsMeasuredAgainAndAnUnmeasuredGapIsNull) {
  Completed first = emmy(tune_matmul("first.json", 2));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  json r1 = report("first.json");
  ASSERT_EQ(r1["failures"], 0) << r1.dump(2);
  // The one kernel measured again in isolation, and the assembled graph, in alternating rounds
  // (tune/validation.hpp: twenty, or at least four where they overrun their budget), each round
  // in passes of one sample per request: --samples 5 gives 3 samples a round, so 2 x 3 launches
  // more a round (fewer, never under 2, where a slow round makes the requests take several).
  const int rounds = r1.value("validation_rounds", 0);
  EXPECT_GE(rounds, 4) << r1.dump(2);
  EXPECT_LE(rounds, 20) << r1.dump(2);
  const int again = r1["launches"].get<int>() - r1["candidates_measured"].get<int>() -
                    r1["deploy_measurements"].get<int>();
  EXPECT_GE(again, 2 * rounds) << "the kernel and the assembled graph were not both launched "
                                  "again in every round: "
                               << r1.dump(2);
  EXPECT_LE(again, 2 * rounds * 3) << r1.dump(2);
  // Those launches are no candidates: what was built is what the search measured (its rank and
  // deploy builds), not the validation's builds of the same kernel and the program.
  EXPECT_EQ(r1["candidates_built"].get<int>(),
            r1["candidates_measured"].get<int>() + r1["deploy_measurements"].get<int>())
      << r1.dump(2);
  EXPECT_GT(r1["assembled_us"].get<double>(), 0);
  ASSERT_TRUE(r1["isolated_us"].is_number()) << r1.dump(2);
  ASSERT_TRUE(r1["validation_gap_pct"].is_number()) << r1.dump(2);
  // The gap compares the assembled graph with the fresh isolated measurement, not the tuned one.
  const double assembled = r1["assembled_us"].get<double>(),
               isolated = r1["isolated_us"].get<double>();
  EXPECT_NEAR(r1["validation_gap_pct"].get<double>(), 100.0 * (assembled - isolated) / isolated,
              1e-6);

  std::vector<std::string> skip = tune_matmul("skip.json", 2);
  skip.push_back("--no-validate");
  Completed second = emmy(skip);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  json r2 = report("skip.json");
  EXPECT_TRUE(r2["validation_gap_pct"].is_null()) << r2.dump(2);
  EXPECT_EQ(r2["validation_note"], "disabled (--no-validate)");
  EXPECT_NE(second.out.find("validation gap not measured: disabled (--no-validate)"),
            std::string::npos)
      << second.out;

  // The runs record says the same: null for the unmeasured run, the number for the measured one.
  Completed runs = emmy({"eval", "runs", "--json"});
  ASSERT_EQ(runs.exit_code, 0) << runs.err;
  bool saw_measured = false, saw_unmeasured = false;
  for (const auto& run : json::parse(runs.out)) {
    if (run["run_id"] == r1["run_id"]) {
      saw_measured = true;
      EXPECT_EQ(run["validation_gap_pct"], r1["validation_gap_pct"]);
    }
    if (run["run_id"] == r2["run_id"]) {
      saw_unmeasured = true;
      EXPECT_TRUE(run["validation_gap_pct"].is_null()) << run.dump(2);
      EXPECT_EQ(run["validation_note"], "disabled (--no-validate)");
    }
  }
  EXPECT_TRUE(saw_measured && saw_unmeasured) << runs.out;
}

TEST_F(TuneE2E, QwenLayerZeroTunesEndToEnd) {
  Completed c = emmy({"tune",           "Qwen/Qwen3-Embedding-0.6B",
                      "--layer",        "0",
                      "--batch",        "1",
                      "--seq",          "8",
                      "--backend",      "cpu",
                      "--patience",     "1",
                      "--samples",      "3",
                      "--warmup",       "1",
                      "--prior",        "roofline",
                      "--no-progress",  "--json",
                      path("qwen.json")});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  json r = report("qwen.json");
  EXPECT_EQ(r["status"], "ok");
  EXPECT_GE(r["kernels_total"].get<int>(), 8);
  EXPECT_LE(r["kernels_distinct"].get<int>(), r["kernels_total"].get<int>());
  EXPECT_GT(r["best_total_us"].get<double>(), 0);
  EXPECT_TRUE(r.contains("validation_gap_pct"));
  EXPECT_GT(r["assembled_us"].get<double>(), 0) << r.dump(2);
  // The program timed end to end as well (one eviction per sample, the kernels back to back),
  // said in the table and kept as a row of its own, which the re-run below finds.
  ASSERT_TRUE(r["end_to_end_us"].is_number()) << r.dump(2);
  EXPECT_GT(r["end_to_end_us"].get<double>(), 0);
  EXPECT_NE(c.out.find("assembled graph end to end"), std::string::npos) << c.out;
  Completed again = emmy({"tune",
                          "Qwen/Qwen3-Embedding-0.6B",
                          "--layer",
                          "0",
                          "--batch",
                          "1",
                          "--seq",
                          "8",
                          "--backend",
                          "cpu",
                          "--patience",
                          "1",
                          "--samples",
                          "3",
                          "--warmup",
                          "1",
                          "--prior",
                          "roofline",
                          "--no-progress",
                          "--json",
                          path("qwen2.json")});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(report("qwen2.json")["end_to_end_us"], r["end_to_end_us"]);
  EXPECT_EQ(report("qwen2.json")["launches"], 0);
}

// Two worker processes (one core each on CI's two cores) tune a grouping's kernels side by side.
// The result does not depend on how many there were: one worker on the same one-core device over
// the same measurements walks the same path (it launches nothing) and reports the same kernels,
// configurations and total. One worker on both cores is another device: it measures afresh.
TEST_F(TuneE2E, WorkersFanOutAndTheResultDoesNotDependOnTheirNumber) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs two cores";
  const std::string code =
      "torch.matmul(torch.nn.functional.silu(torch.matmul(torch.randn(32,64), torch.randn(64,96))),"
      " torch.randn(96,48))";
  auto tune = [&](const std::string& workers, const std::string& json_name,
                  const std::string& cores_per_worker = "1") {
    return emmy({"tune",
                 "--backend",
                 "cpu",
                 "--code",
                 code,
                 "--workers",
                 workers,
                 "--backend-option",
                 "cores_per_worker=" + cores_per_worker,
                 "--patience",
                 "2",
                 "--samples",
                 "3",
                 "--warmup",
                 "1",
                 "--prior",
                 "roofline",
                 "--no-progress",
                 "--json",
                 path(json_name)});
  };
  Completed two = tune("2", "two.json");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  json r2 = report("two.json");
  EXPECT_EQ(r2["status"], "ok");
  EXPECT_EQ(r2["devices"], 2);
  EXPECT_GE(r2["kernels_distinct"].get<int>(), 2);
  EXPECT_GT(r2["launches"].get<int>(), 0);
  EXPECT_NE(two.out.find("on 2 devices"), std::string::npos) << two.out;

  Completed one = tune("1", "one.json");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  json r1 = report("one.json");
  EXPECT_EQ(r1["devices"], 1);
  EXPECT_EQ(r1["launches"], 0) << "one worker took another path over the same measurements";
  EXPECT_EQ(r1["groupings_tried"], r2["groupings_tried"]);
  EXPECT_EQ(r1["best_total_us"], r2["best_total_us"]);
  ASSERT_EQ(r1["kernels"].size(), r2["kernels"].size());
  for (size_t i = 0; i < r1["kernels"].size(); ++i)
    for (const char* field : {"key", "template", "config", "best_deploy_us", "evaluations"})
      EXPECT_EQ(r1["kernels"][i][field], r2["kernels"][i][field]) << field << " of kernel " << i;
  EXPECT_EQ(r1["env"], r2["env"]);
  // One worker on two cores measures on another device: nothing of the one-core runs is reused.
  Completed wide = tune("1", "wide.json", "2");
  ASSERT_EQ(wide.exit_code, 0) << wide.err;
  json rw = report("wide.json");
  EXPECT_NE(rw["env"], r1["env"]);
  EXPECT_GT(rw["launches"].get<int>(), 0);

  // Devices belong to their backend; nonsense counts are usage errors.
  Completed gpus = emmy({"tune", "--backend", "cpu", "--code", kMatmul, "--gpus", "2"});
  EXPECT_EQ(gpus.exit_code, 2) << gpus.err;
  EXPECT_NE(gpus.err.find("--workers"), std::string::npos) << gpus.err;
  Completed zero = emmy({"tune", "--backend", "cpu", "--code", kMatmul, "--workers", "0"});
  EXPECT_EQ(zero.exit_code, 2) << zero.err;
  Completed many = emmy({"tune", "--backend", "cpu", "--code", kMatmul, "--workers", "100000"});
  EXPECT_EQ(many.exit_code, 2) << many.err;
  EXPECT_NE(many.err.find("cores"), std::string::npos) << many.err;
  // A misspelt backend option is an error naming the options there are, not silently ignored.
  Completed typo = emmy(
      {"tune", "--backend", "cpu", "--code", kMatmul, "--backend-option", "core_per_worker=1"});
  EXPECT_EQ(typo.exit_code, 2) << typo.err;
  EXPECT_NE(typo.err.find("has no option 'core_per_worker'"), std::string::npos) << typo.err;
  EXPECT_NE(typo.err.find("cores_per_worker"), std::string::npos) << typo.err;
}

}  // namespace
