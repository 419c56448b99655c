// The cublaslt template plugin's emmy::KernelTemplate (plugin.cpp hands it to the host; tests make
// one with make_cublaslt_template() and give it to a CudaBackend themselves, as the host does).
// It extends the cuda backend as an alternative to its "matmul" kernels: same knobs (algo,
// workspace), same refusals and the same cuBLASLt call as when it was built into the backend, so
// configurations and database rows stay valid; the call is now a library step of its own
// (emmy/cuda_step.h) that the worker makes through this plugin's shared library.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "emmy/kernel_template.hpp"

namespace emmy::cuda {

class CublasLtTemplate : public KernelTemplate {
 public:
  // Created by the host (plugin.cpp): its steps name the shared library it was loaded from.
  explicit CublasLtTemplate(const std::map<std::string, std::string>& options = {});
  // With the path of the plugin's shared library given: the tests, which link its code statically.
  explicit CublasLtTemplate(std::string library);
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
  // The shared library whose step functions the modules name ("" when unknown: generate fails).
  const std::string& library() const { return library_; }

 private:
  std::string library_, why_no_library_;
};

// A plugin whose steps name `library` (the plugin's shared library, e.g. the build tree's).
std::shared_ptr<KernelTemplate> make_cublaslt_template(const std::string& library);

}  // namespace emmy::cuda
