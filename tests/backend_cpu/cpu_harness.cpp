#include "cpu_harness.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <vector>

#include "templates.hpp"

namespace emmy::cpu::testing {

namespace fs = std::filesystem;

std::string worker_executable() {
  return std::string(EMMY_BUILD_DIR) + "/libexec/emmy/emmy-cpu-worker";
}

namespace {

// The cache directories this process created, removed when the tests are done.
std::mutex dirs_mutex;
std::vector<fs::path> created_dirs;

class RemoveCacheDirs : public ::testing::Environment {
 public:
  void TearDown() override {
    std::lock_guard<std::mutex> lock(dirs_mutex);
    std::error_code ec;
    for (const auto& d : created_dirs) fs::remove_all(d, ec);
  }
};
[[maybe_unused]] ::testing::Environment* const remove_cache_dirs =
    ::testing::AddGlobalTestEnvironment(new RemoveCacheDirs);

}  // namespace

std::string fresh_cache_dir() {
  static std::atomic<int> n{0};
  fs::path p = fs::temp_directory_path() /
               ("emmy-cpu-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
  fs::remove_all(p);
  std::lock_guard<std::mutex> lock(dirs_mutex);
  created_dirs.push_back(p);
  return p.string();
}

CpuBackend& shared_backend() {
  static CpuBackend backend({{"cache_dir", fresh_cache_dir()}, {"worker", worker_executable()}});
  return backend;
}

ir::Slice whole_graph_slice(const ir::Graph& g, const std::string& templ,
                            const std::map<std::string, double>& knobs) {
  ir::Slice s;
  s.graph = g;
  ir::Kernel k;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op != ir::Op::input && g.nodes[i].op != ir::Op::constant)
      k.nodes.push_back(static_cast<ir::ValueId>(i));
  k.templ = templ;
  k.knobs = knobs;
  s.grouping.kernels.push_back(k);
  for (size_t i = 0; i < g.nodes.size(); ++i) s.origin.push_back(static_cast<ir::ValueId>(i));
  return s;
}

std::string check_against_reference(const ir::Graph& g, const std::string& templ,
                                    const std::map<std::string, double>& knobs, Regime regime,
                                    uint64_t seed) {
  if (std::string bad = ir::verify(g); !bad.empty()) return "invalid test graph: " + bad;
  ir::Slice slice = whole_graph_slice(g, templ, knobs);
  std::string used;
  generate_source(slice, &used);
  if (used != (templ.empty() ? "fallback" : templ))
    return "template " + templ + " fell back to " + used;

  Artifact artifact;
  return build_and_check(shared_backend(), slice, regime, seed, artifact);
}

std::string build_and_check(CpuBackend& backend, const ir::Slice& slice, Regime regime,
                            uint64_t seed, Artifact& artifact) {
  MeasureResult failure;
  Status st = backend.build(slice, regime, artifact, failure);
  if (!st.ok()) return "build: " + st.message();
  if (failure.failure != FailureKind::none)
    return "build failed: " + failure.message + "\n" + artifact.source;

  std::vector<ir::HostTensor> inputs = ir::random_inputs(slice.graph, seed);
  std::vector<ir::HostTensor> expected = ir::evaluate(slice.graph, inputs);
  MeasureRequest request;
  for (const auto& t : inputs) request.inputs.tensors.push_back(t.data);
  request.warmup = 1;
  request.samples = 3;
  MeasureResult result;
  st = backend.measure(slice, artifact, request, result);
  if (!st.ok()) return "measure: " + st.message();
  if (result.failure != FailureKind::none)
    return std::string("measure failed: ") + to_string(result.failure) + ": " + result.message;
  if (result.outputs.tensors.size() != expected.size()) return "wrong number of outputs";
  if (!(result.median_us > 0)) return "no timing";
  for (size_t k = 0; k < expected.size(); ++k) {
    ir::HostTensor actual{expected[k].type, result.outputs.tensors[k]};
    std::string diff = ir::compare(expected[k], actual);
    if (!diff.empty()) return "output " + std::to_string(k) + ": " + diff + "\n" + artifact.source;
  }
  return "";
}

}  // namespace emmy::cpu::testing
