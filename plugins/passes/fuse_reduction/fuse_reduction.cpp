// Reduction fusion (a rule): a kernel holding last-dimension reductions (RMSNorm's mean, softmax)
// takes in the elementwise/index kernels around it while the result still fits the "reduction"
// template:
//   - epilogue: pointwise kernels reading it (the normalisation, the weight, RoPE after q/k norm);
//   - prologue: pointwise kernels feeding it whose every result is read only inside it (the
//     f32 cast and pow of RMSNorm). A producer whose result is also needed elsewhere (a residual
//     sum) stays out: it would have to be written anyway, and its natural home is the epilogue of
//     the matmul that computes it.
// Never a loss: the intermediate rows stop round-tripping through memory.
//
// Then a fork per situation ("fuse"/"split"): sibling row kernels, reduction kernels reading a
// value of the same producer kernel (q_norm and k_norm, 16 and 8 heads of one qkv projection),
// become one kernel when it still fits the template: rows of two shapes, each a range of the
// one launch's blocks (the cuda template's row sets), against two launches each with its own
// ramp-up and tail.
#include <algorithm>
#include <string>
#include <vector>

#include "common/structural_pass.hpp"
#include "emmy/plugin.hpp"
#include "emmy/templates.hpp"

namespace {

using emmy::ir::ValueId;
using emmy::passes::Partition;

class FuseReduction final : public emmy::passes::MergingPass {
 public:
  explicit FuseReduction(const emmy::PluginOptions&) {}
  std::string name() const override { return EMMY_PLUGIN_NAME; }

 protected:
  void fuse(Partition& part, emmy::passes::ForkAsker& forks, emmy::PassContext&) override {
    for (int r : part.kernels()) {
      if (!emmy::passes::is_row_kernel(part, r)) continue;
      bool grew = true;
      while (grew) {
        grew = false;
        for (int c : part.consumers(r))
          if (try_merge(part, r, c)) grew = true;
        for (int p : part.producers(r))
          if (emmy::passes::private_to(part, p, r) && try_merge(part, r, p)) grew = true;
      }
    }
    fuse_siblings(part, forks);
  }

 private:
  static bool try_merge(Partition& part, int& r, int other) {
    const auto& g = part.graph();
    if (!part.alive(other) || part.lowered(other) ||
        !emmy::passes::is_pointwise_kernel(g, part.kernel(other)))
      return false;
    if (!emmy::fits_template(g, part.united({r, other}), emmy::kTemplateReduction) ||
        !part.can_merge({r, other}))
      return false;
    r = part.merge({r, other});
    return true;
  }

  static void fuse_siblings(Partition& part, emmy::passes::ForkAsker& forks) {
    const auto& g = part.graph();
    for (int a : part.kernels()) {
      if (!emmy::passes::is_row_kernel(part, a)) continue;
      for (int p : part.producers(a))
        for (int b : part.consumers(p)) {
          if (b == a || !emmy::passes::is_row_kernel(part, a) ||
              !emmy::passes::is_row_kernel(part, b))
            continue;
          const std::vector<int> pair{a, b};
          const emmy::ir::Kernel both = part.united(pair);
          if (!emmy::fits_template(g, both, emmy::kTemplateReduction) || !part.can_merge(pair))
            continue;
          auto site =
              emmy::passes::fuse_or_split("fuse_siblings", emmy::passes::situation_id(g, both));
          if (forks.ask(site) == 0) a = part.merge(pair);
        }
    }
  }
};

}  // namespace

EMMY_PLUGIN(FuseReduction)
