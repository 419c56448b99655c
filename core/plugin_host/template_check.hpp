// The conformance checks a template plugin must pass beyond those of every plugin (created with
// default options, destroyed): its object says the name and backend its manifest says, declares
// what it is an alternative to and knobs with values, its untuned default satisfies its own
// constraints, and its backend takes it and lists it (templates, alternatives). Shared by
// `emmy plugins --check` and the conformance suite, so both judge a template the same way.
#pragma once

#include <string>

#include "plugin_host/plugin_host.hpp"

namespace emmy {

struct TemplateCheck {
  std::string problem;  // "" when it conforms
  std::string note;     // what was checked, e.g. "extends cpu as an alternative to matmul"
};

// `record` must be a template record of `host`. A backend unavailable on this machine (its
// constructor says kUnavailableOnThisMachine) is not the template's problem: the note says the
// backend part was not checked.
TemplateCheck check_template(PluginHost& host, const PluginRecord& record,
                             const PluginOptions& options = {});

}  // namespace emmy
