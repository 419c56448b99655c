// The cublaslt template plugin's emmy::KernelTemplate (plugin.cpp hands it to the host; tests make
// one with make_cublaslt_template() and give it to a CudaBackend themselves, as the host does).
// It extends the cuda backend as an alternative to its "matmul" kernels: same knobs (algo,
// workspace), same refusals and the same plan ("//@emmy cublaslt ..." steps, cublaslt_call.hpp)
// as when it was built into the backend, so configurations and database rows stay valid.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "emmy/kernel_template.hpp"

namespace emmy::cuda {

class CublasLtTemplate : public KernelTemplate {
 public:
  explicit CublasLtTemplate(const std::map<std::string, std::string>& options = {});
  std::string name() const override;
  std::string backend() const override { return "cuda"; }
  std::string alternative_to() const override { return "matmul"; }
  std::vector<KnobSpec> knobs() const override;
  // "cublasLt <version>" where the library loads ("" where it does not: the backend then does
  // not offer it), appended by the backend as "|cublasLt <version>", the fingerprint's form from
  // before the plugin, so existing databases keep matching.
  std::string fingerprint() const override;
  // The module (cublaslt_template.hpp, generate_cublaslt); a kernel cuBLASLt cannot take is a
  // refusal naming why (without the "cublaslt: " the backend puts before it).
  Status generate(const ir::Graph& kernel, const std::map<std::string, double>& knobs,
                  GeneratedKernel& out, std::string& refusal) noexcept override;
};

std::shared_ptr<KernelTemplate> make_cublaslt_template();

}  // namespace emmy::cuda
