// Fork helpers shared by the passes: fork names, the fuse/split structural fork, and asking each
// distinct fork once per pass run.
#pragma once

#include <map>
#include <string>

#include "emmy/fork.hpp"
#include "emmy/ir.hpp"

namespace emmy::passes {

// A position-independent name for a kernel (or a would-be kernel): the first 16 hex digits of
// its structural key, so identical situations in different layers share one fork.
std::string situation_id(const ir::Graph& g, const ir::Kernel& k);

// "<family>@<situation>" with options {fuse_label, split_label}; option 0 fuses (the default).
// Each option sets knob <family> to 1 (fuse) or 0 (split), the prior's view of the choice.
ForkSite fuse_or_split(const std::string& family, const std::string& situation,
                       const std::string& fuse_label = "fuse",
                       const std::string& split_label = "split");

// "<family>@<situation>" with options {separate, absorbed}; option 0 keeps the kernels apart (the
// default), option 1 lets one kernel absorb the other (knob <family> 0 or 1): the forks whose
// merged kernel only some backends generate (fuse_attention_prologue, fuse_gated_epilogue,
// fuse_matmul_prologue).
ForkSite separate_or_absorbed(const std::string& family, const std::string& situation);

// Asks the resolver; a fork already asked in this run (same name) gets the same answer without
// asking again, so a model with many identical layers adds each structural fork once.
class ForkAsker {
 public:
  explicit ForkAsker(Resolver& resolver) : resolver_(resolver) {}
  size_t ask(const ForkSite& site);

 private:
  Resolver& resolver_;
  std::map<std::string, size_t> answers_;
};

// Renders a knob value for an option label: integers without a decimal point.
std::string format_knob_value(double v);

}  // namespace emmy::passes
