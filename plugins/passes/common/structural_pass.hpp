// The shape every structural pass shares: turn the program's grouping into a Partition, let the
// pass merge kernels, write the grouping back; exceptions become a Status naming the pass.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/forks.hpp"
#include "common/partition.hpp"
#include "emmy/pass.hpp"
#include "emmy/plugin.hpp"

namespace emmy::passes {

class MergingPass : public Pass {
 public:
  bool in_place() const final { return false; }
  Status run(ir::Program& program, PassContext& ctx) noexcept final;

 protected:
  // Merges kernels of `partition`; asks forks through `forks`.
  virtual void fuse(Partition& partition, ForkAsker& forks, PassContext& ctx) = 0;
};

// The backends a pass offers its fork on, from its option `backends` (a comma-separated list;
// `fallback` when the option is not given): forks whose merged kernel only some backends'
// templates generate well enough to be worth measuring.
class BackendList {
 public:
  BackendList(const PluginOptions& options, const std::string& fallback);
  bool has(const PassContext& ctx) const;

 private:
  std::vector<std::string> names_;
};

// Kernel m is still open (alive, not lowered) and holds one product that fits the "matmul"
// template: the kernels whose epilogues fuse_epilogue and fuse_gated_epilogue grow.
bool is_open_matmul_kernel(const Partition& part, int m);

// `group` grown by the unlowered pointwise kernels reading it, one at a time (the reader whose
// first node comes first), each kept when `fits` holds for the group with it: a matmul kernel's
// longest epilogue (fuse_epilogue, fuse_gated_epilogue).
std::vector<int> grow_by_pointwise_readers(
    const Partition& part, std::vector<int> group,
    const std::function<bool(const std::vector<int>&)>& fits);

// A row kernel that kernel k may take in as its prologue: the first producer of k that is a row
// kernel read by k alone, mergeable with it, and whose union with k `absorbs` accepts (given the
// union and the producer), with that union (fuse_attention_prologue, fuse_matmul_prologue).
struct RowProducer {
  int kernel = -1;  // -1: none
  ir::Kernel united;
};
RowProducer absorbable_row_producer(
    const Partition& part, int k,
    const std::function<bool(const ir::Kernel& united, int producer)>& absorbs);

}  // namespace emmy::passes
