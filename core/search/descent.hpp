// The resolver one descent uses: it answers the searched kind of fork from the tree (selection)
// and every other fork with option 0 (the untuned default), and remembers the answers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "emmy/fork.hpp"
#include "search/candidate.hpp"
#include "search/tree.hpp"

namespace emmy::search {

// What one descent answered, in the form a Candidate keeps (path, fork names, labels, knobs):
// shared by the resolvers that record a descent (TreeResolver here, recombination's preset one).
struct DescentAnswers {
  std::vector<size_t> path;
  std::vector<std::string> forks;
  std::vector<std::string> labels;
  std::map<std::string, double> knobs;  // every fork's, answered or defaulted

  // A fork of the level being decided: its answer is part of the candidate.
  void answered(const ForkSite& site, size_t answer) {
    path.push_back(answer);
    forks.push_back(site.name);
    labels.push_back(site.options[answer].label);
    take_knobs(site, answer);
  }
  // A fork of the other level, answered with its default: only its knobs count.
  void take_knobs(const ForkSite& site, size_t answer) {
    for (const auto& [k, v] : site.options[answer].knobs) knobs[k] = v;
  }
  void fill(Candidate& c) const {
    c.path = path;
    c.forks = forks;
    c.labels = labels;
    c.knobs = knobs;
  }
};

class TreeResolver final : public Resolver {
 public:
  // Predicted time (µs) under `option` of `site`, given the knobs decided so far on this descent;
  // nullopt = no opinion (flat prior).
  using OptionPredictor = std::function<std::optional<double>(
      const std::map<std::string, double>& decided, const ForkSite& site, size_t option)>;

  // `defaults`: answer every searched fork with option 0 (the backend's untuned default) while
  // that child is not exhausted, instead of selecting.
  // `also_searched`: a fork of the other kind named "<also_searched>@..." is searched as well.
  // `random_draw`: pick uniformly among the children not exhausted (SearchTree::select_random,
  // this draw), never by the tree's rule; the predictor is then not consulted.
  TreeResolver(SearchTree& tree, ForkKind searched, OptionPredictor predictor = {},
               bool defaults = false, std::string also_searched = {},
               std::optional<uint64_t> random_draw = std::nullopt);

  // Throws emmy::Error for a site without options (the Resolver contract forbids it).
  size_t choose(const ForkSite& site) override;

  int endpoint() const { return node_; }  // the tree node this descent ended at
  // Copies the answers (path, fork names, labels, knobs) into `c`.
  void fill(Candidate& c) const { answers_.fill(c); }

 private:
  SearchTree& tree_;
  ForkKind searched_;
  OptionPredictor predictor_;
  bool defaults_;
  std::string also_searched_;
  std::optional<uint64_t> random_draw_;
  int node_ = SearchTree::root();
  DescentAnswers answers_;
};

}  // namespace emmy::search
