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
      if (!part.alive(m) || part.lowered(m) ||
          emmy::passes::count_ops(g, part.kernel(m), emmy::is_matmul_op) != 1 ||
          !emmy::fits_template(g, part.kernel(m), emmy::kTemplateMatmul))
        continue;
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
    const auto& g = part.graph();
    std::vector<int> group{m};
    bool grew = true;
    while (grew) {
      grew = false;
      std::vector<int> frontier;
      for (int k : group)
        for (int c : part.consumers(k))
          if (std::find(group.begin(), group.end(), c) == group.end()) frontier.push_back(c);
      std::sort(frontier.begin(), frontier.end(), [&](int a, int b) {
        return part.kernel(a).nodes.front() < part.kernel(b).nodes.front();
      });
      for (int c : frontier) {
        if (part.lowered(c) || !emmy::passes::is_pointwise_kernel(g, part.kernel(c))) continue;
        std::vector<int> trial = group;
        trial.push_back(c);
        if (!emmy::fits_template(g, part.united(trial), emmy::kTemplateMatmul) ||
            !part.can_merge(trial))
          continue;
        group = std::move(trial);
        grew = true;
        break;
      }
    }
    return group;
  }
};

}  // namespace

EMMY_PLUGIN(FuseEpilogue)
