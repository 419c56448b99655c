// How both backends turn a kernel's template name into its generator (plugins/backends/support):
// the table of built-in generators, a template plugin's kernel (its knobs filled in and checked,
// its refusal), and the errors users see for a template nobody here has. What a generated kernel
// is (a C++ unit, a cuda module) and what happens around it (the fallback, an assembled program)
// stay with each backend (cpu: codegen.cpp, cuda: templates.cpp).
#pragma once

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/ir.hpp"
#include "emmy/kernel_template.hpp"

namespace emmy::backend_support {

// Thrown by a template's generator when the kernel falls outside what that template handles; the
// backend then generates the kernel with its fallback template instead.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The template cannot take these knob values (a declared constraint, BackendCaps::constraints, or
// one that gives no correct kernel for this slice), the kernel names a template this backend does
// not have, or a template plugin refuses the kernel: nothing is built (FailureKind::refused), and
// unlike Unsupported there is no fallback.
class KnobRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using KnobValues = std::map<std::string, int64_t>;

// A generator's graph is its kernel's slice: every node but the inputs and constants belongs to
// the kernel. Those nodes, and them as the kernel that the SDK's matchers take
// (emmy/templates.hpp: match_matmul, match_attention).
std::vector<ir::ValueId> compute_nodes(const ir::Graph& g);
ir::Kernel whole_kernel(const ir::Graph& g);

// A built-in template's generator: the kernel's graph and its resolved knobs to its source.
using Generator = std::function<std::string(const ir::Graph&, const KnobValues&)>;

// The built-in templates that take knobs, by name.
class TemplateTable {
 public:
  TemplateTable(std::initializer_list<std::pair<const std::string, Generator>> generators)
      : generators_(generators) {}
  // nullptr when `name` is not in the table.
  const Generator* find(const std::string& name) const {
    auto it = generators_.find(name);
    return it == generators_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::string, Generator> generators_;
};

// A built-in template's knob declarations from `caps`; throws emmy::Error
// "<who>: unknown kernel template '<templ>'" when it has none.
const std::vector<KnobSpec>& declared_knobs(const BackendCaps& caps, const std::string& templ,
                                            const std::string& who);

// A template plugin's kernel: its knobs with the defaults filled in (and, with
// `check_declared`, each checked against its declared values: emmy::Error
// "<who>: knob T.K = v is not one of the declared values"), its declared constraints checked
// (KnobRefused "T: <reason>" before it is asked), then what it generated, or KnobRefused
// "T: <its refusal>". A plugin that fails throws emmy::Error naming it.
GeneratedKernel generate_with_plugin(KernelTemplate& plugin, const ir::Graph& kernel,
                                     const std::map<std::string, double>& given,
                                     bool check_declared, const std::string& who);

// The refusal of a template this backend has neither built in nor from a plugin (a plugin not
// installed, another backend's): "the <backend> backend has no kernel template '<templ>'", then
// `more` (e.g. what it does have). Never built as something else: its time would be recorded
// under a name that did not run.
[[noreturn]] void refuse_unknown_template(const std::string& backend, const std::string& templ,
                                          const std::string& more = "");

}  // namespace emmy::backend_support
