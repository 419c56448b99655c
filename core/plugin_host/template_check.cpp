#include "plugin_host/template_check.hpp"

#include <algorithm>

#include "emmy/knob_constraints.hpp"
#include "emmy/status.hpp"

namespace emmy {

TemplateCheck check_template(PluginHost& host, const PluginRecord& record,
                             const PluginOptions& options) {
  TemplateCheck out;
  std::shared_ptr<KernelTemplate> t;
  std::string alternative_to;
  try {
    t = host.make_template(record.name, options);
  } catch (const Error& e) {
    out.problem = e.what();
    return out;
  }
  // Everything the host and the backend rely on, asked once each: a throwing accessor is a bug
  // of the plugin, reported as such rather than crossing into the host later.
  Status s = guard([&]() -> Status {
    if (t->name() != record.name)
      return Status::Error("name() is '" + t->name() + "', its manifest says '" + record.name +
                           "'");
    if (t->backend() != record.extends)
      return Status::Error("backend() is '" + t->backend() + "', its manifest EXTENDS '" +
                           record.extends + "'");
    alternative_to = t->alternative_to();
    if (alternative_to.empty())
      return Status::Error("alternative_to() names no template (e.g. \"matmul\")");
    std::map<std::string, double> defaults;
    for (const KnobSpec& k : t->knobs()) {
      if (k.name.empty() || k.values.empty())
        return Status::Error("knob '" + k.name + "' has no name or no values");
      defaults[k.name] = k.values.front();
    }
    if (const KnobConstraint* c = contradicted(t->constraints(), defaults))
      return Status::Error(
          "its untuned default (each knob's first value) breaks its own constraint: " + c->reason);
    out.note = "extends " + record.extends + " as an alternative to " + alternative_to;
    return Status::Ok();
  });
  if (!s.ok()) {
    out.problem = "template plugin '" + record.name + "': " + s.message();
    return out;
  }
  t.reset();
  // The backend as a run creates it: with every template extending it, this one included.
  try {
    BackendCaps caps = host.make_backend(record.extends)->capabilities();
    const auto alts = caps.alternatives.find(alternative_to);
    const bool listed = caps.templates.count(record.name) != 0 && alts != caps.alternatives.end() &&
                        std::count(alts->second.begin(), alts->second.end(), record.name) != 0;
    if (!listed)
      out.problem = "the " + record.extends + " backend took template '" + record.name +
                    "' but does not list it in its capabilities (templates and alternatives)";
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find(kUnavailableOnThisMachine) != std::string::npos)
      out.note += "; its backend is " + std::string(kUnavailableOnThisMachine) + ", not checked";
    else
      out.problem = what;
  }
  return out;
}

}  // namespace emmy
