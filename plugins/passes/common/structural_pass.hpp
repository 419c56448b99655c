// The shape every structural pass shares: turn the program's grouping into a Partition, let the
// pass merge kernels, write the grouping back; exceptions become a Status naming the pass.
#pragma once

#include <string>

#include "common/forks.hpp"
#include "common/partition.hpp"
#include "emmy/pass.hpp"

namespace emmy::passes {

class MergingPass : public Pass {
 public:
  bool in_place() const final { return false; }
  Status run(ir::Program& program, PassContext& ctx) noexcept final;

 protected:
  // Merges kernels of `partition`; asks forks through `forks`.
  virtual void fuse(Partition& partition, ForkAsker& forks, PassContext& ctx) = 0;
};

}  // namespace emmy::passes
