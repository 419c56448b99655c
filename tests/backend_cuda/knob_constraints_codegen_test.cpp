// The cuda matmul template's knob constraint (issue 24, item 3), offline: the rule it declares is
// exactly what its generator refuses for a bf16 product the wgmma path takes, the lowering
// offers the search only what the rule allows, and the decisive knobs are asked first.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "common/lowering.hpp"
#include "emmy/knob_constraints.hpp"
#include "expr.hpp"
#include "perf_graphs.hpp"
#include "search/completions.hpp"
#include "search/inner.hpp"
#include "templates.hpp"

namespace emmy::cuda {
namespace {

using Knobs = std::map<std::string, double>;

// Every combination of the matmul template's declared knob values.
std::vector<Knobs> all_combinations(const std::vector<KnobSpec>& specs) {
  std::vector<Knobs> out{{}};
  for (const KnobSpec& spec : specs) {
    std::vector<Knobs> next;
    for (const Knobs& k : out)
      for (double v : spec.values) {
        Knobs more = k;
        more[spec.name] = v;
        next.push_back(more);
      }
    out = std::move(next);
  }
  return out;
}

std::string describe(const Knobs& k) {
  std::string s;
  for (const auto& [n, v] : k) s += n + "=" + std::to_string(static_cast<long>(v)) + " ";
  return s;
}

TEST(CudaKnobConstraints, TheDeclaredRuleIsWhatTheGeneratorRefusesForABf16Product) {
  const BackendCaps caps = cuda_capabilities();
  ASSERT_EQ(caps.constraints.count("matmul"), 1u);
  const std::vector<KnobConstraint>& rules = caps.constraints.at("matmul");
  // bf16 x[256, 256] @ w[256, 256]^T: K-major operands, 16-byte aligned: nothing of the kernel
  // itself refuses a tile, so every refusal is a rule of the template's.
  const ir::Graph g = perf::linear(256, 256, 256, false);
  int allowed = 0, refused = 0;
  for (const Knobs& k : all_combinations(caps.templates.at("matmul"))) {
    const bool declared_ok = contradicted(rules, k) == nullptr;
    EXPECT_EQ(declared_ok, matmul_knob_refusal(k).empty()) << describe(k);
    std::string why;
    try {
      std::string used;
      generate_source(perf::one_kernel(g, "matmul", k), &used);
      EXPECT_EQ(used, "matmul") << describe(k);
    } catch (const KnobRefused& e) {
      why = e.what();
    }
    EXPECT_EQ(declared_ok, why.empty()) << describe(k) << ": " << why;
    (declared_ok ? allowed : refused) += 1;
  }
  EXPECT_GT(allowed, 0);
  EXPECT_GT(refused, 0);  // issue 24: 20 of 77 steps of a patience-50 tune were refused
}

// A descent of the lowering's knob forks for one matmul kernel, each answered at random, offering
// the options allowed_options leaves (or all of them, as before constraints).
Knobs descend(const BackendCaps& caps, std::mt19937& rng, bool honour) {
  Knobs decided;
  for (const ForkSite& site : passes::knob_forks(caps, "matmul")) {
    const ForkSite offered =
        honour ? passes::allowed_options(site, caps.constraints.at("matmul"), decided) : site;
    std::uniform_int_distribution<size_t> pick(0, offered.options.size() - 1);
    for (const auto& [n, v] : offered.options[pick(rng)].knobs) decided[n] = v;
  }
  return decided;
}

TEST(CudaKnobConstraints, TheLoweringNeverOffersARefusedCombination) {
  const BackendCaps caps = cuda_capabilities();
  std::mt19937 rng(24);
  int refused_before = 0, refused_now = 0;
  for (int i = 0; i < 2000; ++i) {
    refused_before += !matmul_knob_refusal(descend(caps, rng, false)).empty();
    refused_now += !matmul_knob_refusal(descend(caps, rng, true)).empty();
  }
  EXPECT_GT(refused_before, 100);  // what the search ran into without the rule
  EXPECT_EQ(refused_now, 0);
  // The untuned default (every fork's first option) is allowed.
  Knobs defaults;
  for (const KnobSpec& spec : caps.templates.at("matmul")) defaults[spec.name] = spec.values.at(0);
  EXPECT_EQ(contradicted(caps.constraints.at("matmul"), defaults), nullptr);
}

// The matmul lowering as the pass plugin runs it.
class LowerMatmul final : public passes::LoweringPass {
 public:
  LowerMatmul() : LoweringPass("matmul") {}
  std::string name() const override { return "lower_matmul"; }
};

// A patience-50 inner search (the real MCTS and lowering) over the product of issue 24, each
// candidate "built" by generating its source: what the template refuses is a refusal, the rest
// gets a made-up time (bigger tiles, deeper rings and wgmma faster), so the search goes where the
// issue saw it go. Returns the refusals it ran into; `evaluated` the candidates.
int refusals_in_a_search(const BackendCaps& caps, int* evaluated) {
  const ir::Graph g = perf::linear(512, 1024, 4096, false);
  const ir::Slice slice = perf::one_kernel(g, "", {});
  const ir::Program program{slice.graph, slice.grouping};
  LowerMatmul lower;
  int refused = 0;
  search::Evaluate evaluate = [&](const search::Candidate& c) {
    search::Evaluation e;
    const ir::Kernel& k = c.program.grouping.kernels.at(0);
    ir::Slice s;
    s.graph = c.program.graph;
    s.grouping = c.program.grouping;
    try {
      generate_source(s);
    } catch (const KnobRefused& why) {
      ++refused;
      e.refused = true;
      e.message = why.what();
      return e;
    }
    const double tile = k.knobs.at("tile_m") * k.knobs.at("tile_n");
    e.ok = true;
    e.time_us =
        1e6 / tile / (1 + k.knobs.at("stages") + 2 * k.knobs.at("wgmma")) + k.knobs.at("warps");
    return e;
  };
  search::InnerOptions options;
  options.patience = 50;
  *evaluated =
      search::inner_search(program, {&lower}, caps, nullptr, KernelFeatures{}, evaluate, options)
          .evaluations;
  return refused;
}

TEST(CudaKnobConstraints, AnInnerSearchRunsIntoNoRefusalWhereItDidWithoutTheRule) {
  BackendCaps caps = cuda_capabilities();
  caps.alternatives.clear();  // the generated template only (no cuBLASLt fork)
  int evaluated = 0;
  EXPECT_EQ(refusals_in_a_search(caps, &evaluated), 0);
  EXPECT_GT(evaluated, 50);
  caps.constraints.clear();  // as before the template declared its rule
  const int before = refusals_in_a_search(caps, &evaluated);
  EXPECT_GT(before, 0);
  std::printf("without the rule: %d of %d candidates refused\n", before, evaluated);
}

TEST(CudaKnobConstraints, TheCodePathAndTheTileShapeAreAskedBeforeTheFineKnobs) {
  std::vector<std::string> order;
  for (const ForkSite& site : passes::knob_forks(cuda_capabilities(), "matmul"))
    order.push_back(site.name);
  // The split of K, the clusters and a persistent grid change how the tiles fill the GPU: decided
  // with the tile;
  // the staged epilogue and the persistent grid's turns between warpgroups last.
  EXPECT_EQ(order, (std::vector<std::string>{"matmul.wgmma", "matmul.tile_m", "matmul.tile_n",
                                             "matmul.splits", "matmul.cluster", "matmul.persistent",
                                             "matmul.tile_k", "matmul.warps", "matmul.stages",
                                             "matmul.staged", "matmul.pingpong"}));
}

// The inner search values a branch by the best whole configuration the prior predicts below it
// where the template's configurations can be enumerated (search/completions.hpp): every cuda
// template can, so a GPU tune asks about whole configurations, and each one kept is one the
// template's rules allow.
TEST(CudaKnobConstraints, EveryTemplatesWholeConfigurationsAreEnumeratedAndAllowed) {
  const BackendCaps caps = cuda_capabilities();
  for (const char* templ : {"matmul", "reduction", "pointwise", "attention"}) {
    auto table =
        search::enumerate_configurations(caps, templ, search::InnerOptions{}.configurations_cap);
    ASSERT_TRUE(table) << templ;
    ASSERT_FALSE(table->rows.empty()) << templ;
    EXPECT_FALSE(table->sampled) << templ;  // every configuration kept
    std::printf("%s: %zu whole configurations%s\n", templ, table->rows.size(),
                table->sampled ? " (a sample)" : "");
    const auto& constraints =
        caps.constraints.count(templ) ? caps.constraints.at(templ) : std::vector<KnobConstraint>{};
    for (size_t r = 0; r < table->rows.size(); r += 7) {
      Knobs k;
      for (size_t i = 0; i < table->knobs.size(); ++i) k[table->knobs[i]] = table->rows[r][i];
      EXPECT_EQ(contradicted(constraints, k), nullptr) << templ << " row " << r;
    }
  }
}

}  // namespace
}  // namespace emmy::cuda
