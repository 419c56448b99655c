// The attention-prologue fork (docs/KERNELS.md, "How the kernels are formed"). Qwen3 normalises
// q per head (RMSNorm over the head dim) and rotates it (RoPE) before the attention: a row
// kernel of its own (fuse_reduction) that writes q and the attention then reads back. Its rows
// are the attention's query rows, so the attention can compute them itself, once per query row,
// from the projection's output: a structural fork per situation, "separate" (the default: two
// kernels) or "absorbed" (one attention kernel whose q has a prologue, emmy::match_attention).
//
// Offered only where the row kernel computes nothing but q (k_norm fused with q_norm as sibling
// rows is the other answer of fuse_siblings) and only on the backends named by option `backends`
// (default cpu): those whose attention template generates such a prologue well enough to be worth
// measuring. The cuda template's Hopper path computes it correctly, but its prologue (scalar at
// first, vectorized since) costs about what the separate kernel takes (docs/PERFORMANCE.md): it
// runs before the attention's own work and overlaps none of it.
#include <algorithm>
#include <string>
#include <vector>

#include "common/structural_pass.hpp"
#include "emmy/plugin.hpp"
#include "emmy/templates.hpp"

namespace {

using emmy::ir::Graph;
using emmy::ir::ValueId;
using emmy::passes::Partition;

constexpr const char* kFamily = "fuse_attention_prologue";

class FuseAttentionPrologue final : public emmy::passes::MergingPass {
 public:
  explicit FuseAttentionPrologue(const emmy::PluginOptions& options) : backends_(options, "cpu") {}
  std::string name() const override { return EMMY_PLUGIN_NAME; }

 protected:
  void fuse(Partition& part, emmy::passes::ForkAsker& forks, emmy::PassContext& ctx) override {
    if (!backends_.has(ctx)) return;
    const Graph& g = part.graph();
    for (int a : part.kernels()) {
      if (!part.alive(a) || part.lowered(a)) continue;
      auto match = emmy::match_attention(g, part.kernel(a));
      if (!match) continue;
      // The row kernel must become q's prologue as a whole (match_attention takes reductions
      // only there): every node of it computes q and nothing else.
      const emmy::passes::RowProducer q = emmy::passes::absorbable_row_producer(
          part, a, [&](const emmy::ir::Kernel& united, int p) {
            auto fused = emmy::match_attention(g, united);
            if (!fused) return false;
            const auto& pro = fused->prologue;
            const auto& nodes = part.kernel(p).nodes;
            return std::all_of(nodes.begin(), nodes.end(), [&](ValueId v) {
              return std::find(pro.begin(), pro.end(), v) != pro.end();
            });
          });
      if (q.kernel < 0) continue;
      const emmy::ForkSite site =
          emmy::passes::separate_or_absorbed(kFamily, emmy::passes::situation_id(g, q.united));
      if (forks.ask(site) == 1) part.merge({a, q.kernel});
    }
  }

 private:
  emmy::passes::BackendList backends_;
};

}  // namespace

EMMY_PLUGIN(FuseAttentionPrologue)
