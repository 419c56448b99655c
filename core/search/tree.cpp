#include "search/tree.hpp"

#include <algorithm>
#include <cmath>

namespace emmy::search {
namespace {

bool same_site(const SearchTree::Node& n, const ForkSite& site) {
  if (n.site_name != site.name || n.site_kind != site.kind) return false;
  if (n.options.size() != site.options.size()) return false;
  for (size_t i = 0; i < site.options.size(); ++i)
    if (n.options[i].knobs != site.options[i].knobs || n.options[i].label != site.options[i].label)
      return false;
  return true;
}

bool usable_time(double us) {
  return std::isfinite(us) && us > 0;
}

// The key of an answer across the tree: the fork's name and the option's label.
std::string option_key(const std::string& site, const std::string& label) {
  return site + '\x1f' + label;
}

// How many measurements' worth of "the prior is right" an answer's correction starts from: one
// candidate 20 % slower than predicted (relative to its fork's others) moves the answer's
// estimates by half of that, two by two thirds. Enough for a knob value the prior ranks ahead
// to fall behind after a few slow measurements; not so much that one noisy one decides.
constexpr double kCorrectionPrior = 1.0;

// splitmix64: a fixed, portable mixing function, so tie-breaking never depends on the standard
// library's random engines or on iteration order.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

SearchTree::SearchTree(const TreeOptions& options) : opt_(options) {
  nodes_.emplace_back();
}

void SearchTree::set_site(int id, const ForkSite& site) {
  Node& n = nodes_.at(static_cast<size_t>(id));
  if (n.has_site && same_site(n, site)) return;
  // A fork seen for the first time, or one that changed since (a pass answering differently on
  // replay): keep the subtrees of options that are still offered (same label and knobs), start
  // the others afresh; the subtrees of options gone are left unreachable.
  std::vector<int> children(site.options.size(), -1);
  if (n.has_site && n.site_name == site.name && n.site_kind == site.kind)
    for (size_t i = 0; i < site.options.size(); ++i)
      for (size_t j = 0; j < n.options.size(); ++j)
        if (n.children[j] >= 0 && n.options[j].label == site.options[i].label &&
            n.options[j].knobs == site.options[i].knobs) {
          children[i] = n.children[j];
          break;
        }
  const bool was_exhausted = n.exhausted;
  n.has_site = true;
  n.site_name = site.name;
  n.site_kind = site.kind;
  n.options = site.options;
  n.children = std::move(children);
  n.evaluated = false;
  n.exhausted = false;
  if (was_exhausted)  // ancestors counted this node as done; it may not be any more
    for (int p = n.parent; p >= 0; p = nodes_[static_cast<size_t>(p)].parent)
      nodes_[static_cast<size_t>(p)].exhausted = false;
  propagate_exhaustion(id);
}

int SearchTree::child(int id, size_t option) {
  int existing = nodes_.at(static_cast<size_t>(id)).children.at(option);
  if (existing >= 0) return existing;
  Node fresh;
  fresh.parent = id;
  fresh.answer = option;
  nodes_.push_back(std::move(fresh));
  const int created = static_cast<int>(nodes_.size() - 1);
  nodes_[static_cast<size_t>(id)].children[option] = created;
  return created;
}

double SearchTree::subtree_log_estimate(const Node& n) const {
  const double mean_log = n.sum_log_us / n.successes;
  return opt_.best_weight * std::log(n.best_us) + (1 - opt_.best_weight) * mean_log;
}

// Quality in (0, 1] relative to the best time of the whole search (log_ref), scaled down by the
// share of failed evaluations below: a subtree that only fails is worth nothing.
double SearchTree::measured_value(const Node& n, double log_ref) const {
  if (n.successes == 0) return 0;
  const double success_rate = static_cast<double>(n.successes) / n.visits;
  return success_rate * std::exp(log_ref - subtree_log_estimate(n));
}

double SearchTree::option_correction(int id, size_t option) const {
  const Node& n = node(id);
  if (!n.has_site || option >= n.options.size()) return 0;
  auto o = option_residuals_.find(option_key(n.site_name, n.options[option].label));
  if (o == option_residuals_.end()) return 0;
  const Residuals& site = site_residuals_.at(n.site_name);
  const double site_mean = site.sum / site.count;
  return (o->second.sum - o->second.count * site_mean) / (o->second.count + kCorrectionPrior);
}

uint64_t SearchTree::tie_hash(int id, size_t option) const {
  return mix(mix(opt_.seed ^ mix(static_cast<uint64_t>(id))) ^ static_cast<uint64_t>(option));
}

size_t SearchTree::select(int id, const Predict& predict) const {
  const Node& n = node(id);
  const size_t k = n.options.size();

  std::vector<std::optional<double>> pred(k);
  if (predict)
    for (size_t i = 0; i < k; ++i) {
      std::optional<double> p = predict(i);
      if (p && usable_time(*p)) pred[i] = p;
    }

  // The prior's scale need not match measurements: calibrate it (in log space) against the
  // measured siblings, else against every evaluated endpoint, so only its ranking matters. And
  // its ranking need not match either: each option's estimate carries the prior's error about
  // that answer measured elsewhere in the tree (option_correction), so a knob value it ranks
  // ahead but that measured slow under other combinations sinks here too, before it is tried.
  // The measured siblings calibrate net of their own corrections, so a sibling's correction is
  // not counted twice.
  std::vector<double> correction(k, 0.0);
  if (opt_.option_correction)
    for (size_t i = 0; i < k; ++i) correction[i] = option_correction(id, i);
  double cal_sum = 0;
  int cal_n = 0;
  // With remaining_estimate a measured sibling's prediction is its best untried configuration's,
  // so it calibrates by its own measured candidates' errors instead.
  const bool remaining = opt_.remaining_estimate;
  // Globally calibrated (`--search mcts-ranked`), the siblings' errors are not used: not summed.
  const bool global = remaining && opt_.global_calibration;
  for (size_t i = 0; !global && i < k; ++i) {
    const int c = n.children[i];
    if (remaining) {
      if (c < 0 || node(c).residuals == 0) continue;
      cal_sum += node(c).sum_residual / node(c).residuals - correction[i];
      ++cal_n;
      continue;
    }
    if (c < 0 || !pred[i] || node(c).successes == 0) continue;
    cal_sum += subtree_log_estimate(node(c)) - std::log(*pred[i]) - correction[i];
    ++cal_n;
  }
  const double global_cal = calib_count_ > 0 ? calib_sum_ / calib_count_ : 0;
  const double cal = global ? global_cal : cal_n > 0 ? cal_sum / cal_n : global_cal;

  double log_ref = 0;
  if (has_best()) {
    log_ref = std::log(best_us_);
  } else {
    bool any = false;
    for (size_t i = 0; i < k; ++i)
      if (pred[i]) {
        const double l = std::log(*pred[i]) + cal + correction[i];
        log_ref = any ? std::min(log_ref, l) : l;
        any = true;
      }
  }
  // Flat prior: an untried child is assumed as good as its parent has been so far.
  const double neutral = n.successes > 0 ? measured_value(n, log_ref) : 1.0;

  bool have = false;
  size_t chosen = 0;
  double chosen_score = 0;
  uint64_t chosen_hash = 0;
  for (size_t i = 0; i < k; ++i) {
    const int c = n.children[i];
    if (c >= 0 && node(c).exhausted) continue;
    const int visits = c >= 0 ? node(c).visits : 0;
    double value;
    if (visits > 0 && remaining && pred[i]) {
      const Node& m = node(c);
      // The subtree's own error, shrunk towards its siblings' while it has few measurements.
      // Its answer's option correction is not added: its own measurements are that error.
      // Globally calibrated: the search's mean error alone. Its answer's correction is left out
      // as with the subtree's own error: made mostly of the one or two configurations measured
      // below it (with it, 11 evaluations instead of 4 on the replayed sdpa_b1s512 and more on
      // the cpu tables; docs/PERFORMANCE.md).
      const double r =
          global ? cal
                 : (m.sum_residual + kCorrectionPrior * cal) / (m.residuals + kCorrectionPrior);
      // Failures below count against it, as in measured_value (one success in one visit: 1).
      const double rate = static_cast<double>(m.successes + 1) / (m.visits + 1);
      value = rate * std::exp(log_ref - (std::log(*pred[i]) + r));
    } else if (visits > 0)
      value = measured_value(node(c), log_ref);
    else if (pred[i])
      value = std::exp(log_ref - (std::log(*pred[i]) + cal + correction[i]));
    else
      value = neutral;
    const double bonus = opt_.exploration * std::sqrt(std::log(n.visits + 1.0) / (visits + 1.0));
    const double score = value + bonus;
    const uint64_t h = tie_hash(id, i);
    const double tol = 1e-12 * std::max(1.0, std::fabs(score));
    if (!have || score > chosen_score + tol ||
        (std::fabs(score - chosen_score) <= tol && h > chosen_hash)) {
      have = true;
      chosen = i;
      chosen_score = score;
      chosen_hash = h;
    }
  }
  return chosen;  // every child exhausted cannot happen below a live node; 0 is a safe answer
}

size_t SearchTree::select_random(int id, uint64_t draw) const {
  const Node& n = node(id);
  std::vector<size_t> live;
  for (size_t i = 0; i < n.options.size(); ++i)
    if (n.children[i] < 0 || !node(n.children[i]).exhausted) live.push_back(i);
  if (live.empty()) return 0;  // cannot happen below a live node, as for select()
  return live[mix(draw ^ mix(static_cast<uint64_t>(id))) % live.size()];
}

void SearchTree::record(int leaf, bool ok, double time_us, std::optional<double> predicted_us) {
  ok = ok && usable_time(time_us);
  const bool predicted = ok && predicted_us && usable_time(*predicted_us);
  const double residual = predicted ? std::log(time_us) - std::log(*predicted_us) : 0;
  for (int id = leaf; id >= 0; id = nodes_[static_cast<size_t>(id)].parent) {
    Node& n = nodes_[static_cast<size_t>(id)];
    ++n.visits;
    if (ok) {
      ++n.successes;
      n.sum_log_us += std::log(time_us);
      n.best_us = std::min(n.best_us, time_us);
    }
    if (predicted) {
      n.sum_residual += residual;
      ++n.residuals;
    }
  }
  if (ok) {
    best_us_ = std::min(best_us_, time_us);
    if (predicted) {
      calib_sum_ += residual;
      ++calib_count_;
      for (int child = leaf, id = nodes_[static_cast<size_t>(leaf)].parent; id >= 0;
           child = id, id = nodes_[static_cast<size_t>(id)].parent) {
        const Node& n = nodes_[static_cast<size_t>(id)];
        const size_t answer = nodes_[static_cast<size_t>(child)].answer;
        if (!n.has_site || answer >= n.options.size()) continue;
        Residuals& site = site_residuals_[n.site_name];
        site.sum += residual;
        ++site.count;
        Residuals& option = option_residuals_[option_key(n.site_name, n.options[answer].label)];
        option.sum += residual;
        ++option.count;
      }
    }
  }
  nodes_.at(static_cast<size_t>(leaf)).evaluated = true;
  mark_exhausted(leaf);
}

void SearchTree::mark_exhausted(int leaf) {
  nodes_.at(static_cast<size_t>(leaf)).exhausted = true;
  propagate_exhaustion(nodes_[static_cast<size_t>(leaf)].parent);
}

void SearchTree::propagate_exhaustion(int id) {
  while (id >= 0) {
    Node& n = nodes_[static_cast<size_t>(id)];
    for (int c : n.children)
      if (c < 0 || !nodes_[static_cast<size_t>(c)].exhausted) return;
    n.exhausted = true;
    id = n.parent;
  }
}

}  // namespace emmy::search
