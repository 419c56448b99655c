// Lowering pass for the "matmul" template (see common/lowering.hpp and emmy/templates.hpp); one
// plugin of the lowering library (library.cpp).
#include "common/lowering.hpp"
#include "emmy/plugin.hpp"

namespace {

class LowerMatmul final : public emmy::passes::LoweringPass {
 public:
  explicit LowerMatmul(const emmy::PluginOptions&) : LoweringPass("matmul") {}
  std::string name() const override { return EMMY_PLUGIN_NAME; }
};

}  // namespace

EMMY_PLUGIN_ENTRY(LowerMatmul, lower_matmul_entry)
