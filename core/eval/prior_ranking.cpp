#include "eval/prior_ranking.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <sstream>

namespace emmy::prior_eval {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n;
  const double mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  if (saa <= 0 || sbb <= 0) return kNaN;
  return sab / std::sqrt(saa * sbb);
}

int sign(double x) {
  return (x > 0) - (x < 0);
}

double mean_of(const std::vector<double>& v) {
  return v.empty() ? kNaN
                   : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::vector<double> average_ranks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return values[x] < values[y]; });
  std::vector<double> ranks(values.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double rank = (static_cast<double>(i + j) / 2.0) + 1.0;
    for (size_t t = i; t <= j; ++t) ranks[order[t]] = rank;
    i = j + 1;
  }
  return ranks;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) return kNaN;
  return pearson(average_ranks(a), average_ranks(b));
}

double kendall_tau_b(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) return kNaN;
  // O(n^2): held-out groups are small (a reservoir is a few thousand rows at most).
  double concordant_minus_discordant = 0, pairs_a = 0, pairs_b = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = i + 1; j < a.size(); ++j) {
      const int sa = sign(a[i] - a[j]), sb = sign(b[i] - b[j]);
      concordant_minus_discordant += sa * sb;
      pairs_a += sa != 0;
      pairs_b += sb != 0;
    }
  if (pairs_a == 0 || pairs_b == 0) return kNaN;
  return concordant_minus_discordant / std::sqrt(pairs_a * pairs_b);
}

bool best_in_top_k(const std::vector<double>& predicted, const std::vector<double>& measured,
                   size_t k) {
  if (measured.empty() || predicted.size() != measured.size()) return false;
  const size_t best =
      static_cast<size_t>(std::min_element(measured.begin(), measured.end()) - measured.begin());
  std::vector<size_t> order(predicted.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return predicted[x] < predicted[y]; });
  order.resize(std::min(k, order.size()));
  return std::find(order.begin(), order.end(), best) != order.end();
}

std::string kernel_group(const PriorRow& row) {
  std::ostringstream os;
  os.precision(17);
  os << row.features.op_class << ' ' << row.features.dtype << " [";
  for (size_t i = 0; i < row.features.shape.size(); ++i)
    os << (i ? "," : "") << row.features.shape[i];
  os << "] " << row.features.flops << ' ' << row.features.bytes << ' ' << to_string(row.regime);
  return os.str();
}

bool is_held_out(const PriorRow& row, int percent) {
  std::ostringstream os;
  os.precision(17);
  os << kernel_group(row);
  for (const auto& [k, v] : row.knobs) os << ' ' << k << '=' << v;
  return static_cast<int>(fnv1a(os.str()) % 100) < percent;
}

bool is_held_out_kernel(const PriorRow& row, int percent) {
  PriorRow kernel_only = row;
  kernel_only.regime = Regime::rank;
  return static_cast<int>(fnv1a("kernel " + kernel_group(kernel_only)) % 100) < percent;
}

RankingQuality score_prior(const Prior& prior, const std::vector<PriorRow>& rows,
                           const std::vector<size_t>& ks) {
  std::vector<double> predicted;
  for (const auto& row : rows) {
    KnobAssignment assignment;
    assignment.values = row.knobs;
    predicted.push_back(prior.predict(row.features, assignment).mean_us);
  }
  return score_ranking(predicted, rows, ks);
}

RankingQuality score_ranking(const std::vector<double>& predicted,
                             const std::vector<PriorRow>& rows, const std::vector<size_t>& ks) {
  if (predicted.size() != rows.size())
    throw Error("score_ranking: " + std::to_string(predicted.size()) + " predictions for " +
                std::to_string(rows.size()) + " rows");
  RankingQuality q;
  q.rows = rows.size();
  std::vector<double> measured;
  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < rows.size(); ++i) {
    measured.push_back(rows[i].time_us);
    groups[kernel_group(rows[i])].push_back(i);
  }
  q.spearman_all = spearman(predicted, measured);
  q.kendall_all = kendall_tau_b(predicted, measured);

  std::vector<double> rhos, taus;
  std::map<size_t, size_t> hits;
  for (const auto& [key, members] : groups) {
    std::vector<double> p, m;
    for (size_t i : members) {
      p.push_back(predicted[i]);
      m.push_back(measured[i]);
    }
    if (members.size() >= 3) {
      ++q.groups;
      const double rho = spearman(p, m), tau = kendall_tau_b(p, m);
      if (!std::isnan(rho)) rhos.push_back(rho);
      if (!std::isnan(tau)) taus.push_back(tau);
    }
    for (size_t k : ks) {
      if (members.size() <= k) continue;  // the best is trivially among the top k
      ++q.top_k_groups[k];
      hits[k] += best_in_top_k(p, m, k);
    }
  }
  q.spearman_within = mean_of(rhos);
  q.kendall_within = mean_of(taus);
  for (size_t k : ks) {
    const size_t n = q.top_k_groups[k];
    q.top_k_recall[k] = n ? static_cast<double>(hits[k]) / static_cast<double>(n) : kNaN;
  }
  return q;
}

}  // namespace emmy::prior_eval
