// Passes: structural passes rewrite the grouping (and may rewrite the graph); lowering passes are
// in-place: they only set a kernel's template and knobs. The driver checks the latter.
#pragma once

#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/fork.hpp"
#include "emmy/ir.hpp"
#include "emmy/status.hpp"

namespace emmy {

struct PassContext {
  Resolver& resolver;
  const BackendCaps& caps;  // what the selected backend can build (templates and knob options)
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string name() const = 0;
  // True for lowering passes: they may change only Kernel::templ and Kernel::knobs.
  virtual bool in_place() const = 0;
  virtual Status run(ir::Program& program, PassContext& ctx) noexcept = 0;
};

}  // namespace emmy
