// The gated-epilogue fork (docs/KERNELS.md, "How the kernels are formed"). With gate_proj and
// up_proj packed into one product (fuse_horizontal), SwiGLU's silu(gate) * up reads the two
// halves of that product's columns, which is not an elementwise epilogue: the product is written
// in full (M x 2H) and read back by a pointwise kernel. A matmul whose tile holds columns c and
// c + H of the same rows computes the activation before anything is written and writes M x H
// (emmy::MatmulMatch::gated_half). A structural fork per situation, "separate" (the default: two
// kernels) or "absorbed" (one matmul kernel with a gated epilogue).
//
// Offered only on the backends named by option `backends` (default cuda): those whose matmul
// template computes the gated epilogue in its tile (the cuda Hopper paths load B's two halves
// side by side). Elsewhere the absorbed kernel would be correct but slower (the product through
// scratch, or the fallback template), so the fork is not asked there.
#include <algorithm>
#include <string>
#include <vector>

#include "common/structural_pass.hpp"
#include "emmy/plugin.hpp"
#include "emmy/templates.hpp"

namespace {

using emmy::passes::Partition;

constexpr const char* kFamily = "fuse_gated_epilogue";

class FuseGatedEpilogue final : public emmy::passes::MergingPass {
 public:
  explicit FuseGatedEpilogue(const emmy::PluginOptions& options) : backends_(options, "cuda") {}
  std::string name() const override { return EMMY_PLUGIN_NAME; }

 protected:
  void fuse(Partition& part, emmy::passes::ForkAsker& forks, emmy::PassContext& ctx) override {
    if (!backends_.has(ctx)) return;
    const auto& g = part.graph();
    for (int m : part.kernels()) {
      if (!emmy::passes::is_open_matmul_kernel(part, m)) continue;
      std::vector<int> group = gated_group(part, m);
      if (group.empty()) continue;
      const emmy::ForkSite site = emmy::passes::separate_or_absorbed(
          kFamily, emmy::passes::situation_id(g, part.united(group)));
      if (forks.ask(site) == 1) part.merge(group);
    }
  }

 private:
  // m with every kernel reading it (the two halves' readers must come in together: with one of
  // them outside, the whole product leaves the kernel), then further pointwise readers one at a
  // time while the union keeps a gated match; empty when the readers do not form one.
  static std::vector<int> gated_group(const Partition& part, int m) {
    const auto& g = part.graph();
    std::vector<int> group{m};
    for (int c : part.consumers(m)) {
      if (part.lowered(c) || !emmy::passes::is_pointwise_kernel(g, part.kernel(c))) return {};
      group.push_back(c);
    }
    if (!gated(part, group)) return {};
    return emmy::passes::grow_by_pointwise_readers(
        part, group, [&](const std::vector<int>& trial) { return gated(part, trial); });
  }

  static bool gated(const Partition& part, const std::vector<int>& group) {
    if (!part.can_merge(group)) return false;
    auto match = emmy::match_matmul(part.graph(), part.united(group));
    return match && match->gated_half > 0;
  }

  emmy::passes::BackendList backends_;
};

}  // namespace

EMMY_PLUGIN(FuseGatedEpilogue)
