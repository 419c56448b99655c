// Code generation and NVRTC compilation for every template, for sm_90a, on a machine with the
// CUDA toolkit and no GPU: what CI can check of the cuda backend.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "cuda_backend.hpp"
#include "cuda_graphs.hpp"
#include "expr.hpp"
#include "module.hpp"
#include "nvrtc_compiler.hpp"
#include "templates.hpp"

namespace emmy::cuda::test {
namespace {

namespace fs = std::filesystem;

std::string temp_cache(const std::string& name) {
  fs::path p =
      fs::temp_directory_path() / ("emmy-cuda-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

// No worker is started: the architecture is given.
PluginOptions offline(const std::string& cache) {
  return {{"arch", "sm_90a"}, {"cache_dir", cache}, {"worker", "/nonexistent"}};
}

// Every kernel of `source` waits for its producers before its body (the device prelude's
// griddepcontrol.wait, Plan::awaits_producers), and the plan says so: what lets the worker and
// the runtime launch it overlapping the previous kernel's tail. A kernel without the call,
// launched that way, could read its producer's results before they are written.
void expect_every_kernel_awaits_its_producers(const std::string& source) {
  const std::string entry = "extern \"C\" __global__";
  size_t kernels = 0;
  for (size_t at = source.find(entry); at != std::string::npos; at = source.find(entry, at + 1)) {
    ++kernels;
    const size_t open = source.find(") {\n", at);
    ASSERT_NE(open, std::string::npos);
    // Only the pointer table's reads (emmy_buf, not written by any kernel) come before it.
    const size_t call = source.find("emmy_await_producers();", open);
    ASSERT_NE(call, std::string::npos) << source.substr(at, 400);
    const std::string before = source.substr(open + 4, call - open - 4);
    for (size_t line = 0; line < before.size();) {
      const size_t end = before.find('\n', line);
      const std::string text = before.substr(line, end - line);
      EXPECT_TRUE(text.find("emmy_buf[") != std::string::npos ||
                  text.find("__builtin_assume(__isGlobal(") != std::string::npos ||
                  text.find_first_not_of(' ') == std::string::npos)
          << "before the wait: " << text;
      line = end == std::string::npos ? before.size() : end + 1;
    }
  }
  EXPECT_GT(kernels, 0u);
  EXPECT_TRUE(parse_plan(source).awaits_producers);
}

class EveryTemplate : public ::testing::TestWithParam<int> {};

TEST_P(EveryTemplate, GeneratesTheTemplateAndCompilesToACubin) {
  Case c = all_cases().at(size_t(GetParam()));
  ir::Slice s = slice_of(c);
  std::string used;
  std::string source = generate_source(s, &used);
  EXPECT_EQ(used, c.templ) << source;
  Plan plan = parse_plan(source);
  EXPECT_FALSE(plan.launches.empty());
  expect_every_kernel_awaits_its_producers(source);

  CudaBackend backend(offline(temp_cache(c.name)));
  Artifact art;
  MeasureResult failure;
  Status st = backend.build(s, Regime::rank, art, failure);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(failure.failure, FailureKind::none) << failure.message << "\n" << source;
  ASSERT_TRUE(fs::exists(art.handle));
  EXPECT_GT(fs::file_size(art.handle), 0u);
  EXPECT_EQ(art.source, source);
  fs::remove_all(fs::path(art.handle).parent_path());
}

INSTANTIATE_TEST_SUITE_P(Cuda, EveryTemplate, ::testing::Range(0, int(all_cases().size())),
                         [](const auto& info) { return all_cases().at(size_t(info.param)).name; });

TEST(CudaCodegen, UnknownTemplateIsRefusedNeverBuiltAsTheFallback) {
  Case c = matmul_f32(64);
  c.templ = "acme_gemm";
  try {
    generate_source(slice_of(c));
    FAIL() << "a kernel of an unknown template was generated";
  } catch (const KnobRefused& e) {
    EXPECT_NE(std::string(e.what()).find("no kernel template 'acme_gemm'"), std::string::npos)
        << e.what();
  }
  c.templ = "fallback";
  std::string used;
  generate_source(slice_of(c), &used);
  EXPECT_EQ(used, "fallback");
}

TEST(CudaCodegen, EveryMatmulKnobValueCompilesOrFallsBack) {
  // Each declared value of each knob alone (others at their defaults) gives a module.
  BackendCaps caps = cuda_capabilities();
  Case c = matmul_f32(96);
  for (const KnobSpec& spec : caps.templates.at("matmul"))
    for (double v : spec.values) {
      c.knobs = {{spec.name, v}};
      std::string used;
      // An f32 product has no tensor-core path: a cp.async pipeline (stages > 1) is refused.
      // Nor a Hopper path (wgmma=1 and 2 take bf16/f16 only): refused too, and so are a split
      // of K and clusters, knobs of wgmma=2 only, the staged epilogue of the wgmma paths and
      // the persistent grid's turns, and the tiles 96 and 192 wide, the wgmma paths' only.
      if ((spec.name == "stages" && v > 1) || (spec.name == "wgmma" && v >= 1) ||
          (spec.name == "splits" && v > 1) || (spec.name == "cluster" && v > 1) ||
          (spec.name == "staged" && v > 0) || (spec.name == "persistent" && v > 0) ||
          (spec.name == "pingpong" && v > 0) || (spec.name == "tile_n" && (v == 96 || v == 192))) {
        EXPECT_THROW(generate_source(slice_of(c), &used), KnobRefused);
        continue;
      }
      std::string source;
      try {
        source = generate_source(slice_of(c), &used);
      } catch (const KnobRefused& e) {
        // With the default 128-row tile, a 256-wide f32 tile in one stage needs more static
        // shared memory than a block may have: refused by name, never miscompiled.
        EXPECT_NE(std::string(e.what()).find("48 KiB"), std::string::npos)
            << spec.name << "=" << v << ": " << e.what();
        continue;
      }
      EXPECT_EQ(used, "matmul") << spec.name << "=" << v;
      EXPECT_NE(source.find("tile_"), std::string::npos);
    }
}

TEST(CudaCodegen, SixteenBitMatmulsUseTensorCores) {
  for (Case c : {linear_bf16_bias_silu(), matmul_f16_broadcast()}) {
    std::string source = generate_source(slice_of(c));
    EXPECT_NE(source.find("mma.sync.aligned.m16n8k16"), std::string::npos) << c.name;
    // Both operands are plain row-major inputs: 16-byte copies into shared memory.
    EXPECT_NE(source.find("A:16B B:16B"), std::string::npos) << c.name;
  }
  Case c = linear_bf16_bias_silu();
  c.knobs["tile_k"] = 8;  // too shallow for k16: the SIMT path
  std::string source = generate_source(slice_of(c));
  EXPECT_EQ(source.find("mma.sync"), std::string::npos);
  EXPECT_NE(source.find("fmaf"), std::string::npos);
  EXPECT_EQ(generate_source(slice_of(matmul_f32())).find("mma.sync"), std::string::npos);
}

TEST(CudaCodegen, SeveralKernelsBecomeOneProgram) {
  ir::Slice s = two_kernel_program();
  std::string used;
  std::string source = generate_source(s, &used);
  EXPECT_EQ(used, "program");
  EXPECT_NE(source.find("// kernel 1: reduction"), std::string::npos) << source.substr(0, 3000);
  EXPECT_NE(source.find("// kernel 0: matmul"), std::string::npos);
  EXPECT_LT(source.find("// kernel 1:"), source.find("// kernel 0:"));  // the producer first
  Plan plan = parse_plan(source);
  ASSERT_GE(plan.launches.size(), 3u);  // rows (fused: one kernel), matmul, one copy
  EXPECT_EQ(plan.launches.front().kernel, "k1_emmy_rows");
  EXPECT_EQ(plan.launches.back().kernel, "emmy_copy2");
  expect_every_kernel_awaits_its_producers(source);  // the stitched kernels and the copy
  // Each launch names its kernel of the program (the worker flushes L2 before each and times
  // them one by one); the output copy is part of the last kernel's time.
  EXPECT_EQ(plan.launches.front().group, 0);
  EXPECT_EQ(plan.launches[plan.launches.size() - 2].group, 1);
  EXPECT_EQ(plan.launches.back().group, 1);
  CudaBackend backend(offline(temp_cache("program")));
  Artifact art;
  MeasureResult failure;
  ASSERT_TRUE(backend.build(s, Regime::rank, art, failure).ok());
  EXPECT_EQ(failure.failure, FailureKind::none) << failure.message;
  fs::remove_all(fs::path(art.handle).parent_path());
}

// Kernels of one structure (a model's layers) are generated once per template and knobs
// (program.cpp): their texts in the program differ only by the prefix and the buffers, and a
// kernel of the same structure at other knobs is its own.
TEST(CudaCodegen, KernelsOfOneStructureAreGeneratedOnceAtTheirOwnKnobs) {
  ir::Graph g;
  ir::Builder b(g);
  ir::Slice s;
  ir::ValueId x = b.input("x", {ir::DType::f32, {64, 256}});
  for (int layer = 0; layer < 3; ++layer) {
    x = b.op(ir::Op::silu, {x}, {}, "layers." + std::to_string(layer) + ".act");
    ir::Kernel k;
    k.nodes = {x};
    k.templ = "pointwise";
    k.knobs = {{"vec", layer == 2 ? 4.0 : 1.0}};
    s.grouping.kernels.push_back(k);
  }
  g.outputs = {x};
  s.graph = g;
  for (size_t v = 0; v < g.nodes.size(); ++v) s.origin.push_back(static_cast<ir::ValueId>(v));
  ASSERT_EQ(ir::verify_grouping(g, s.grouping), "");
  const std::string source = generate_source(s);
  // Kernel i's text, without its prefix and with every buffer index as "#".
  auto body = [&](int i) {
    const std::string name = "k" + std::to_string(i) + "_emmy_pointwise(";
    const size_t at = source.find(name);
    EXPECT_NE(at, std::string::npos) << name;
    const size_t end = source.find("\n}\n", at);
    std::string text = source.substr(at + name.size(), end - at - name.size()), out;
    for (size_t p = 0; p < text.size(); ++p) {
      out += text[p];
      if (text.compare(p, 9, "emmy_buf[") == 0) {
        out += "mmy_buf[#";
        for (p += 9; p < text.size() && std::isdigit(static_cast<unsigned char>(text[p]));) ++p;
        --p;
      }
    }
    return out;
  };
  EXPECT_EQ(body(0), body(1));  // two layers, one text
  EXPECT_NE(body(0), body(2));  // vec=4: 16-byte accesses
  EXPECT_EQ(body(0).find("uint4"), std::string::npos) << body(0);
  EXPECT_NE(body(2).find("uint4"), std::string::npos) << body(2);
}

TEST(CudaCodegen, RejectsUndeclaredKnobValues) {
  EXPECT_THROW(resolve_knobs("matmul", {{"tile_m", 48}}), Error);
  EXPECT_THROW(resolve_knobs("nosuch", {}), Error);
  EXPECT_EQ(resolve_knobs("pointwise", {}).at("block"), 256);
}

TEST(CudaCodegen, UnfitKernelFallsBack) {
  Case c = softmax_f32();
  c.templ = "pointwise";  // softmax is no pointwise op
  std::string used;
  std::string source = generate_source(slice_of(c), &used);
  EXPECT_EQ(used, "fallback");
  EXPECT_NE(source.find("template fell back"), std::string::npos);
}

TEST(CudaCodegen, PlanSurvivesTheSource) {
  Plan p;
  p.scratch_bytes = {64, 4096};
  Launch l;
  l.kernel = "k";
  l.grid[0] = 7;
  l.grid[2] = 3;
  l.block = 96;
  l.shared_bytes = 1024;
  p.launches = {l, l};
  p.launches[1].group = 4;
  Plan q = parse_plan("// x\n" + render_plan(p) + "code\n");
  ASSERT_EQ(q.launches.size(), 2u);
  EXPECT_EQ(q.scratch_bytes, p.scratch_bytes);
  EXPECT_EQ(q.launches[1].grid[0], 7);
  EXPECT_EQ(q.launches[1].grid[2], 3);
  EXPECT_EQ(q.launches[1].block, 96);
  EXPECT_EQ(q.launches[1].shared_bytes, 1024);
  EXPECT_EQ(q.launches[0].group, 0);  // a module of one kernel: no group field
  EXPECT_EQ(q.launches[1].group, 4);
  EXPECT_FALSE(q.awaits_producers);  // a source of before the rule: one launch after the other
  p.awaits_producers = true;
  EXPECT_TRUE(parse_plan(render_plan(p)).awaits_producers);
  EXPECT_THROW(parse_plan("no plan here"), Error);
  EXPECT_THROW(parse_plan("//@emmy launch k 1 1 1 32 0 -1\n"), Error);
}

TEST(CudaCompiler, CompileErrorIsABuildErrorRow) {
  CudaBackend backend(offline(temp_cache("bad")));
  Artifact art;
  MeasureResult failure;
  Status st = backend.build_source(
      "//@emmy launch k 1 1 1 32 0\nextern \"C\" __global__ void k(void* const* b) { "
      "undeclared_thing(); }\n",
      Regime::rank, art, failure);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(failure.failure, FailureKind::build_error);
  EXPECT_NE(failure.message.find("undeclared_thing"), std::string::npos) << failure.message;
  EXPECT_TRUE(art.handle.empty());
}

TEST(CudaCompiler, CachesByContentAndRegime) {
  std::string dir = temp_cache("cache");
  NvrtcCompiler c(dir, "sm_90a");
  const std::string src = "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] *= 2.f; }\n";
  CompileOutcome a = c.compile(src, Regime::rank);
  ASSERT_TRUE(a.ok) << a.log;
  EXPECT_FALSE(a.cached);
  CompileOutcome b = c.compile(src, Regime::rank);
  EXPECT_TRUE(b.cached);
  EXPECT_EQ(a.cubin_path, b.cubin_path);
  CompileOutcome d = c.compile(src, Regime::deploy);
  ASSERT_TRUE(d.ok) << d.log;
  EXPECT_NE(d.cubin_path, a.cubin_path);
  auto opts = c.options(Regime::deploy);
  EXPECT_NE(std::find(opts.begin(), opts.end(), "-Xptxas=-O3"), opts.end());
  EXPECT_NE(std::find(opts.begin(), opts.end(), "--gpu-architecture=sm_90a"), opts.end());
  fs::remove_all(dir);
}

// A program of several kernels compiles split over the machine's cores; the cubin is cached under
// the same key as a serial compile's (the code is the same), so either finds the other's.
TEST(CudaCompiler, ProgramsOfSeveralKernelsCompileSplitUnderTheSerialKey) {
  std::string dir = temp_cache("split");
  NvrtcCompiler c(dir, "sm_90a");
  std::string src;
  for (int k = 0; k < 4; ++k)
    src += "extern \"C\" __global__ void k" + std::to_string(k) +
           "(float* p) { p[threadIdx.x] = p[threadIdx.x] * " + std::to_string(k + 2) +
           ".f + 1.f; }\n";
  CompileOutcome split = c.compile(src, Regime::deploy, 4);
  ASSERT_TRUE(split.ok) << split.log;
  EXPECT_FALSE(split.cached);
  EXPECT_GT(fs::file_size(split.cubin_path), 0u);
  // NVRTC 13 (this machine's and CI's) takes the option; an older one falls back to serial.
  if (std::stoi(nvrtc_version()) >= 13) {
    EXPECT_TRUE(nvrtc_compiles_programs_split());
  }
  CompileOutcome serial = c.compile(src, Regime::deploy, 1);
  EXPECT_TRUE(serial.cached);
  EXPECT_EQ(serial.cubin_path, split.cubin_path);
  // And from the other side: a serial compile first, then the split one finds it.
  std::string other = temp_cache("split2");
  NvrtcCompiler c2(other, "sm_90a");
  CompileOutcome first = c2.compile(src, Regime::rank, 1);
  ASSERT_TRUE(first.ok) << first.log;
  EXPECT_TRUE(c2.compile(src, Regime::rank, 4).cached);
  fs::remove_all(dir);
  fs::remove_all(other);
}

TEST(CudaCompiler, ParallelBuildsShareTheCache) {
  // Builds run in threads while devices measure: the same sources from several threads at once
  // give whole, identical cubins.
  std::string dir = temp_cache("parallel");
  CudaBackend backend(offline(dir));
  std::vector<Case> cases = {pointwise_bf16(), softmax_f32(), linear_bf16_bias_silu()};
  std::vector<std::string> handles(cases.size() * 2);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < handles.size(); ++i)
    threads.emplace_back([&, i] {
      Artifact art;
      MeasureResult failure;
      if (backend.build(slice_of(cases[i % cases.size()]), Regime::rank, art, failure).ok() &&
          failure.failure == FailureKind::none)
        handles[i] = art.handle;
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_FALSE(handles[i].empty()) << cases[i].name;
    EXPECT_EQ(handles[i], handles[i + cases.size()]);
    EXPECT_GT(fs::file_size(handles[i]), 0u);
  }
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) files += entry.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files,
            2 * cases.size());  // a cubin and its source (.cu) per case; no stray temporaries
  fs::remove_all(dir);
}

TEST(CudaBackendOptions, DevicesAndGpus) {
  EXPECT_EQ(parse_devices({{"devices", "0,2"}}), (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ(parse_devices({{"gpus", "3"}}), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(parse_devices({}), (std::vector<std::string>{"0"}));
  EXPECT_THROW(parse_devices({{"devices", "0,,1"}}), Error);
  EXPECT_THROW(parse_devices({{"gpus", "0"}}), Error);
  EXPECT_THROW(parse_devices({{"devices", "0,0"}}), Error);
  CudaBackend two({{"gpus", "2"}, {"arch", "sm_90a"}, {"worker", "/nonexistent"}});
  EXPECT_EQ(two.device_count(), 2u);
}

TEST(CudaBackendOptions, FingerprintWithoutADeviceSaysSo) {
  CudaBackend backend({{"arch", "sm_90a"}, {"worker", "/nonexistent/emmy-cuda-worker"}});
  std::string fp = backend.environment_fingerprint();
  EXPECT_EQ(fp.rfind("cuda|", 0), 0u) << fp;
  EXPECT_NE(fp.find("|nvrtc " + nvrtc_version()), std::string::npos) << fp;
  EXPECT_EQ(backend.capabilities().backend, "cuda");
  EXPECT_EQ(backend.capabilities().templates.count("matmul"), 1u);
}

// The tuner's fan-out reads these: one slot per device, kernels_per_device kernels in flight each.
TEST(CudaBackendOptions, DevicesAndKernelsInFlightReachTheCaps) {
  PluginOptions o = offline(temp_cache("caps"));
  o["gpus"] = "2";
  CudaBackend two(o);
  EXPECT_EQ(two.capabilities().devices, 2);
  EXPECT_EQ(two.capabilities().kernels_per_device, 4);
  o["kernels_per_device"] = "1";
  EXPECT_EQ(CudaBackend(o).capabilities().kernels_per_device, 1);
  for (const char* bad : {"0", "x", "-2", "1000"}) {
    o["kernels_per_device"] = bad;
    EXPECT_THROW(CudaBackend{o}, Error) << bad;
  }
}

}  // namespace
}  // namespace emmy::cuda::test
