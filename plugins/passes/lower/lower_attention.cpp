// Lowering pass for the "attention" template (see common/lowering.hpp and emmy/templates.hpp); one
// plugin of the lowering library (library.cpp).
#include "common/lowering.hpp"
#include "emmy/plugin.hpp"

namespace {

class LowerAttention final : public emmy::passes::LoweringPass {
 public:
  explicit LowerAttention(const emmy::PluginOptions&) : LoweringPass("attention") {}
  std::string name() const override { return EMMY_PLUGIN_NAME; }
};

}  // namespace

EMMY_PLUGIN_ENTRY(LowerAttention, lower_attention_entry)
