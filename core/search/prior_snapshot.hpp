// The prior snapshot a tuning run starts from. Every inner search of the run gets a fresh prior
// restored from it (plus only its own kernel's rows), so per-kernel results do not depend on the
// order kernels are tuned in or finish in (docs/DESIGN.md, Determinism).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "emmy/prior.hpp"

namespace emmy::search {

class PriorSnapshot {
 public:
  // Saves `prior`'s state; throws emmy::Error naming the prior when it cannot.
  explicit PriorSnapshot(const Prior& prior);
  // A state already saved (Prior::save) by prior `name`.
  PriorSnapshot(std::string name, std::string state)
      : name_(std::move(name)), state_(std::move(state)) {}

  // Loads the snapshot into `fresh`, a new instance of the same prior (from the plugin host);
  // throws emmy::Error naming the prior when it cannot.
  void restore(Prior& fresh) const;

  const std::string& state() const { return state_; }

 private:
  std::string name_;
  std::string state_;
};

// A kernel's search seed, from the run's seed and the kernel's structural key only (never its
// position), so a kernel is searched the same way whatever order kernels are tuned in.
uint64_t kernel_seed(uint64_t run_seed, const std::string& key);

}  // namespace emmy::search
