// The products of a Qwen3 decoder layer under the default pass pipeline, each lowered to the
// cublaslt template (the fork matmul.template answered "template=cublaslt"): every one the
// generated matmul takes must be one the library computes too (with the horizontal fusions fused
// or split, the residual adds fused or not), so that the search can always weigh cuBLAS against
// Emmy's kernel for the layer's GEMMs. No GPU: generation and the plan only.
#include <gtest/gtest.h>

#include <cstdio>

#include "codegen_harness.hpp"
#include "cublaslt_plugin_harness.hpp"
#include "cublaslt_template.hpp"
#include "emmy/templates.hpp"
#include "expr.hpp"
#include "module.hpp"
#include "passes/pass_support.hpp"
#include "passes/qwen3_layer.hpp"
#include "templates.hpp"

namespace emmy::cuda {
namespace {

// The capabilities of a backend offering the plugin (where libcublasLt does not load it is
// not offered and the layer is lowered without it: the expectation below says so).
BackendCaps caps_with_cublaslt() {
  static CudaBackend b(emmy::cuda::test::offline_test_options("emmy-cuda-cublaslt-layer"));
  static CudaBackend& with = emmy::cuda::test::with_cublaslt(b);
  BackendCaps caps = with.capabilities();
  EXPECT_EQ(caps.alternatives.count("matmul"), 1u) << "the cublaslt plugin is not offered";
  return caps;
}

TEST(CublasLtLayer, EveryProductOfTheLayerIsTakenByCublasLt) {
  emmy::test::LayerShape shape;
  shape.seq = 32;
  shape.hidden = 128;
  shape.heads = 4;
  shape.kv_heads = 2;
  shape.head_dim = 32;
  shape.inter = 256;
  const ir::Graph g = emmy::test::qwen3_graph(shape);
  for (const auto& [name, split] :
       std::vector<std::pair<std::string, bool>>{{"default", false}, {"split", true}}) {
    emmy::test::ScriptedResolver r =
        split ? emmy::test::ScriptedResolver({{"matmul.template", "template=cublaslt"},
                                              {"fuse_horizontal", "split"},
                                              {"fuse_epilogue", "split"}})
              : emmy::test::ScriptedResolver({{"matmul.template", "template=cublaslt"}});
    ir::Program p = emmy::test::run_default(g, r, caps_with_cublaslt());
    int products = 0, packed = 0;
    for (const ir::Kernel& k : p.grouping.kernels) {
      if (k.templ != kTemplateCublaslt) {
        EXPECT_FALSE(emmy::fits_template(p.graph, k, "matmul"))
            << name << ": a matmul kernel lowered to " << k.templ;
        continue;
      }
      ++products;
      ir::Slice s = ir::make_slice(p.graph, k);
      std::string source;
      try {
        source = generate_source(s, nullptr, emmy::cuda::test::cublaslt_plugins());
      } catch (const KnobRefused& e) {
        ADD_FAILURE() << name << ": cublaslt refuses a product of the layer: " << e.what();
        continue;
      }
      Plan plan = parse_plan(source);
      ASSERT_FALSE(plan.launches.empty());
      EXPECT_TRUE(plan.launches.back().is_library());
      packed += plan.has_kernels();
    }
    // q/k/v, o_proj, gate/up, down_proj: packed into 4 linears by default, 7 when split.
    EXPECT_EQ(products, split ? 7 : 4) << name;
    std::printf("[ cublaslt ] %s grouping: %d products, %d with a packed operand\n", name.c_str(),
                products, packed);
  }
}

}  // namespace
}  // namespace emmy::cuda
