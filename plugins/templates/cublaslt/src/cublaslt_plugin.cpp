// The cublaslt template plugin's emmy::KernelTemplate (cublaslt_plugin.hpp).
#include "cublaslt_plugin.hpp"

#include <dlfcn.h>

#include <filesystem>

#include "cublaslt_library.hpp"
#include "cublaslt_template.hpp"
#include "emmy/status.hpp"
#include "expr.hpp"

namespace emmy::cuda {

namespace {

// The shared library this code was loaded from, when it exports the step's functions (the
// plugin); "" with `why` otherwise (the code linked statically into a test executable).
std::string own_library(std::string& why) {
  Dl_info info{};
  if (!::dladdr(reinterpret_cast<void*>(&make_cublaslt_template), &info) || !info.dli_fname) {
    why = "dladdr does not know the code's library";
    return "";
  }
  void* self = ::dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  const std::string prepare = std::string(kStepPrefix) + "_prepare";
  if (!self || !::dlsym(self, prepare.c_str())) {
    why = std::string(info.dli_fname) + " exports no " + prepare +
          " (not the plugin's shared library)";
    return "";
  }
  // Absolute: the worker runs with another working folder than the host may have had.
  const std::filesystem::path plugin = std::filesystem::absolute(info.dli_fname);
  // The same step functions built alone (libemmy_cublaslt_step.so, beside the plugins' folder:
  // it needs no libemmy_sdk), when installed: the library an export copies and libemmy_runtime
  // loads without the tuner (docs/RUNTIME.md, Library steps).
  std::error_code ec;
  const std::filesystem::path alone = plugin.parent_path().parent_path() / kStepLibrary;
  if (std::filesystem::exists(alone, ec)) return alone.string();
  return plugin.string();
}

}  // namespace

CublasLtTemplate::CublasLtTemplate(const std::map<std::string, std::string>& options)
    : library_(own_library(why_no_library_)) {
  // It has no options: the switch is the cuda backend's option cublaslt=0 (the backend keeps
  // the template but does not offer it), so one flag keeps meaning what it meant.
  if (!options.empty())
    throw Error("template plugin cublaslt takes no options (got '" + options.begin()->first +
                "'); switch it off with the cuda backend's option cublaslt=0");
}

CublasLtTemplate::CublasLtTemplate(std::string library) : library_(std::move(library)) {
  if (library_.empty()) why_no_library_ = "no library path given";
}

std::string CublasLtTemplate::name() const {
  return kTemplateCublaslt;
}

std::vector<KnobSpec> CublasLtTemplate::knobs() const {
  return cublaslt_knobs();
}

std::string CublasLtTemplate::fingerprint() const {
  const CublasLtLibrary& lib = cublaslt_library();
  return lib.present ? "cublasLt " + lib.version : "";
}

Status CublasLtTemplate::generate(const ir::Graph& kernel,
                                  const std::map<std::string, double>& knobs, GeneratedKernel& out,
                                  std::string& refusal) noexcept {
  return guard([&]() -> Status {
    if (library_.empty())
      return Status::Error("cublaslt: its modules cannot name the plugin's library: " +
                           why_no_library_);
    KnobValues values;
    for (const auto& [name, value] : knobs) values[name] = static_cast<int64_t>(value);
    try {
      out.source = generate_cublaslt(kernel, values, library_);
    } catch (const KnobRefused& why) {
      // plan_gemm's refusals read "cublaslt: <why>"; the backend names the template itself.
      const std::string prefix = std::string(kTemplateCublaslt) + ": ";
      refusal = why.what();
      if (refusal.rfind(prefix, 0) == 0) refusal = refusal.substr(prefix.size());
    }
    return Status::Ok();
  });
}

std::shared_ptr<KernelTemplate> make_cublaslt_template(const std::string& library) {
  return std::make_shared<CublasLtTemplate>(library);
}

}  // namespace emmy::cuda
