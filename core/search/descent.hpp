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
  void fill(Candidate& c) const;

 private:
  SearchTree& tree_;
  ForkKind searched_;
  OptionPredictor predictor_;
  bool defaults_;
  std::string also_searched_;
  std::optional<uint64_t> random_draw_;
  int node_ = SearchTree::root();
  std::vector<size_t> path_;
  std::vector<std::string> forks_;
  std::vector<std::string> labels_;
  std::map<std::string, double> knobs_;
};

}  // namespace emmy::search
