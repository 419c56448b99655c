// The lowering pass, one instance per kernel template: it takes every kernel without a template
// that fits its template, sets Kernel::templ, and asks one in-place fork per knob the selected
// backend declares for the template ("<templ>.<knob>", options "<knob>=<value>"). In place: it
// never touches the graph or which nodes a kernel holds.
#pragma once

#include <string>

#include "emmy/pass.hpp"

namespace emmy::passes {

class LoweringPass : public Pass {
 public:
  explicit LoweringPass(std::string templ) : templ_(std::move(templ)) {}
  bool in_place() const final { return true; }
  Status run(ir::Program& program, PassContext& ctx) noexcept final;

 private:
  std::string templ_;
};

// The knob forks of template `templ` under `caps`, in the backend's knob order.
std::vector<ForkSite> knob_forks(const BackendCaps& caps, const std::string& templ);

}  // namespace emmy::passes
