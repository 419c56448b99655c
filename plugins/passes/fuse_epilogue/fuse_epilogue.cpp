// Matmul epilogue fusion: a matmul kernel absorbs the pointwise kernels reading its result (bias,
// residual add, activation, cast, the gate multiply of SwiGLU) while it still fits the "matmul"
// template. A structural fork per situation ("fuse"/"split"): an epilogue can slow the matmul's
// main loop (registers, extra operands), so the search decides. The whole epilogue is one choice,
// so a transformer layer adds one fork per distinct matmul situation, not one per op.
#include <algorithm>
#include <string>
#include <vector>

#include "common/structural_pass.hpp"
#include "emmy/plugin.hpp"
#include "emmy/templates.hpp"

namespace {

using emmy::passes::Partition;

class FuseEpilogue final : public emmy::passes::MergingPass {
 public:
  explicit FuseEpilogue(const emmy::PluginOptions&) {}
  std::string name() const override { return EMMY_PLUGIN_NAME; }

 protected:
  void fuse(Partition& part, emmy::passes::ForkAsker& forks, emmy::PassContext&) override {
    const auto& g = part.graph();
    for (int m : part.kernels()) {
      if (!emmy::passes::is_open_matmul_kernel(part, m)) continue;
      std::vector<int> group = longest_epilogue(part, m);
      if (group.size() < 2) continue;
      auto site = emmy::passes::fuse_or_split("fuse_epilogue",
                                              emmy::passes::situation_id(g, part.united(group)));
      if (forks.ask(site) == 0) part.merge(group);
    }
  }

 private:
  // m and the pointwise kernels it can absorb, grown consumer by consumer (first node order).
  static std::vector<int> longest_epilogue(const Partition& part, int m) {
    return emmy::passes::grow_by_pointwise_readers(part, {m}, [&](const std::vector<int>& trial) {
      return emmy::fits_template(part.graph(), part.united(trial), emmy::kTemplateMatmul) &&
             part.can_merge(trial);
    });
  }
};

}  // namespace

EMMY_PLUGIN(FuseEpilogue)
