#include "common/structural_pass.hpp"

#include <algorithm>
#include <sstream>

#include "emmy/templates.hpp"

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

BackendList::BackendList(const PluginOptions& options, const std::string& fallback) {
  auto it = options.find("backends");
  std::stringstream in(it == options.end() ? fallback : it->second);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) names_.push_back(item);
}

bool BackendList::has(const PassContext& ctx) const {
  return std::find(names_.begin(), names_.end(), ctx.caps.backend) != names_.end();
}

bool is_open_matmul_kernel(const Partition& part, int m) {
  const auto& g = part.graph();
  return part.alive(m) && !part.lowered(m) && count_ops(g, part.kernel(m), is_matmul_op) == 1 &&
         fits_template(g, part.kernel(m), kTemplateMatmul);
}

std::vector<int> grow_by_pointwise_readers(
    const Partition& part, std::vector<int> group,
    const std::function<bool(const std::vector<int>&)>& fits) {
  const auto& g = part.graph();
  bool grew = true;
  while (grew) {
    grew = false;
    std::vector<int> frontier;
    for (int k : group)
      for (int c : part.consumers(k))
        if (std::find(group.begin(), group.end(), c) == group.end()) frontier.push_back(c);
    std::sort(frontier.begin(), frontier.end(), [&](int a, int b) {
      return part.kernel(a).nodes.front() < part.kernel(b).nodes.front();
    });
    for (int c : frontier) {
      if (part.lowered(c) || !is_pointwise_kernel(g, part.kernel(c))) continue;
      std::vector<int> trial = group;
      trial.push_back(c);
      if (!fits(trial)) continue;
      group = std::move(trial);
      grew = true;
      break;
    }
  }
  return group;
}

RowProducer absorbable_row_producer(
    const Partition& part, int k,
    const std::function<bool(const ir::Kernel& united, int producer)>& absorbs) {
  for (int p : part.producers(k)) {
    if (!is_row_kernel(part, p) || !private_to(part, p, k)) continue;
    const std::vector<int> both{k, p};
    if (!part.can_merge(both)) continue;
    ir::Kernel united = part.united(both);
    if (absorbs(united, p)) return RowProducer{p, std::move(united)};
  }
  return {};
}

}  // namespace emmy::passes
