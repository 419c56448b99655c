// A measurement row names the template that ran: when the backend builds its fallback kernel for a
// kernel lowered to a template that cannot generate it, the row says "fallback", not the template
// asked for (issue 17, "Records say what ran"). Real cpu backend, real worker, real RocksDB.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "emmy/plugin.hpp"
#include "emmy/templates.hpp"
#include "ir/interpreter.hpp"
#include "tune/measurer.hpp"

namespace {

namespace fs = std::filesystem;

std::shared_ptr<emmy::Backend> load_cpu_backend(const std::string& cache_dir) {
  const std::string path = std::string(EMMY_BUILD_DIR) + "/lib/emmy/plugins/libemmy_cpu.so";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw std::runtime_error("cannot load " + path + ": " + dlerror());
  auto entry = reinterpret_cast<EmmyPluginInfoFn>(dlsym(lib, EMMY_PLUGIN_ENTRY_SYMBOL));
  const EmmyPluginInfo* info = entry();
  const std::string options = "cache_dir=" + cache_dir + "\n";
  char error[512] = {0};
  void* object = info->create(options.c_str(), nullptr, error, sizeof error);
  if (!object) throw std::runtime_error(std::string("creating the cpu backend: ") + error);
  return std::shared_ptr<emmy::Backend>(static_cast<emmy::Backend*>(object),
                                        [info](emmy::Backend* b) { info->destroy(b); });
}

// A softmax over rows: a reduction, which the pointwise template cannot generate at any knobs.
emmy::ir::Program softmax_lowered_to(const std::string& templ) {
  emmy::ir::Program p;
  emmy::ir::Builder b(p.graph);
  auto x = b.input("x", {emmy::ir::DType::f32, {4, 33}});
  b.output(b.softmax(x, -1));
  p.grouping = emmy::ir::singleton_grouping(p.graph);
  for (auto& k : p.grouping.kernels) k.templ = templ;
  return p;
}

// A fresh folder named `name` (and this process), empty.
fs::path fresh_home(const std::string& name) {
  const fs::path home = fs::temp_directory_path() / (name + std::to_string(getpid()));
  fs::remove_all(home);
  fs::create_directories(home);
  return home;
}

// A Measurer over the real cpu backend and a RocksDB store in a home of its own, removed after.
struct CpuMeasurer {
  explicit CpuMeasurer(const std::string& name)
      : home(fresh_home(name)),
        backend(load_cpu_backend((home / "cache").string())),
        store(emmy::store::TuningStore::open_writer((home / "tuning.db").string())),
        measurer({*store, *backend, backend->environment_fingerprint(), "test-run", progress, rows,
                  counters},
                 settings()) {}
  ~CpuMeasurer() {
    store.reset();
    fs::remove_all(home);
  }
  static emmy::tune::MeasureSettings settings() {
    emmy::tune::TuneOptions options;
    options.samples = 3;
    options.warmup = 1;
    return emmy::tune::MeasureSettings::of(options);
  }

  const fs::path home;
  std::shared_ptr<emmy::Backend> backend;
  std::unique_ptr<emmy::store::TuningStore> store;
  emmy::tune::Progress progress{false, false};
  emmy::tune::Counters counters;
  emmy::tune::PriorRowSink rows;
  emmy::tune::Measurer measurer;
};

TEST(RecordTemplate, AFallbackBuiltForAnotherTemplateIsRecordedAsFallback) {
  CpuMeasurer cpu("emmy-record-templ-");
  emmy::tune::Measurer& measurer = cpu.measurer;

  for (const std::string templ : {"pointwise", "reduction"}) {
    emmy::ir::Program p = softmax_lowered_to(templ);
    ASSERT_EQ(p.grouping.kernels.size(), 1u);
    auto inputs = emmy::ir::random_inputs(p.graph, 7);
    auto expected = emmy::ir::evaluate(p.graph, inputs);
    emmy::store::MeasurementRecord rec =
        measurer.build_and_measure(p, emmy::Regime::rank, inputs, expected);
    ASSERT_TRUE(rec.ok()) << templ << ": " << rec.message;
    if (templ == "pointwise")
      EXPECT_EQ(rec.templ, "fallback") << "the pointwise template cannot compute a softmax";
    else
      EXPECT_EQ(rec.templ, "") << "the reduction template built it: the caller's template stands";
  }
}

// Inputs lent as Buffers (the validation's, made once) are what the request carries, checked
// against the reference like copied ones, and are the caller's again afterwards, unchanged; lent
// wrong inputs are a wrong result, so they are really what was sent.
TEST(RecordTemplate, LentInputsAreSentAndGivenBack) {
  CpuMeasurer cpu("emmy-lent-");
  emmy::tune::Measurer& measurer = cpu.measurer;
  emmy::ir::Program p = softmax_lowered_to("reduction");
  auto inputs = emmy::ir::random_inputs(p.graph, 7);
  auto expected = emmy::ir::evaluate(p.graph, inputs);
  emmy::Buffers lent = emmy::tune::to_buffers(inputs);
  const emmy::Buffers before = lent;
  emmy::store::MeasurementRecord rec = measurer.build_and_measure(
      p, emmy::Regime::rank, inputs, expected, false, 0, 0, false, &lent);
  EXPECT_TRUE(rec.ok()) << rec.message;
  EXPECT_EQ(lent.tensors, before.tensors);
  emmy::Buffers wrong = emmy::tune::to_buffers(emmy::ir::random_inputs(p.graph, 8));
  rec = measurer.build_and_measure(p, emmy::Regime::rank, inputs, expected, false, 0, 0, false,
                                   &wrong);
  EXPECT_EQ(rec.failure, emmy::FailureKind::wrong_result) << rec.message;
  EXPECT_FALSE(wrong.tensors.empty());
}

}  // namespace
