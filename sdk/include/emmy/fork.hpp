// Forks: the decision points a pass asks the search to answer (docs/DESIGN.md, Forks and the tree).
// A pass calls `resolver.choose(site)` and gets an option index back; it keeps no state of its
// own between calls, because the pipeline is re-run from the start for every descent.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace emmy {

enum class ForkKind : unsigned char {
  structural,  // changes which kernels exist (fusion, splitting, attention fusion)
  in_place,    // changes how one kernel computes (tile sizes, threads, unroll, ...)
};

struct ForkOption {
  std::string label;                    // shown in -v lines and reports
  std::map<std::string, double> knobs;  // knob name -> value this option contributes
};

struct ForkSite {
  std::string name;  // stable name, e.g. "cpu.matmul.tile_m" or "fusion.epilogue@k3"
  std::vector<ForkOption> options;
  ForkKind kind = ForkKind::in_place;
  // The kernel template whose knobs this fork decides ("" when none): the search values a
  // partial configuration knowing every knob of that template, the later forks' too. A field,
  // not a part of `name`, which stays what the database keys were built from.
  std::string templ;
};

// The label prefix of the options of a template fork, by which a lowering pass chooses among a
// template and its alternative implementations ("<templ>.template", options "template=matmul",
// "template=cublaslt"; docs/PLUGINS.md): what the search reads to know which template an option
// builds, so that the prior is asked about that template's kernels.
inline constexpr std::string_view kTemplateOptionPrefix = "template=";

// The template an option of a template fork chooses; "" for any other option.
inline std::string template_chosen(const ForkOption& option) {
  if (option.label.compare(0, kTemplateOptionPrefix.size(), kTemplateOptionPrefix) != 0) return "";
  return option.label.substr(kTemplateOptionPrefix.size());
}

// Answers forks. The search implements it; so do tests and the "default" resolver that always
// answers option 0 (the untuned configuration).
class Resolver {
 public:
  virtual ~Resolver() = default;
  // Returns an index into site.options. Never called with an empty option list.
  virtual size_t choose(const ForkSite& site) = 0;
};

class DefaultResolver final : public Resolver {
 public:
  size_t choose(const ForkSite&) override { return 0; }
};

}  // namespace emmy
