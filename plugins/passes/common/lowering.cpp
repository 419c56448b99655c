#include "common/lowering.hpp"

#include <map>
#include <optional>

#include "common/forks.hpp"
#include "emmy/knob_constraints.hpp"
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
    site.templ = templ;
    for (double v : knob.values)
      site.options.push_back(ForkOption{knob.name + "=" + format_knob_value(v), {{knob.name, v}}});
    sites.push_back(std::move(site));
  }
  return sites;
}

std::optional<ForkSite> template_fork(const BackendCaps& caps, const std::string& templ) {
  auto alts = caps.alternatives.find(templ);
  if (alts == caps.alternatives.end()) return std::nullopt;
  ForkSite site;
  site.name = templ + ".template";
  site.kind = ForkKind::in_place;
  site.templ = templ;
  // No knobs: the configuration records the template by name (a generated kernel's knobs and
  // configuration key stay what they were before alternatives existed).
  site.options.push_back(ForkOption{std::string(kTemplateLabel) + templ, {}});
  for (const std::string& alt : alts->second) {
    if (alt == templ || caps.templates.count(alt) == 0) continue;  // not buildable: not offered
    site.options.push_back(ForkOption{std::string(kTemplateLabel) + alt, {}});
  }
  if (site.options.size() < 2) return std::nullopt;
  return site;
}

ForkSite allowed_options(const ForkSite& site, const std::vector<KnobConstraint>& constraints,
                         const std::map<std::string, double>& decided) {
  ForkSite out = site;
  out.options.clear();
  for (const ForkOption& option : site.options) {
    std::map<std::string, double> values = decided;
    for (const auto& [knob, value] : option.knobs) values[knob] = value;
    if (contradicted(constraints, values) == nullptr) out.options.push_back(option);
  }
  // Constraints that only together rule out every value (each was checked alone): offer them
  // all, and let the template refuse what it cannot build, as it would without constraints.
  if (out.options.empty()) out.options = site.options;
  return out;
}

Status LoweringPass::run(ir::Program& program, PassContext& ctx) noexcept {
  Status s = guard([&] {
    const bool is_fallback = templ_ == kTemplateFallback;
    // A backend that does not list the template cannot build it: leave the kernels to the next
    // lowering pass. Fallback is the exception: every backend builds it, knobs or not.
    if (!is_fallback && ctx.caps.templates.count(templ_) == 0) return;
    auto choose = [&](const ForkSite& site) {
      size_t answer = ctx.resolver.choose(site);
      if (answer >= site.options.size())
        throw Error("resolver answered option " + std::to_string(answer) + " for fork '" +
                    site.name + "', which has " + std::to_string(site.options.size()) + " options");
      return answer;
    };
    const std::optional<ForkSite> which = template_fork(ctx.caps, templ_);
    std::map<std::string, std::vector<ForkSite>> sites;  // per template that may be chosen
    sites[templ_] = knob_forks(ctx.caps, templ_);
    if (which)
      for (const std::string& alt : ctx.caps.alternatives.at(templ_))
        sites[alt] = knob_forks(ctx.caps, alt);
    for (ir::Kernel& k : program.grouping.kernels) {
      if (!k.templ.empty() || !fits_template(program.graph, k, templ_)) continue;
      // The implementation first (when the backend has alternatives), then its knobs only.
      k.templ = which ? template_chosen(which->options[choose(*which)]) : templ_;
      k.knobs.clear();
      // One fork per kernel and knob: each kernel of a slice is tuned on its own. Each offers
      // only the values the template's constraints still allow beside the knobs decided.
      const auto rules = ctx.caps.constraints.find(k.templ);
      for (const ForkSite& site : sites.at(k.templ)) {
        const ForkSite offered = rules == ctx.caps.constraints.end()
                                     ? site
                                     : allowed_options(site, rules->second, k.knobs);
        for (const auto& [knob, value] : offered.options[choose(offered)].knobs)
          k.knobs[knob] = value;
      }
    }
  });
  if (!s.ok()) return Status::Error("pass " + name() + ": " + s.message());
  return s;
}

}  // namespace emmy::passes
