// Broken candidates become failure rows of the right kind, and the next measurement works on a
// fresh worker: a kernel that segfaults, one that never returns, one that does not compile.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "build_pool.hpp"
#include "cpu_harness.hpp"
#include "emitter.hpp"

namespace emmy::cpu::testing {
namespace {

using ir::DType;

struct Fixture {
  CpuBackend backend{{{"cache_dir", fresh_cache_dir()}, {"worker", worker_executable()}}};
  ir::Graph graph;
  ir::Slice slice;
  MeasureRequest request;

  Fixture() {
    ir::Builder b(graph);
    auto x = b.input("x", {DType::f32, {16}});
    b.output(b.add(x, b.constant(1.0)));
    slice = whole_graph_slice(graph, "pointwise", {});
    std::vector<float> xs(16);
    for (int i = 0; i < 16; ++i) xs[static_cast<size_t>(i)] = static_cast<float>(i);
    request.inputs.tensors.emplace_back(reinterpret_cast<unsigned char*>(xs.data()),
                                        reinterpret_cast<unsigned char*>(xs.data()) + 64);
    request.warmup = 1;
    request.samples = 3;
  }

  Artifact built(const std::string& source) {
    Artifact a;
    MeasureResult f;
    EXPECT_TRUE(backend.build_source(source, Regime::rank, a, f).ok());
    EXPECT_EQ(f.failure, FailureKind::none) << f.message;
    return a;
  }

  // The good kernel measures fine and computes x + 1.
  void expect_good_measurement() {
    Artifact a;
    MeasureResult f;
    ASSERT_TRUE(backend.build(slice, Regime::rank, a, f).ok());
    ASSERT_EQ(f.failure, FailureKind::none) << f.message;
    MeasureResult r;
    ASSERT_TRUE(backend.measure(slice, a, request, r).ok());
    ASSERT_EQ(r.failure, FailureKind::none) << r.message;
    ASSERT_EQ(r.outputs.tensors.size(), 1u);
    ASSERT_EQ(r.outputs.tensors[0].size(), 64u);
    float out[16];
    std::memcpy(out, r.outputs.tensors[0].data(), 64);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], static_cast<float>(i) + 1.0f);
    EXPECT_EQ(r.samples_us.size(), 3u);
  }
};

const char* kSegfault = R"(extern "C" void emmy_kernel(const void* const*, void* const*) {
  volatile int* p = nullptr; *p = 42;
})";
const char* kHang = R"(extern "C" void emmy_kernel(const void* const*, void* const*) {
  volatile unsigned long spin = 0; for (;;) ++spin;
})";

TEST(CpuIsolation, SegfaultIsARuntimeFaultAndTheWorkerIsReplaced) {
  Fixture fx;
  fx.expect_good_measurement();
  const pid_t before = fx.backend.worker_pid();
  ASSERT_GT(before, 0);
  Artifact bad = fx.built(kSegfault);
  MeasureResult r;
  ASSERT_TRUE(fx.backend.measure(fx.slice, bad, fx.request, r).ok());
  EXPECT_EQ(r.failure, FailureKind::runtime_fault);
  EXPECT_NE(r.message.find("SIGSEGV"), std::string::npos) << r.message;
  fx.expect_good_measurement();
  EXPECT_NE(fx.backend.worker_pid(), before);
}

TEST(CpuIsolation, HangIsATimeoutAndTheWorkerIsReplaced) {
  Fixture fx;
  Artifact bad = fx.built(kHang);
  MeasureRequest req = fx.request;
  req.timeout_s = 1.5;
  MeasureResult r;
  ASSERT_TRUE(fx.backend.measure(fx.slice, bad, req, r).ok());
  EXPECT_EQ(r.failure, FailureKind::timeout);
  EXPECT_FALSE(r.message.empty());
  EXPECT_EQ(fx.backend.worker_pid(), -1);  // killed, not left spinning
  fx.expect_good_measurement();
}

TEST(CpuIsolation, CompileErrorIsABuildErrorWithTheCompilersMessage) {
  Fixture fx;
  Artifact a;
  MeasureResult f;
  ASSERT_TRUE(
      fx.backend
          .build_source("extern \"C\" void emmy_kernel() { this is not C++; }", Regime::rank, a, f)
          .ok());
  EXPECT_EQ(f.failure, FailureKind::build_error);
  EXPECT_NE(f.message.find("error"), std::string::npos) << f.message;
  EXPECT_TRUE(a.handle.empty());
  fx.expect_good_measurement();
}

TEST(CpuIsolation, MissingEntryPointIsARuntimeFaultWithoutLosingTheWorker) {
  Fixture fx;
  fx.expect_good_measurement();
  const pid_t before = fx.backend.worker_pid();
  Artifact a = fx.built("extern \"C\" void something_else() {}");
  MeasureResult r;
  ASSERT_TRUE(fx.backend.measure(fx.slice, a, fx.request, r).ok());
  EXPECT_EQ(r.failure, FailureKind::runtime_fault);
  EXPECT_NE(r.message.find("emmy_kernel"), std::string::npos) << r.message;
  fx.expect_good_measurement();
  EXPECT_EQ(fx.backend.worker_pid(), before);
}

// The machinery's failures are not the candidate's (emmy/backend.hpp): a worker killed from
// outside, or one that exits without answering, makes measure() return an error (nothing to
// store), and the next measurement starts a fresh worker.
TEST(CpuIsolation, AWorkerKilledFromOutsideIsAnErrorNotAFailureRow) {
  Fixture fx;
  fx.expect_good_measurement();
  const pid_t victim = fx.backend.worker_pid();
  ASSERT_GT(victim, 0);
  Artifact hang = fx.built(kHang);
  MeasureRequest req = fx.request;
  req.timeout_s = 30;
  std::thread killer([victim] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(victim, SIGKILL);
  });
  MeasureResult r;
  Status st = fx.backend.measure(fx.slice, hang, req, r);
  killer.join();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("SIGKILL"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("from outside"), std::string::npos) << st.message();
  fx.expect_good_measurement();
  EXPECT_NE(fx.backend.worker_pid(), victim);
}

TEST(CpuIsolation, AWorkerThatExitsWithoutAnsweringIsAnError) {
  CpuBackend backend{{{"cache_dir", fresh_cache_dir()}, {"worker", "/bin/false"}}};
  Fixture fx;
  Artifact a;
  MeasureResult f;
  ASSERT_TRUE(backend.build(fx.slice, Regime::rank, a, f).ok());
  MeasureResult r;
  Status st = backend.measure(fx.slice, a, fx.request, r);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/bin/false exited with status 1"), std::string::npos)
      << st.message();
  CpuBackend missing{{{"cache_dir", fresh_cache_dir()}, {"worker", "/nonexistent/worker"}}};
  st = missing.measure(fx.slice, a, fx.request, r);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot start"), std::string::npos) << st.message();
}

TEST(CpuIsolation, BadRequestsAreErrorsNamingTheProblem) {
  Fixture fx;
  Artifact a;
  MeasureResult f;
  ASSERT_TRUE(fx.backend.build(fx.slice, Regime::rank, a, f).ok());
  MeasureRequest req = fx.request;
  req.inputs.tensors[0].resize(12);
  MeasureResult r;
  Status st = fx.backend.measure(fx.slice, a, req, r);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("input 0"), std::string::npos) << st.message();
}

TEST(CpuBuild, PoolBuildsInParallelAndCachesBySource) {
  Fixture fx;
  BuildPool pool(fx.backend, 2);
  std::vector<std::future<BuildOutcome>> futures;
  for (double threads : {1.0, 2.0}) {
    for (double vec : {1.0, 8.0}) {
      futures.push_back(pool.submit(
          whole_graph_slice(fx.graph, "pointwise", {{"threads", threads}, {"vec", vec}}),
          Regime::rank));
    }
  }
  futures.push_back(pool.submit(fx.slice, Regime::rank));
  std::map<std::string, std::string> handle_of_source;
  std::set<std::string> handles;
  for (auto& fu : futures) {
    BuildOutcome out = fu.get();
    ASSERT_TRUE(out.status.ok()) << out.status.message();
    ASSERT_EQ(out.failure.failure, FailureKind::none) << out.failure.message;
    auto [it, fresh] = handle_of_source.emplace(out.artifact.source, out.artifact.handle);
    EXPECT_EQ(it->second, out.artifact.handle);  // the same source is the same cached library
    handles.insert(out.artifact.handle);
  }
  // threads is moot for one row of 16 elements; vec is not: two distinct kernels.
  EXPECT_EQ(handle_of_source.size(), 2u);
  EXPECT_EQ(handles.size(), handle_of_source.size());
  EXPECT_NE(fx.backend.environment_fingerprint().find("cpu|"), std::string::npos);
}

}  // namespace
}  // namespace emmy::cpu::testing
