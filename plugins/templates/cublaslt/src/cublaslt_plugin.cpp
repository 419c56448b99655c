// The cublaslt template plugin's emmy::KernelTemplate (cublaslt_plugin.hpp).
#include "cublaslt_plugin.hpp"

#include "cublaslt_library.hpp"
#include "cublaslt_template.hpp"
#include "emmy/status.hpp"
#include "expr.hpp"

namespace emmy::cuda {

CublasLtTemplate::CublasLtTemplate(const std::map<std::string, std::string>& options) {
  // It has no options: the switch is the cuda backend's option cublaslt=0 (the backend keeps
  // the template but does not offer it), so one flag keeps meaning what it meant.
  if (!options.empty())
    throw Error("template plugin cublaslt takes no options (got '" + options.begin()->first +
                "'); switch it off with the cuda backend's option cublaslt=0");
}

std::string CublasLtTemplate::name() const { return kTemplateCublaslt; }

std::vector<KnobSpec> CublasLtTemplate::knobs() const { return cublaslt_knobs(); }

std::string CublasLtTemplate::fingerprint() const {
  const CublasLtLibrary& lib = cublaslt_library();
  return lib.present ? "cublasLt " + lib.version : "";
}

Status CublasLtTemplate::generate(const ir::Graph& kernel, const std::map<std::string, double>& knobs,
                                  GeneratedKernel& out, std::string& refusal) noexcept {
  return guard([&]() -> Status {
    KnobValues values;
    for (const auto& [name, value] : knobs) values[name] = static_cast<int64_t>(value);
    try {
      out.source = generate_cublaslt(kernel, values);
    } catch (const KnobRefused& why) {
      // plan_gemm's refusals read "cublaslt: <why>"; the backend names the template itself.
      const std::string prefix = std::string(kTemplateCublaslt) + ": ";
      refusal = why.what();
      if (refusal.rfind(prefix, 0) == 0) refusal = refusal.substr(prefix.size());
    }
    return Status::Ok();
  });
}

std::shared_ptr<KernelTemplate> make_cublaslt_template() { return std::make_shared<CublasLtTemplate>(); }

}  // namespace emmy::cuda
