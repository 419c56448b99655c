// The lowering pass, one instance per kernel template: it takes every kernel without a template
// that fits its template, sets Kernel::templ, and asks one in-place fork per knob the selected
// backend declares for the template ("<templ>.<knob>", options "<knob>=<value>", in the backend's
// knob order), offering only the values its knob constraints allow. When the
// backend declares alternative implementations of the template (BackendCaps::alternatives, e.g.
// cuBLASLt for "matmul"), it first asks "<templ>.template" (options "template=<name>", the
// template itself first) and then the knob forks of the chosen one only. In place: it never
// touches the graph or which nodes a kernel holds.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

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

// `site` with only the options whose knobs, beside `decided` (the kernel's knobs chosen so far),
// contradict none of `constraints` (the template's BackendCaps::constraints); every option when
// they leave none (constraints checked one by one can meet in a dead end).
ForkSite allowed_options(const ForkSite& site, const std::vector<KnobConstraint>& constraints,
                         const std::map<std::string, double>& decided);

// The label prefix of the template fork's options ("template=cublaslt"; the SDK's, which the
// search reads).
inline constexpr std::string_view kTemplateLabel = kTemplateOptionPrefix;
// The fork choosing among `templ` and its alternatives the backend can build; nullopt when it
// declares none.
std::optional<ForkSite> template_fork(const BackendCaps& caps, const std::string& templ);

}  // namespace emmy::passes
