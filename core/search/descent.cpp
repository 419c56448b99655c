#include "search/descent.hpp"

#include "emmy/status.hpp"

namespace emmy::search {

TreeResolver::TreeResolver(SearchTree& tree, ForkKind searched, OptionPredictor predictor,
                           bool defaults, std::string also_searched,
                           std::optional<uint64_t> random_draw)
    : tree_(tree),
      searched_(searched),
      predictor_(std::move(predictor)),
      defaults_(defaults),
      also_searched_(std::move(also_searched)),
      random_draw_(random_draw) {}

size_t TreeResolver::choose(const ForkSite& site) {
  if (site.options.empty()) throw Error("fork '" + site.name + "' was asked with no options");
  const bool also = !also_searched_.empty() && site.name.size() > also_searched_.size() &&
                    site.name.compare(0, also_searched_.size(), also_searched_) == 0 &&
                    site.name[also_searched_.size()] == '@';
  if (site.kind != searched_ && !also) {
    // Not this level's decision: the untuned default, outside the tree.
    answers_.take_knobs(site, 0);
    return 0;
  }
  tree_.set_site(node_, site);
  SearchTree::Predict predict;
  if (predictor_) predict = [&](size_t option) { return predictor_(answers_.knobs, site, option); };
  const auto& first = tree_.node(node_).children;
  const bool take_default =
      defaults_ && (first.empty() || first[0] < 0 || !tree_.node(first[0]).exhausted);
  size_t answer = 0;
  if (!take_default)
    answer =
        random_draw_ ? tree_.select_random(node_, *random_draw_) : tree_.select(node_, predict);
  answers_.answered(site, answer);
  node_ = tree_.child(node_, answer);
  return answer;
}

}  // namespace emmy::search
