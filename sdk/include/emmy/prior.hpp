// Priors predict a kernel configuration's latency; the search values untried branches with them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/status.hpp"

namespace emmy {

struct KernelFeatures {
  std::string op_class;        // template or dominant op class ("matmul", "reduction", ...)
  std::vector<int64_t> shape;  // a summary shape (e.g. M, N, K for a matmul; rows, cols else)
  std::string dtype;
  double flops = 0;
  double bytes = 0;
};

// A possibly partial knob assignment: knobs not yet decided are absent from `values`, and
// `missing` names them, so inner nodes of the search tree get estimates too.
struct KnobAssignment {
  std::map<std::string, double> values;
  std::vector<std::string> missing;
};

struct Estimate {
  double mean_us = 0;
  double stddev_us = 0;  // uncertainty; large when the prior knows little
};

struct PriorRow {
  KernelFeatures features;
  std::map<std::string, double> knobs;
  double time_us = 0;
  Regime regime = Regime::rank;
};

class Prior {
 public:
  virtual ~Prior() = default;
  virtual std::string name() const = 0;
  virtual Estimate predict(const KernelFeatures& f, const KnobAssignment& k) const noexcept = 0;
  virtual Status observe(const std::vector<PriorRow>& rows) noexcept = 0;
  virtual Status save(std::string& state) const noexcept = 0;
  virtual Status load(const std::string& state) noexcept = 0;
};

}  // namespace emmy
