// Pointwise fusion (a rule): neighbouring pointwise kernels (producer and consumer) merge while the
// result still fits the "pointwise" template (one iteration space: every output the same size).
// Never a loss: the intermediate stops round-tripping through memory, and no value is computed
// twice (a partition has no duplicates). Runs after the reduction and epilogue fusions, so what it
// sees are the pointwise ops nobody else took (SwiGLU's silu * up after a fused gate/up matmul,
// RoPE without a norm before it, ...).
#include <algorithm>
#include <string>
#include <vector>

#include "common/structural_pass.hpp"
#include "emmy/plugin.hpp"
#include "emmy/templates.hpp"

namespace {

using emmy::passes::Partition;

class FusePointwise final : public emmy::passes::MergingPass {
 public:
  explicit FusePointwise(const emmy::PluginOptions&) {}
  std::string name() const override { return EMMY_PLUGIN_NAME; }

 protected:
  void fuse(Partition& part, emmy::passes::ForkAsker&, emmy::PassContext&) override {
    bool changed = true;
    while (changed) {
      changed = false;
      for (int a : part.kernels()) {
        if (!part.alive(a) || !mergeable(part, a)) continue;
        std::vector<int> neighbours = part.consumers(a);
        for (int p : part.producers(a)) neighbours.push_back(p);
        for (int b : neighbours) {
          if (!part.alive(a) || !part.alive(b) || !mergeable(part, b)) continue;
          if (!emmy::fits_template(part.graph(), part.united({a, b}), emmy::kTemplatePointwise) ||
              !part.can_merge({a, b}))
            continue;
          a = part.merge({std::min(a, b), std::max(a, b)});
          changed = true;
        }
      }
    }
  }

 private:
  static bool mergeable(const Partition& part, int k) {
    return !part.lowered(k) && emmy::passes::is_pointwise_kernel(part.graph(), part.kernel(k));
  }
};

}  // namespace

EMMY_PLUGIN(FusePointwise)
