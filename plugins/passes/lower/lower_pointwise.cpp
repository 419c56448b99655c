// Lowering pass for the "pointwise" template (see common/lowering.hpp and emmy/templates.hpp); one
// plugin of the lowering library (library.cpp).
#include "common/lowering.hpp"
#include "emmy/plugin.hpp"

namespace {

class LowerPointwise final : public emmy::passes::LoweringPass {
 public:
  explicit LowerPointwise(const emmy::PluginOptions&) : LoweringPass("pointwise") {}
  std::string name() const override { return EMMY_PLUGIN_NAME; }
};

}  // namespace

EMMY_PLUGIN_ENTRY(LowerPointwise, lower_pointwise_entry)
