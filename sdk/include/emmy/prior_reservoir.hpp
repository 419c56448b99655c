// A bounded, uniform sample of a stream (Vitter's Algorithm R), for the prior's training rows
// (docs/DESIGN.md, The prior's checkpoint). Header-only, no dependencies, so both a prior
// plugin and the core (which writes the checkpoint's rows) can keep one.
//
// Determinism: the same items offered in the same order with the same seed keep the same sample
// on every platform. std::mt19937_64's sequence is fully specified by the standard; the
// distributions in <random> are not, so the draw below is a hand-written rejection sample.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "emmy/status.hpp"

namespace emmy {

template <typename T>
class Reservoir {
 public:
  explicit Reservoir(size_t capacity = 4096, uint64_t seed = 1) : capacity_(capacity), rng_(seed) {
    if (capacity == 0) throw Error("reservoir capacity must be at least 1");
  }

  static constexpr size_t kNotKept = std::numeric_limits<size_t>::max();

  // Offers one item of the stream; returns true when it was kept. Every item offered so far has
  // the same probability, capacity / seen, of being in the sample.
  bool offer(T item) { return offer_slot(std::move(item)) != kNotKept; }

  // offer(), returning the index in items() the item now holds (kNotKept when it was not kept):
  // for a user that keeps something per item, such as the item encoded.
  size_t offer_slot(T item) {
    ++seen_;
    if (items_.size() < capacity_) {
      items_.push_back(std::move(item));
      return items_.size() - 1;
    }
    const uint64_t slot = uniform_below(seen_);
    if (slot >= capacity_) return kNotKept;
    items_[static_cast<size_t>(slot)] = std::move(item);
    return static_cast<size_t>(slot);
  }

  const std::vector<T>& items() const { return items_; }
  size_t size() const { return items_.size(); }
  size_t capacity() const { return capacity_; }
  uint64_t seen() const { return seen_; }

  // The generator's state as text (the standard's stream format), to checkpoint it.
  std::string rng_state() const {
    std::ostringstream os;
    os << rng_;
    return os.str();
  }

  // Restores a sample saved as items() / seen() / rng_state(). Throws emmy::Error on a state
  // that cannot be one this class wrote.
  void restore(std::vector<T> items, uint64_t seen, const std::string& rng_state) {
    if (items.size() > capacity_)
      throw Error("reservoir state holds " + std::to_string(items.size()) +
                  " items, more than its capacity " + std::to_string(capacity_));
    if (seen < items.size()) throw Error("reservoir state counts fewer items seen than it holds");
    std::mt19937_64 rng;
    std::istringstream is(rng_state);
    is >> rng;
    if (!is) throw Error("reservoir state has an unreadable random generator state");
    items_ = std::move(items);
    seen_ = seen;
    rng_ = rng;
  }

  // Uniform in [0, n), n > 0, without the modulo bias of `rng() % n`.
  uint64_t uniform_below(uint64_t n) {
    const uint64_t max = std::numeric_limits<uint64_t>::max();
    const uint64_t limit = max - (max % n + 1) % n;  // largest multiple of n, minus one
    uint64_t x;
    do x = rng_();
    while (x > limit);
    return x % n;
  }

 private:
  size_t capacity_;
  uint64_t seen_ = 0;
  std::mt19937_64 rng_;
  std::vector<T> items_;
};

}  // namespace emmy
