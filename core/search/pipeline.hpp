// Running a pass pipeline once, with one resolver answering its forks, and checking the
// contract between structural and in-place passes (docs/DESIGN.md, Forks and the tree).
#pragma once

#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/fork.hpp"
#include "emmy/ir.hpp"
#include "emmy/pass.hpp"

namespace emmy::search {

// Which passes of a pipeline to run: the outer search runs the structural ones only, the inner
// search (on a slice) the in-place ones only.
enum class PassFilter : unsigned char { all, structural_only, in_place_only };

struct PipelineOptions {
  PassFilter filter = PassFilter::all;
  // After each structural pass, ir::verify and ir::verify_grouping must accept the program.
  bool verify_structural = true;
  // After each in-place pass, every knob it set on a kernel must be one the kernel's template
  // reads in `caps` (else an emmy::Error names the pass, the kernel, the knob and what the
  // template reads). Off only where `caps` is not a real backend's (tests with made-up caps).
  bool check_knobs = true;
};

// Runs `passes` in order on `program`, every fork answered by `resolver`.
// Throws emmy::Error naming the pass when a pass returns an error Status, when an in-place pass
// changed anything but Kernel::templ / Kernel::knobs (the message says what changed), or when a
// structural pass left an invalid graph or grouping.
void run_pipeline(ir::Program& program, const std::vector<Pass*>& passes, Resolver& resolver,
                  const BackendCaps& caps, const PipelineOptions& options = {});

// Empty when `after` has the same structure as `before`: same graph (name, nodes with their op,
// inputs, attributes, type and name, outputs) and same kernels with the same members. Kernel
// templates and knobs may differ. Otherwise the first difference, e.g. "node %3: attrs changed".
std::string structural_difference(const ir::Program& before, const ir::Program& after);

}  // namespace emmy::search
