// Lowering pass for the "fallback" template (see common/lowering.hpp and emmy/templates.hpp); one
// plugin of the lowering library (library.cpp).
#include "common/lowering.hpp"
#include "emmy/plugin.hpp"

namespace {

class LowerFallback final : public emmy::passes::LoweringPass {
 public:
  explicit LowerFallback(const emmy::PluginOptions&) : LoweringPass("fallback") {}
  std::string name() const override { return EMMY_PLUGIN_NAME; }
};

}  // namespace

EMMY_PLUGIN_ENTRY(LowerFallback, lower_fallback_entry)
