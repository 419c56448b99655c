// Lowering pass for the "reduction" template (see common/lowering.hpp and emmy/templates.hpp); one
// plugin of the lowering library (library.cpp).
#include "common/lowering.hpp"
#include "emmy/plugin.hpp"

namespace {

class LowerReduction final : public emmy::passes::LoweringPass {
 public:
  explicit LowerReduction(const emmy::PluginOptions&) : LoweringPass("reduction") {}
  std::string name() const override { return EMMY_PLUGIN_NAME; }
};

}  // namespace

EMMY_PLUGIN_ENTRY(LowerReduction, lower_reduction_entry)
