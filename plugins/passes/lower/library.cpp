// The lowering passes: one library, one plugin per template (emmy/plugin.hpp, EMMY_PLUGIN_LIBRARY).
// Each keeps its own name, manifest, forks and place in the pipeline (CMakeLists.txt); they share
// the code of common/lowering.hpp, so they share its one copy here too.
#include "emmy/plugin.hpp"

EmmyPluginInfo lower_attention_entry();
EmmyPluginInfo lower_matmul_entry();
EmmyPluginInfo lower_reduction_entry();
EmmyPluginInfo lower_pointwise_entry();
EmmyPluginInfo lower_fallback_entry();

EMMY_PLUGIN_LIBRARY(lower_attention_entry(), lower_matmul_entry(), lower_reduction_entry(),
                    lower_pointwise_entry(), lower_fallback_entry())
