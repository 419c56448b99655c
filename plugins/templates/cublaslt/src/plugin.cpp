// The cublaslt template plugin's entry point (everything else is in emmy_cublaslt_template).
#include "emmy/plugin.hpp"

#include "cublaslt_plugin.hpp"

EMMY_PLUGIN(emmy::cuda::CublasLtTemplate)
