// The attention fusion (docs/DESIGN.md, The attention-fusion exception). For every softmax whose
// input comes from one matmul (q @ k^T, through scale/mask/cast) and whose output feeds a second
// matmul (@ v), a structural fork between
//   "fused": one kernel, template "attention" (q@k^T, scale, mask, softmax, @v), and
//   "split": a scores kernel (q@k^T, scale, mask: a matmul with an epilogue) and a
//            softmax-and-values kernel.
// In the split form, emmy::attention_producer() names the scores kernel of the second one, so the
// driver's slice carries it and this same fork can still pick "fused" inside the slice.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "common/attention_output.hpp"
#include "common/structural_pass.hpp"
#include "emmy/plugin.hpp"
#include "emmy/templates.hpp"

namespace {

using emmy::ir::Graph;
using emmy::ir::Op;
using emmy::ir::ValueId;
using emmy::passes::Partition;

bool is_bmm(Op op) {
  return op == Op::matmul || op == Op::bmm;
}
bool is_chain_op(Op op) {
  return emmy::is_elementwise_op(op) || emmy::is_index_op(op);
}

struct Pattern {
  ValueId scores = -1, softmax = -1, values = -1;
  std::vector<ValueId> score_chain;  // between scores and softmax
  std::vector<ValueId> prob_chain;   // between softmax and values
};

// Nodes on some path from `from` to `to` (both excluded), through chain ops only.
std::vector<ValueId> between(const Partition& part, ValueId from, ValueId to) {
  const Graph& g = part.graph();
  std::vector<char> down(static_cast<size_t>(to) + 1, 0), up(static_cast<size_t>(to) + 1, 0);
  down[static_cast<size_t>(from)] = 1;
  for (ValueId v = from + 1; v < to; ++v)
    for (ValueId in : g.node(v).inputs)
      if (in >= from && down[static_cast<size_t>(in)] && is_chain_op(g.node(v).op))
        down[static_cast<size_t>(v)] = 1;
  up[static_cast<size_t>(to)] = 1;
  for (ValueId v = to; v > from; --v) {
    if (!up[static_cast<size_t>(v)]) continue;
    for (ValueId in : g.node(v).inputs)
      if (in > from && in < to) up[static_cast<size_t>(in)] = 1;
  }
  std::vector<ValueId> out;
  for (ValueId v = from + 1; v < to; ++v)
    if (down[static_cast<size_t>(v)] && up[static_cast<size_t>(v)]) out.push_back(v);
  return out;
}

// The one matmul the softmax's input is computed from through chain ops, if exactly one.
std::optional<ValueId> scores_of(const Graph& g, ValueId softmax) {
  std::vector<ValueId> found = emmy::passes::found_upstream(g, g.node(softmax).inputs.at(0),
                                                            [](Op op) { return is_bmm(op); });
  if (found.size() != 1) return std::nullopt;
  return found[0];
}

// The matmul reading the softmax's result (through chain ops) as its first operand.
std::optional<ValueId> values_of(const Partition& part, ValueId softmax) {
  const Graph& g = part.graph();
  std::vector<ValueId> stack{softmax}, found;
  while (!stack.empty()) {
    ValueId v = stack.back();
    stack.pop_back();
    for (ValueId u : part.users(v)) {
      Op op = g.node(u).op;
      if (is_bmm(op) && g.node(u).inputs.at(0) == v)
        found.push_back(u);
      else if (emmy::is_elementwise_op(op) || emmy::is_index_op(op))
        stack.push_back(u);
    }
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  if (found.size() != 1) return std::nullopt;
  return found[0];
}

// The kernels that only widen the scores' 16-bit operands to f32 (scores computed in f32, as fused
// SDPA kernels compute them), index ops around the widening included: they belong to the
// attention, which reads the 16-bit values and widens them as it loads. Left alone, a later pass
// would fuse the widening into the producer of q or k, which would then write them in f32.
std::vector<int> operand_widenings(const Partition& part, ValueId scores) {
  const Graph& g = part.graph();
  std::vector<int> ks;
  for (ValueId x : g.node(scores).inputs) {
    while (emmy::is_index_op(g.node(x).op)) x = g.node(x).inputs.at(0);
    if (!emmy::is_exact_widening_cast(g, x)) continue;
    const int k = part.kernel_of(x);
    if (k < 0 || part.lowered(k)) continue;
    const std::vector<ValueId>& nodes = part.kernel(k).nodes;
    if (std::all_of(nodes.begin(), nodes.end(), [&](ValueId v) {
          return emmy::is_index_op(g.node(v).op) || emmy::is_exact_widening_cast(g, v);
        }))
      ks.push_back(k);
  }
  return ks;
}

std::vector<int> kernels_of(const Partition& part, const std::vector<ValueId>& nodes) {
  std::vector<int> ks;
  for (ValueId v : nodes) ks.push_back(part.kernel_of(v));
  std::sort(ks.begin(), ks.end());
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  return ks;
}

class FuseAttention final : public emmy::passes::MergingPass {
 public:
  explicit FuseAttention(const emmy::PluginOptions&) {}
  std::string name() const override { return EMMY_PLUGIN_NAME; }

 protected:
  void fuse(Partition& part, emmy::passes::ForkAsker& forks, emmy::PassContext&) override {
    const Graph& g = part.graph();
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      ValueId s = static_cast<ValueId>(i);
      if (g.nodes[i].op != Op::softmax) continue;
      auto pattern = match(part, s);
      if (!pattern) continue;
      std::vector<ValueId> score_side = pattern->score_chain;
      score_side.push_back(pattern->scores);
      std::vector<ValueId> value_side = pattern->prob_chain;
      value_side.push_back(pattern->softmax);
      value_side.push_back(pattern->values);
      std::vector<ValueId> all = score_side;
      all.insert(all.end(), value_side.begin(), value_side.end());
      std::vector<int> ks = kernels_of(part, all);
      if (std::any_of(ks.begin(), ks.end(), [&](int k) { return k < 0 || part.lowered(k); }))
        continue;
      const std::vector<int> widenings = operand_widenings(part, pattern->scores);
      ks.insert(ks.end(), widenings.begin(), widenings.end());
      std::sort(ks.begin(), ks.end());
      ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
      // The result's reordering for its reader (left alone by fold_views): written by the kernel
      // that computes the result, when that kernel still fits its template with it. Part of the
      // fused kernel's situation, so the fork is named alike in a slice, which starts with the
      // reordering inside the values kernel.
      std::vector<int> relabel =
          kernels_of(part, emmy::passes::attention_output_relabelling(g, pattern->values));
      auto with_relabelling = [&](std::vector<int> kernels, std::string_view templ) {
        std::vector<int> both = kernels;
        both.insert(both.end(), relabel.begin(), relabel.end());
        std::sort(both.begin(), both.end());
        both.erase(std::unique(both.begin(), both.end()), both.end());
        if (relabel.empty() ||
            std::any_of(relabel.begin(), relabel.end(),
                        [&](int k) { return k < 0 || part.lowered(k); }) ||
            !emmy::fits_template(g, part.united(both), templ) || !part.can_merge(both))
          return kernels;
        return both;
      };
      ks = with_relabelling(ks, emmy::kTemplateAttention);
      emmy::ir::Kernel fused = part.united(ks);
      if (!emmy::fits_template(g, fused, emmy::kTemplateAttention) || !part.can_merge(ks)) continue;

      auto site =
          emmy::passes::fuse_or_split(std::string(emmy::kAttentionFork),
                                      emmy::passes::situation_id(g, fused), "fused", "split");
      if (forks.ask(site) == 0) {
        part.merge(ks);
        continue;
      }
      // Split: the scores kernel and the softmax-and-values kernel, when each can stand alone.
      std::vector<int> sk = kernels_of(part, score_side), vk = kernels_of(part, value_side);
      bool disjoint = std::none_of(sk.begin(), sk.end(), [&](int k) {
        return std::find(vk.begin(), vk.end(), k) != vk.end();
      });
      if (!disjoint || !part.can_merge(sk)) continue;
      part.merge(sk);
      if (part.can_merge(vk))
        part.merge(with_relabelling(vk, emmy::best_template(g, part.united(vk))));
    }
  }

 private:
  static std::optional<Pattern> match(const Partition& part, ValueId s) {
    const Graph& g = part.graph();
    auto scores = scores_of(g, s);
    if (!scores) return std::nullopt;
    auto values = values_of(part, s);
    if (!values) return std::nullopt;
    Pattern p;
    p.scores = *scores;
    p.softmax = s;
    p.values = *values;
    p.score_chain = between(part, p.scores, s);
    p.prob_chain = between(part, s, p.values);
    return p;
  }
};

}  // namespace

EMMY_PLUGIN(FuseAttention)
