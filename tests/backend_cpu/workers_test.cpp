// workers=N: N measurement processes side by side, each pinned to its own cores, so the tuner can
// give each one a kernel (BackendCaps::devices).
#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "cpu_harness.hpp"

namespace emmy::cpu::testing {
namespace {

using ir::DType;

size_t usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? static_cast<size_t>(CPU_COUNT(&set)) : 1;
}

// The cores the kernel lets process `pid` run on, from /proc/PID/status ("0-1", "3", "0,2").
std::set<int> allowed_cores(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  std::set<int> out;
  while (std::getline(in, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) != 0) continue;
    std::string list = line.substr(line.find(':') + 1);
    size_t pos = 0;
    while (pos < list.size()) {
      size_t end = list.find(',', pos);
      if (end == std::string::npos) end = list.size();
      std::string part = list.substr(pos, end - pos);
      size_t dash = part.find('-');
      int lo = std::stoi(part),
          hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
      for (int c = lo; c <= hi; ++c) out.insert(c);
      pos = end + 1;
    }
  }
  return out;
}

// A kernel that doubles its 1024 floats, and on its first call says it started (a file) and then
// holds its worker until told to go on (another file), for at most 60 s: the second measurement
// then finds the first worker busy whatever the machine's speed or load.
std::string gated_kernel(const std::string& started, const std::string& release) {
  return R"(#include <chrono>
#include <fstream>
#include <thread>
extern "C" void emmy_kernel(const void* const* in, void* const* out) {
  static bool held = false;
  if (!held) {
    held = true;
    std::ofstream(")" +
         started + R"(") << "started";
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!std::ifstream(")" +
         release + R"(").good() && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const float* x = static_cast<const float*>(in[0]);
  float* y = static_cast<float*>(out[0]);
  for (int i = 0; i < 1024; ++i) y[i] = x[i] * 2.0f;
})";
}

TEST(CpuWorkers, TwoWorkersMeasureSideBySideOnDisjointCores) {
  if (usable_cores() < 2) GTEST_SKIP() << "needs two cores";
  const std::string dir = fresh_cache_dir();
  CpuBackend backend{{{"cache_dir", dir}, {"worker", worker_executable()}, {"workers", "2"}}};
  EXPECT_EQ(backend.capabilities().devices, 2);
  ASSERT_EQ(backend.workers(), 2u);

  ir::Graph graph;
  ir::Builder b(graph);
  auto x = b.input("x", {DType::f32, {1024}});
  b.output(b.mul(x, b.constant(2.0)));
  ir::Slice slice = whole_graph_slice(graph, "pointwise", {});
  Artifact artifact, gated;
  MeasureResult failure;
  ASSERT_TRUE(backend.build(slice, Regime::rank, artifact, failure).ok());
  ASSERT_EQ(failure.failure, FailureKind::none) << failure.message;
  const std::filesystem::path started = std::filesystem::path(dir) / "gate-started",
                              release = std::filesystem::path(dir) / "gate-release";
  ASSERT_TRUE(backend
                  .build_source(gated_kernel(started.string(), release.string()), Regime::rank,
                                gated, failure)
                  .ok());
  ASSERT_EQ(failure.failure, FailureKind::none) << failure.message;
  MeasureRequest request;
  std::vector<float> xs(1024, 1.5f);
  request.inputs.tensors.emplace_back(reinterpret_cast<unsigned char*>(xs.data()),
                                      reinterpret_cast<unsigned char*>(xs.data()) + xs.size() * 4);
  request.warmup = 1;
  request.samples = 20;
  request.timeout_s = 120;

  // The first measurement holds its worker; the second runs to its end meanwhile.
  MeasureResult r[2];
  std::thread t0([&] { EXPECT_TRUE(backend.measure(slice, gated, request, r[0]).ok()); });
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::filesystem::exists(started) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const bool held = std::filesystem::exists(started);
  if (held) {
    EXPECT_TRUE(backend.measure(slice, artifact, request, r[1]).ok());
  }
  std::ofstream(release) << "go on";
  t0.join();
  ASSERT_TRUE(held) << "the gated kernel never started";
  for (const MeasureResult& res : r) {
    ASSERT_EQ(res.failure, FailureKind::none) << res.message;
    float first = 0;
    std::memcpy(&first, res.outputs.tensors.at(0).data(), 4);
    EXPECT_EQ(first, 3.0f);
  }
  // Both workers were started (the second call found the first busy), each pinned to its share.
  const pid_t p0 = backend.worker_pid(0), p1 = backend.worker_pid(1);
  ASSERT_GT(p0, 0);
  ASSERT_GT(p1, 0);
  EXPECT_NE(p0, p1);
  std::set<int> c0 = allowed_cores(p0), c1 = allowed_cores(p1);
  EXPECT_EQ(c0, std::set<int>(backend.worker_cpus(0).begin(), backend.worker_cpus(0).end()));
  EXPECT_EQ(c1, std::set<int>(backend.worker_cpus(1).begin(), backend.worker_cpus(1).end()));
  ASSERT_FALSE(c0.empty());
  ASSERT_FALSE(c1.empty());
  for (int c : c0) EXPECT_EQ(c1.count(c), 0u) << "core " << c << " is shared";
}

TEST(CpuWorkers, BadWorkerCountsAreRefusedByName) {
  for (const char* bad : {"0", "-1", "two", "1x"}) {
    try {
      CpuBackend backend{{{"cache_dir", fresh_cache_dir()}, {"workers", bad}}};
      ADD_FAILURE() << "workers '" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("workers"), std::string::npos) << e.what();
    }
  }
  try {
    CpuBackend backend{
        {{"cache_dir", fresh_cache_dir()}, {"workers", std::to_string(usable_cores() + 1)}}};
    ADD_FAILURE() << "more workers than cores was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cores"), std::string::npos) << e.what();
  }
}

TEST(CpuWorkers, TheCoresOfAWorkerAreInTheFingerprintAndPinned) {
  if (usable_cores() < 2) GTEST_SKIP() << "needs two cores";
  CpuBackend narrow{{{"cache_dir", fresh_cache_dir()}, {"cores_per_worker", "1"}}};
  CpuBackend two{{{"cache_dir", fresh_cache_dir()}, {"workers", "2"}}};
  CpuBackend wide{
      {{"cache_dir", fresh_cache_dir()}, {"cores_per_worker", std::to_string(usable_cores())}}};
  EXPECT_EQ(narrow.worker_cpus(0).size(), 1u);
  EXPECT_EQ(narrow.environment_fingerprint(), two.environment_fingerprint());  // one core each
  EXPECT_NE(narrow.environment_fingerprint(), wide.environment_fingerprint());
  EXPECT_NE(narrow.environment_fingerprint().find("|1 core"), std::string::npos);
  EXPECT_THROW((CpuBackend{{{"cache_dir", fresh_cache_dir()},
                            {"workers", "2"},
                            {"cores_per_worker", std::to_string(usable_cores())}}}),
               Error);
}

TEST(CpuWorkers, OneWorkerIsTheDefaultAndIsNotPinned) {
  CpuBackend backend{{{"cache_dir", fresh_cache_dir()}}};
  EXPECT_EQ(backend.capabilities().devices, 1);
  ASSERT_EQ(backend.workers(), 1u);
  EXPECT_TRUE(backend.worker_cpus(0).empty());
}

}  // namespace
}  // namespace emmy::cpu::testing
