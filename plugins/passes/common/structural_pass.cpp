#include "common/structural_pass.hpp"

namespace emmy::passes {

Status MergingPass::run(ir::Program& program, PassContext& ctx) noexcept {
  Status s = guard([&] {
    Partition partition(program.graph, program.grouping);
    ForkAsker forks(ctx.resolver);
    fuse(partition, forks, ctx);
    program.grouping = partition.grouping();
  });
  if (!s.ok()) return Status::Error("pass " + name() + ": " + s.message());
  return s;
}

}  // namespace emmy::passes
