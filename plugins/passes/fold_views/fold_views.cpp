// Folds index ops (view, reshape, transpose, permute, contiguous, unsqueeze, squeeze, expand,
// slice, cat) into the kernel that reads them, so they become indexing in that kernel instead of
// a copy of their own. A rule, not a fork: folding never adds memory traffic.
//   1. An index op read by one kernel joins it; chains fold as a whole. An index op of graph
//      inputs (a view of a weight, of the rotary tables) read by several kernels is duplicated,
//      one copy per reader (a graph rewrite): otherwise it would stay a copy kernel of its own.
//      An index op of a computed value read by several kernels stays where it is: the fusion
//      passes after this one merge it with its producer or readers.
//      Except an attention result's reordering for its reader (common/attention_output.hpp):
//      fuse_attention gives it to the attention, which writes its result in that order.
//   2. Index ops left on their own because only the graph output reads them join the kernel that
//      produces their input (it writes the result in the new layout), when that kernel still fits
//      the template it fitted before.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "common/attention_output.hpp"
#include "common/graph_rewriter.hpp"
#include "common/partition.hpp"
#include "emmy/plugin.hpp"
#include "emmy/templates.hpp"

namespace {

using emmy::ir::Graph;
using emmy::ir::ValueId;

class FoldViews final : public emmy::Pass {
 public:
  explicit FoldViews(const emmy::PluginOptions&) {}
  std::string name() const override { return EMMY_PLUGIN_NAME; }
  bool in_place() const override { return false; }

  emmy::Status run(emmy::ir::Program& program, emmy::PassContext&) noexcept override {
    emmy::Status s = emmy::guard([&] {
      program = fold_into_readers(program);
      fold_into_producers(program);
    });
    if (!s.ok()) return emmy::Status::Error("pass " + name() + ": " + s.message());
    return s;
  }

 private:
  static emmy::ir::Program fold_into_readers(const emmy::ir::Program& p) {
    const Graph& g = p.graph;
    const size_t n = g.nodes.size();
    std::vector<int> kernel_of(n, -1);
    for (size_t k = 0; k < p.grouping.kernels.size(); ++k)
      for (ValueId v : p.grouping.kernels[k].nodes)
        kernel_of[static_cast<size_t>(v)] = static_cast<int>(k);
    auto lowered = [&](int k) {
      return k >= 0 && !p.grouping.kernels[static_cast<size_t>(k)].templ.empty();
    };
    std::vector<std::vector<ValueId>> users(n);
    for (size_t v = 0; v < n; ++v)
      for (ValueId in : g.nodes[v].inputs)
        users[static_cast<size_t>(in)].push_back(static_cast<ValueId>(v));
    std::vector<char> is_output(n, 0);
    for (ValueId o : g.outputs) is_output[static_cast<size_t>(o)] = 1;
    // An attention result's reordering stays out of its reader: fuse_attention gives it to the
    // attention, which writes its result in that order (common/attention_output.hpp says why).
    std::vector<char> with_attention(n, 0);
    for (size_t v = 0; v < n; ++v)
      for (ValueId c : emmy::passes::attention_output_relabelling(g, static_cast<ValueId>(v)))
        with_attention[static_cast<size_t>(c)] = 1;

    // of_inputs[v]: v is an index op over graph inputs and constants only (through index ops).
    std::vector<char> of_inputs(n, 0);
    for (size_t v = 0; v < n; ++v) {
      if (!emmy::is_index_op(g.nodes[v].op)) continue;
      bool ok = true;
      for (ValueId in : g.nodes[v].inputs) {
        emmy::ir::Op op = g.node(in).op;
        ok &= op == emmy::ir::Op::input || op == emmy::ir::Op::constant ||
              of_inputs[static_cast<size_t>(in)];
      }
      of_inputs[v] = ok;
    }
    // homes[v]: the kernels a copy of v lives in (one entry unless v is duplicated).
    std::vector<std::vector<int>> homes(n);
    for (size_t v = 0; v < n; ++v) homes[v] = {kernel_of[v]};
    bool any = false;
    for (size_t i = n; i-- > 0;) {
      const int own = kernel_of[i];
      if (own < 0 || lowered(own) || !emmy::is_index_op(g.nodes[i].op) || with_attention[i] ||
          p.grouping.kernels[static_cast<size_t>(own)].nodes.size() != 1)
        continue;
      std::set<int> readers;
      bool blocked = false;
      for (ValueId u : users[i])
        for (int k : homes[static_cast<size_t>(u)]) {
          if (lowered(k)) blocked = true;
          readers.insert(k);
        }
      if (blocked || readers.empty() || (readers.size() > 1 && !of_inputs[i])) continue;
      if (is_output[i]) readers.insert(own);
      homes[i].assign(readers.begin(), readers.end());
      any = true;
    }
    if (!any) return p;

    emmy::passes::GraphRewriter rw(g, p.grouping);
    std::vector<std::vector<std::pair<int, ValueId>>> images(n);
    auto image_in = [&](ValueId w, int k) {
      const auto& im = images[static_cast<size_t>(w)];
      for (const auto& [kk, id] : im)
        if (kk == k) return id;
      return im.front().second;
    };
    for (size_t v = 0; v < n; ++v) {
      for (int k : homes[v]) {
        // Point every input at its copy in kernel k (each reader has one, by construction).
        for (ValueId in : g.nodes[v].inputs) rw.alias(in, image_in(in, k));
        ValueId id = rw.copy(static_cast<ValueId>(v), k);
        images[v].emplace_back(k, id);
      }
      // Graph outputs and later readers outside any kernel see the copy in v's own kernel.
      rw.alias(static_cast<ValueId>(v), image_in(static_cast<ValueId>(v), kernel_of[v]));
    }
    return rw.finish();
  }

  static void fold_into_producers(emmy::ir::Program& p) {
    emmy::passes::Partition part(p.graph, p.grouping);
    bool changed = false;
    for (int k : part.kernels()) {
      if (!part.alive(k) || part.lowered(k) || !part.consumers(k).empty()) continue;
      bool only_index = true;
      for (ValueId v : part.kernel(k).nodes) only_index &= emmy::is_index_op(p.graph.node(v).op);
      if (!only_index) continue;
      std::vector<int> producers = part.producers(k);
      if (producers.size() != 1 || part.lowered(producers[0])) continue;
      // Only when the producer keeps its template (a matmul whose result is sliced is no longer
      // a matmul kernel): otherwise the index ops stay a copy kernel of their own.
      const std::string before = emmy::best_template(p.graph, part.kernel(producers[0]));
      if (!emmy::fits_template(p.graph, part.united({producers[0], k}), before)) continue;
      if (!part.can_merge({producers[0], k})) continue;
      part.merge({producers[0], k});
      changed = true;
    }
    if (changed) p.grouping = part.grouping();
  }
};

}  // namespace

EMMY_PLUGIN(FoldViews)
