// The attention-fusion exception, measured for real: the split form's softmax-and-values kernel
// is sliced together with the scores kernel that feeds it (emmy::attention_producer), the passes
// answer the attention fork "fused" inside the slice, and the cpu backend builds the fused kernel
// with its attention template and times it in its worker.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "emmy/plugin.hpp"
#include "emmy/templates.hpp"
#include "passes/pass_support.hpp"

namespace {

std::shared_ptr<emmy::Backend> load_cpu_backend(const std::string& cache_dir) {
  std::string path = std::string(EMMY_BUILD_DIR) + "/lib/emmy/plugins/libemmy_cpu.so";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw std::runtime_error("cannot load " + path + ": " + dlerror());
  auto entry = reinterpret_cast<EmmyPluginInfoFn>(dlsym(lib, EMMY_PLUGIN_ENTRY_SYMBOL));
  const EmmyPluginInfo* info = entry();
  if (info->kind != EMMY_KIND_BACKEND) throw std::runtime_error(path + " is not a backend");
  std::string options = "cache_dir=" + cache_dir + "\n";
  char error[512] = {0};
  void* object = info->create(options.c_str(), nullptr, error, sizeof error);
  if (!object) throw std::runtime_error(std::string("creating the cpu backend: ") + error);
  return std::shared_ptr<emmy::Backend>(static_cast<emmy::Backend*>(object),
                                        [info](emmy::Backend* b) { info->destroy(b); });
}

// Random values in [-1, 1] (bf16/f16 as the top half of an f32; f16 kept small), booleans true.
std::vector<unsigned char> random_tensor(const emmy::ir::TensorType& t, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<unsigned char> bytes(static_cast<size_t>(t.bytes()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    float f = dist(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    switch (t.dtype) {
      case emmy::ir::DType::f32:
        std::memcpy(&bytes[static_cast<size_t>(i) * 4], &f, 4);
        break;
      case emmy::ir::DType::bf16: {
        uint16_t h = static_cast<uint16_t>(bits >> 16);
        std::memcpy(&bytes[static_cast<size_t>(i) * 2], &h, 2);
        break;
      }
      case emmy::ir::DType::boolean:
        bytes[static_cast<size_t>(i)] = 1;
        break;
      default:
        break;  // integers stay 0
    }
  }
  return bytes;
}

TEST(AttentionMeasure, FusedOptionIsBuiltAndMeasuredInsideTheSlice) {
  auto cache =
      std::filesystem::temp_directory_path() / ("emmy-attn-test-" + std::to_string(getpid()));
  auto backend = load_cpu_backend(cache.string());
  const emmy::BackendCaps caps = backend->capabilities();

  // Outer search: the split form, structural passes only.
  emmy::ir::Graph g = emmy::test::attention_block();
  emmy::ir::Program outer{g, emmy::ir::singleton_grouping(g)};
  emmy::test::ScriptedResolver split({{"fuse_attention", "split"}});
  std::vector<std::string> structural, lowering;
  for (const std::string& name : emmy::test::default_pipeline())
    (emmy::test::load_pass(name)->in_place() ? lowering : structural).push_back(name);
  emmy::test::run_passes(outer, structural, split);
  ASSERT_EQ(outer.grouping.kernels.size(), 2u);
  const emmy::ir::Kernel& values = outer.grouping.kernels[1];
  const emmy::ir::Kernel* scores = emmy::attention_producer(outer, values);
  ASSERT_NE(scores, nullptr);

  // Inner search on the slice that carries the producer: the fork comes up again, "fused".
  emmy::ir::Slice cut = emmy::ir::make_slice(outer.graph, values, scores);
  emmy::ir::Program inner{cut.graph, cut.grouping};
  emmy::test::ScriptedResolver fused({{"fuse_attention", "fused"}});
  emmy::test::run_passes(inner, structural, fused);
  emmy::test::run_passes(inner, lowering, fused, caps);
  ASSERT_EQ(inner.grouping.kernels.size(), 1u);
  ASSERT_EQ(inner.grouping.kernels[0].templ, "attention");

  emmy::ir::Slice candidate{inner.graph, inner.grouping, {}};
  emmy::Artifact artifact;
  emmy::MeasureResult failure;
  emmy::Status built = backend->build(candidate, emmy::Regime::rank, artifact, failure);
  ASSERT_TRUE(built.ok()) << built.message();
  ASSERT_EQ(failure.failure, emmy::FailureKind::none) << failure.message;
  EXPECT_EQ(artifact.source.find("template fell back"), std::string::npos)
      << "the cpu backend did not build the fused kernel with its attention template";

  emmy::MeasureRequest request;
  std::mt19937 rng(7);
  for (emmy::ir::ValueId in : inner.graph.inputs())
    request.inputs.tensors.push_back(random_tensor(inner.graph.type(in), rng));
  request.warmup = 1;
  request.samples = 3;
  emmy::MeasureResult result;
  emmy::Status measured = backend->measure(candidate, artifact, request, result);
  ASSERT_TRUE(measured.ok()) << measured.message();
  EXPECT_EQ(result.failure, emmy::FailureKind::none) << result.message;
  EXPECT_GT(result.median_us, 0);
  EXPECT_EQ(result.outputs.tensors.size(), inner.graph.outputs.size());
  std::filesystem::remove_all(cache);
}

}  // namespace
