// The order of a pass pipeline, derived from the manifests' AFTER/BEFORE (docs/PLUGINS.md, Pass
// order): the one declaration of where a pass runs is its manifest, never a list in the code.
//
//   --passes not given, "default", "+NAME", "-NAME", "default,+NAME": the set (the default
//   pipeline's passes, plus and minus the edits) is put in an order that keeps every constraint;
//   where the constraints leave a choice, passes run in name order (stable, documented).
//   An explicit list ("a,b,c", "default" expanding to the ordered default): kept as written, and
//   checked: a pass listed before one it must follow is an error naming both and the constraint.
//
// Constraints chain through passes that are not in play: with `-lower_matmul`, lower_attention
// (BEFORE lower_matmul) still runs before lower_reduction (AFTER lower_matmul).
#pragma once

#include <string>
#include <vector>

#include "plugin_host/plugin_record.hpp"

namespace emmy {

// What a pass contributes to ordering: its name and its manifest's AFTER/BEFORE.
struct PassConstraints {
  std::string name;
  std::vector<std::string> after;
  std::vector<std::string> before;
};

PassConstraints constraints_of(const PluginRecord& record);

// `in_play` in an order that keeps every constraint of `all` (the manifests of every discovered
// pass; those of passes not in play carry chains between passes in play); ties in name order.
// Throws emmy::Error naming the cycle when the constraints contradict each other.
std::vector<std::string> order_passes(const std::vector<std::string>& in_play,
                                      const std::vector<PassConstraints>& all);

// Throws emmy::Error when `list` (an explicit --passes list) runs a pass before one that must
// precede it, naming both passes and the manifests' words that say so; or when a pass is listed
// twice, or the constraints form a cycle.
void check_pass_order(const std::vector<std::string>& list,
                      const std::vector<PassConstraints>& all);

class PluginHost;

// A --passes value resolved against the discovered pass manifests to the pipeline's pass names,
// in order; `spec` as typed ("" = the default pipeline). Throws emmy::Error for an unknown or
// refused pass, a bad edit, a contradiction or a cycle.
std::vector<std::string> resolve_pass_spec(const std::string& spec, const PluginHost& host);

}  // namespace emmy
