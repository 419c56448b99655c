// The measurer on its own (tune/measurer.hpp): a configuration found in the database is served
// without building anything; one that is not is built, measured, checked and recorded (the store's
// row, the prior's row, the counters). A real RocksDB database in a temporary folder and a backend
// of the test's own that answers at once and counts what it is asked.
#include "tune/measurer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "backend_cuda/perf_graphs.hpp"
#include "ir/interpreter.hpp"
#include "store/tuning_store.hpp"

namespace emmy::tune {
namespace {

namespace fs = std::filesystem;

// Builds and "runs" anything: returns the outputs it was told to, or the failure it was told to.
class ScriptedBackend final : public Backend {
 public:
  std::string name() const override { return "scripted"; }
  BackendCaps capabilities() const override { return {}; }
  std::string environment_fingerprint() const override { return "scripted-env"; }
  Status build(const ir::Slice&, Regime, Artifact& artifact, MeasureResult& r) noexcept override {
    ++builds;
    if (build_status_errors > 0) {
      --build_status_errors;
      return Status::Error("worker gone");
    }
    r.failure = build_failure;
    r.message = build_failure == FailureKind::none ? "" : "does not compile";
    artifact.handle = "a";
    return Status::Ok();
  }
  Status measure(const ir::Slice&, const Artifact&, const MeasureRequest& request,
                 MeasureResult& r) noexcept override {
    ++measures;
    last_timeout_s = request.timeout_s;
    r.failure = measure_failure;
    if (measure_failure != FailureKind::none) return Status::Ok();
    r.median_us = 12.5;
    r.samples_us = {12, 12.5, 13};
    r.outputs = outputs;
    return Status::Ok();
  }

  int builds = 0, measures = 0, build_status_errors = 0;
  double last_timeout_s = 0;
  FailureKind build_failure = FailureKind::none, measure_failure = FailureKind::none;
  Buffers outputs;
};

// One matmul kernel lowered to template "matmul" with one knob.
ir::Program matmul_program() {
  ir::Program p;
  ir::Builder b(p.graph);
  auto x = b.input("x", {ir::DType::f32, {4, 8}});
  auto w = b.input("w", {ir::DType::f32, {8, 4}});
  b.output(b.matmul(x, w));
  p.grouping = ir::singleton_grouping(p.graph);
  for (auto& k : p.grouping.kernels) {
    k.templ = "matmul";
    k.knobs = {{"tile_m", 4}};
  }
  return p;
}

class MeasurerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = fs::temp_directory_path() /
            ("emmy-measurer-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(home_);
    fs::create_directories(home_);
    store_ = store::TuningStore::open_writer((home_ / "tuning.db").string());
    program_ = matmul_program();
    reference_.inputs = ir::random_inputs(program_.graph, 3);
    reference_.expected = ir::evaluate(program_.graph, reference_.inputs);
    backend_.outputs = to_buffers(reference_.expected);
    measurer_ = std::make_unique<Measurer>(
        MeasurerServices{*store_, backend_, "scripted-env", "run-1", progress_, rows_, counters_},
        MeasureSettings{1, 3, 20, 10});
  }
  void TearDown() override {
    measurer_.reset();
    store_.reset();
    fs::remove_all(home_);
  }

  CandidateMeasurement candidate(Regime regime = Regime::rank, double limit_s = 20) {
    CandidateMeasurement c;
    c.program = &program_;
    c.row_key = "key-1";
    c.kernel_name = "matmul";
    c.regime = regime;
    c.limit_s = limit_s;
    return c;
  }

  store::MeasurementRecord measure(const CandidateMeasurement& c, bool& cached) {
    return measurer_->measure(
        c,
        [&]() -> const Reference& {
          ++references_;
          return reference_;
        },
        cached);
  }

  // A candidate whose build ends in `kind`: nothing measured, the row stored with that kind, no
  // prior row learned from it.
  void expect_build_outcome_stored(FailureKind kind) {
    backend_.build_failure = kind;
    bool cached = true;
    store::MeasurementRecord rec = measure(candidate(), cached);
    EXPECT_EQ(rec.failure, kind);
    EXPECT_EQ(backend_.measures, 0);
    auto stored =
        store_->lookup("scripted-env", "key-1", program_config_key(program_), Regime::rank);
    ASSERT_TRUE(stored.has_value());
    EXPECT_EQ(stored->failure, kind);
    EXPECT_TRUE(rows_.rows().empty());
  }

  fs::path home_;
  std::unique_ptr<store::TuningStore> store_;
  ScriptedBackend backend_;
  Progress progress_{false, false};
  PriorRowSink rows_;
  Counters counters_;
  std::unique_ptr<Measurer> measurer_;
  ir::Program program_;
  Reference reference_;
  int references_ = 0;
};

TEST_F(MeasurerTest, ASuccessRecordsTheStoreRowThePriorRowAndTheCounters) {
  bool cached = true;
  store::MeasurementRecord rec = measure(candidate(), cached);
  ASSERT_TRUE(rec.ok()) << rec.message;
  EXPECT_FALSE(cached);
  EXPECT_DOUBLE_EQ(rec.median_us, 12.5);

  auto stored = store_->lookup("scripted-env", "key-1", program_config_key(program_), Regime::rank);
  ASSERT_TRUE(stored.has_value());
  EXPECT_TRUE(stored->ok());
  EXPECT_EQ(stored->templ, "matmul");
  EXPECT_EQ(stored->kernel_name, "matmul");
  EXPECT_EQ(stored->run_id, "run-1");
  EXPECT_EQ(stored->knobs, (std::map<std::string, double>{{"tile_m", 4}}));

  const std::vector<PriorRow> rows = rows_.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].features.op_class, "matmul");
  EXPECT_DOUBLE_EQ(rows[0].time_us, 12.5);
  EXPECT_EQ(rows[0].knobs, (std::map<std::string, double>{{"tile_m", 4}}));
  EXPECT_EQ(rows[0].regime, Regime::rank);

  EXPECT_EQ(counters_.built, 1);
  EXPECT_EQ(counters_.launches, 1);
  EXPECT_EQ(counters_.measured, 1);
  EXPECT_EQ(counters_.deploy, 0);
  EXPECT_EQ(counters_.failures, 0);
  EXPECT_EQ(counters_.cache_hits, 0);
  EXPECT_EQ(references_, 1);
}

TEST_F(MeasurerTest, ALookUpHitBuildsNothingAndNeedsNoReference) {
  bool cached = false;
  measure(candidate(Regime::deploy), cached);
  ASSERT_EQ(backend_.builds, 1);

  Measurer again({*store_, backend_, "scripted-env", "run-2", progress_, rows_, counters_},
                 MeasureSettings{1, 3, 20, 10});
  references_ = 0;
  store::MeasurementRecord rec = again.measure(
      candidate(Regime::deploy),
      [&]() -> const Reference& {
        ++references_;
        return reference_;
      },
      cached);
  EXPECT_TRUE(cached);
  EXPECT_TRUE(rec.ok());
  EXPECT_EQ(rec.run_id, "run-1") << "the row measured by the first run";
  EXPECT_EQ(backend_.builds, 1);
  EXPECT_EQ(backend_.measures, 1);
  EXPECT_EQ(references_, 0);
  EXPECT_EQ(counters_.cache_hits, 1);
  EXPECT_EQ(counters_.deploy, 1) << "counted once, by the measurement";
  EXPECT_EQ(rows_.rows().size(), 1u) << "a cached row is not learned twice";
}

TEST_F(MeasurerTest, ABuildFailureIsStoredAndCountedButTeachesThePriorNothing) {
  expect_build_outcome_stored(FailureKind::build_error);
  EXPECT_EQ(counters_.failures, 1);
  EXPECT_EQ(counters_.built, 1);
}

// A knob value the template refuses to generate built and ran nothing: stored (a re-run drops
// it again without asking), counted as refused and not among the run's failures.
TEST_F(MeasurerTest, ARefusalIsStoredAndCountedApartFromTheFailures) {
  expect_build_outcome_stored(FailureKind::refused);
  EXPECT_EQ(counters_.refused, 1);
  EXPECT_EQ(counters_.failures, 0);
  EXPECT_EQ(counters_.built, 0);
}

TEST_F(MeasurerTest, AWrongResultIsAFailureOfTheCandidate) {
  backend_.outputs.tensors[0].assign(backend_.outputs.tensors[0].size(), 0x7f);
  bool cached = true;
  store::MeasurementRecord rec = measure(candidate(), cached);
  EXPECT_EQ(rec.failure, FailureKind::wrong_result);
  EXPECT_NE(rec.message.find("output 0"), std::string::npos) << rec.message;
  EXPECT_EQ(counters_.failures, 1);
  EXPECT_TRUE(rows_.rows().empty());
}

// A kernel rounding otherwise than the graph (an RMSNorm absorbed by its product: x * w rounded
// once, r on the f32 sums) fails the per-element check where outputs cancel, yet is as close to
// exact arithmetic as the graph: accepted and counted. The same outputs with one element moved
// past the graph's worst rounding error are a wrong result that says so.
TEST_F(MeasurerTest, ADifferentRoundingAsAccurateAsTheGraphsIsAccepted) {
  ir::Slice one =
      cuda::perf::one_kernel(cuda::perf::rmsnorm_linear(200, 320, 136), "matmul", {{"tile_m", 64}});
  program_ = {};
  program_.graph = std::move(one.graph);
  program_.grouping = std::move(one.grouping);
  reference_.inputs = ir::random_inputs(program_.graph, 17);
  reference_.expected = ir::evaluate(program_.graph, reference_.inputs);
  const std::vector<ir::HostTensor> absorbed =
      ir::evaluate(cuda::perf::rmsnorm_linear_as_absorbed(200, 320, 136), reference_.inputs);
  ASSERT_NE(ir::compare(reference_.expected[0], absorbed[0], ir::DType::bf16), "");
  backend_.outputs = to_buffers(absorbed);
  bool cached = true;
  store::MeasurementRecord rec = measure(candidate(), cached);
  EXPECT_TRUE(rec.ok()) << rec.message;
  EXPECT_EQ(counters_.accurate_not_alike, 1);
  EXPECT_EQ(counters_.failures, 0);

  std::vector<double> moved = ir::to_doubles(absorbed[0]);
  moved[0] += 1.0;  // the graph's worst error against exact arithmetic is 0.08
  backend_.outputs = to_buffers({ir::from_doubles(absorbed[0].type, moved)});
  program_.grouping.kernels[0].knobs["tile_m"] = 128;  // another configuration: measured
  rec = measure(candidate(), cached);
  EXPECT_EQ(rec.failure, FailureKind::wrong_result);
  EXPECT_NE(rec.message.find("against exact arithmetic"), std::string::npos) << rec.message;
  EXPECT_NE(rec.message.find("at [0,0]"), std::string::npos) << rec.message;
  EXPECT_EQ(counters_.accurate_not_alike, 1);
  EXPECT_EQ(counters_.failures, 1);
}

TEST_F(MeasurerTest, ATimeoutUnderAShorterLimitIsMeasuredAgain) {
  backend_.measure_failure = FailureKind::timeout;
  bool cached = true;
  CandidateMeasurement short_limit = candidate(Regime::rank, 2.5);
  short_limit.relative = true;
  short_limit.known_us = 40;
  store::MeasurementRecord cut = measure(short_limit, cached);
  EXPECT_EQ(cut.failure, FailureKind::timeout);
  EXPECT_DOUBLE_EQ(cut.timeout_s, 2.5);
  EXPECT_EQ(cut.message.rfind("cut short after 2.5 s", 0), 0u) << cut.message;
  EXPECT_EQ(counters_.cut, 1);

  // The same limit finds the row; a longer one measures again, and what it finds replaces it.
  measure(short_limit, cached);
  EXPECT_TRUE(cached);
  backend_.measure_failure = FailureKind::none;
  store::MeasurementRecord longer = measure(candidate(Regime::rank, 20), cached);
  EXPECT_FALSE(cached);
  EXPECT_TRUE(longer.ok());
  EXPECT_DOUBLE_EQ(backend_.last_timeout_s, 20);
  EXPECT_EQ(backend_.measures, 2);
}

TEST_F(MeasurerTest, TheMachineryFailingTwiceStopsTheRunWithNothingStored) {
  backend_.build_status_errors = 2;
  bool cached = true;
  EXPECT_THROW(measure(candidate(), cached), MachineryFailure);
  EXPECT_FALSE(store_->lookup("scripted-env", "key-1", program_config_key(program_), Regime::rank));
  EXPECT_EQ(counters_.failures, 0);

  backend_.build_status_errors = 1;  // once is retried
  store::MeasurementRecord rec = measure(candidate(), cached);
  EXPECT_TRUE(rec.ok()) << rec.message;
}

TEST(MeasureSettings, ComeFromTheRunsOptions) {
  TuneOptions o;
  o.warmup = 2;
  o.samples = 9;
  o.timeout_s = 7;
  o.hopeless_factor = 4;
  const MeasureSettings s = MeasureSettings::of(o);
  EXPECT_EQ(s.warmup, 2);
  EXPECT_EQ(s.samples, 9);
  EXPECT_EQ(s.timeout_s, 7);
  EXPECT_EQ(s.hopeless_factor, 4);
}

}  // namespace
}  // namespace emmy::tune
