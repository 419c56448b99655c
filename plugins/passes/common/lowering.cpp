#include "common/lowering.hpp"

#include "common/forks.hpp"
#include "emmy/templates.hpp"

namespace emmy::passes {

std::vector<ForkSite> knob_forks(const BackendCaps& caps, const std::string& templ) {
  std::vector<ForkSite> sites;
  auto it = caps.templates.find(templ);
  if (it == caps.templates.end()) return sites;
  for (const KnobSpec& knob : it->second) {
    if (knob.values.empty()) continue;
    ForkSite site;
    site.name = templ + "." + knob.name;
    site.kind = ForkKind::in_place;
    for (double v : knob.values)
      site.options.push_back(ForkOption{knob.name + "=" + format_knob_value(v), {{knob.name, v}}});
    sites.push_back(std::move(site));
  }
  return sites;
}

Status LoweringPass::run(ir::Program& program, PassContext& ctx) noexcept {
  Status s = guard([&] {
    const bool is_fallback = templ_ == kTemplateFallback;
    // A backend that does not list the template cannot build it: leave the kernels to the next
    // lowering pass. Fallback is the exception: every backend builds it, knobs or not.
    if (!is_fallback && ctx.caps.templates.count(templ_) == 0) return;
    const std::vector<ForkSite> sites = knob_forks(ctx.caps, templ_);
    for (ir::Kernel& k : program.grouping.kernels) {
      if (!k.templ.empty() || !fits_template(program.graph, k, templ_)) continue;
      k.templ = templ_;
      k.knobs.clear();
      // One fork per kernel and knob: each kernel of a slice is tuned on its own.
      for (const ForkSite& site : sites) {
        size_t answer = ctx.resolver.choose(site);
        if (answer >= site.options.size())
          throw Error("resolver answered option " + std::to_string(answer) + " for fork '" +
                      site.name + "', which has " + std::to_string(site.options.size()) + " options");
        for (const auto& [knob, value] : site.options[answer].knobs) k.knobs[knob] = value;
      }
    }
  });
  if (!s.ok()) return Status::Error("pass " + name() + ": " + s.message());
  return s;
}

}  // namespace emmy::passes
