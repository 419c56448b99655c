// The cublaslt template plugin's entry point (everything else is in emmy_cublaslt_template).
#include "cublaslt_plugin.hpp"
#include "emmy/plugin.hpp"

EMMY_PLUGIN(emmy::cuda::CublasLtTemplate)
