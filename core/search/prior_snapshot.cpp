#include "search/prior_snapshot.hpp"

#include "emmy/status.hpp"

namespace emmy::search {

PriorSnapshot::PriorSnapshot(const Prior& prior) : name_(prior.name()) {
  Status s = prior.save(state_);
  if (!s.ok()) throw Error("prior '" + name_ + "': cannot save a snapshot: " + s.message());
}

void PriorSnapshot::restore(Prior& fresh) const {
  Status s = fresh.load(state_);
  if (!s.ok())
    throw Error("prior '" + fresh.name() + "': cannot load the snapshot of prior '" + name_ +
                "': " + s.message());
}

uint64_t kernel_seed(uint64_t run_seed, const std::string& key) {
  // FNV-1a over the key, folded with the run seed: fixed across platforms and processes.
  uint64_t h = 1469598103934665603ULL ^ run_seed;
  for (unsigned char ch : key) {
    h ^= ch;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace emmy::search
