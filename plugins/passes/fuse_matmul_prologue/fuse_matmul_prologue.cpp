// The matmul-prologue fork (docs/KERNELS.md, "How the kernels are formed"). A decoder layer
// normalizes its hidden state (RMSNorm) right before the products that read it: qkv after
// input_layernorm, gate+up after post_attention_layernorm. The norm is a row kernel of its own
// that writes the normalized rows and the product reads them back. Its rows are the product's
// rows and its row length is the product's K, and an RMSNorm's row scale r[m] = rsqrt(mean(x^2) +
// eps) is a factor of the product's whole row m: a matmul can read x itself, multiply it by the
// norm's weight as the k-slices arrive, sum the rows' squares from the same slices, and scale
// its result's rows by r before the epilogue (emmy::MatmulMatch::a_norm). A library cannot: its
// A must already be in memory. A structural fork per situation, "separate" (the default: two
// kernels) or "absorbed" (one matmul kernel).
//
// Offered only where the norm computes nothing but A (its result read by the product alone) and
// only on the backends named by option `backends`, those whose matmul template absorbs the norm
// (the cuda warp-specialized path); elsewhere the absorbed kernel has no template that builds it.
// None by default: the cuda kernel computes r from the k-slices as they pass, so it rounds A once
// (x * w) and scales the f32 sums by r, where the graph rounds x * r to bf16 and then its product
// with w. Summed over K the two roundings differ by more than bf16's per-element tolerance where
// the output cancels (71287 of qkv's 2097152 outputs at M = 512; the GPU check
// `CudaWgmmaGpu.AbsorbedRowNormMatchesWhatItComputes`), though the kernel's is the nearer to exact
// arithmetic; the tuner accepts such a kernel by its accuracy (ir::compare_accuracy). Whether the
// absorbed kernels win in the layer is for a GPU run to show before they are offered by default.
// Asked for by name (`[plugin fuse_matmul_prologue]` with `backends = cuda`, or `--pass-option
// fuse_matmul_prologue.backends=cuda`), the search measures both forms.
#include <string>
#include <vector>

#include "common/structural_pass.hpp"
#include "emmy/plugin.hpp"
#include "emmy/templates.hpp"

namespace {

using emmy::passes::Partition;

constexpr const char* kFamily = "fuse_matmul_prologue";

class FuseMatmulPrologue final : public emmy::passes::MergingPass {
 public:
  explicit FuseMatmulPrologue(const emmy::PluginOptions& options) : backends_(options, "") {}
  std::string name() const override { return EMMY_PLUGIN_NAME; }

 protected:
  void fuse(Partition& part, emmy::passes::ForkAsker& forks, emmy::PassContext& ctx) override {
    if (!backends_.has(ctx)) return;
    const auto& g = part.graph();
    for (int m : part.kernels()) {
      if (!emmy::passes::is_open_matmul_kernel(part, m)) continue;
      // The whole row kernel must become A's norm: every node of it computes A.
      const emmy::passes::RowProducer norm = emmy::passes::absorbable_row_producer(
          part, m, [&](const emmy::ir::Kernel& united, int p) {
            auto match = emmy::match_matmul(g, united);
            return match && match->a_norm &&
                   match->a_norm->nodes.size() == part.kernel(p).nodes.size();
          });
      if (norm.kernel < 0) continue;
      const emmy::ForkSite site =
          emmy::passes::separate_or_absorbed(kFamily, emmy::passes::situation_id(g, norm.united));
      if (forks.ask(site) == 1) part.merge({m, norm.kernel});
    }
  }

 private:
  emmy::passes::BackendList backends_;
};

}  // namespace

EMMY_PLUGIN(FuseMatmulPrologue)
