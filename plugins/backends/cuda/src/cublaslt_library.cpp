// libcublasLt's presence and version (cublaslt_library.hpp).
#include "cublaslt_library.hpp"

#include <dlfcn.h>

#include <vector>

namespace emmy::cuda {

const CublasLtLibrary& cublaslt_library() {
  static const CublasLtLibrary lib = [] {
    CublasLtLibrary l;
    std::vector<std::string> names = {"libcublasLt.so.13", "libcublasLt.so"};
#ifdef EMMY_CUDA_LIBRARY_DIR
    names.push_back(std::string(EMMY_CUDA_LIBRARY_DIR) + "/libcublasLt.so.13");
#endif
    for (const std::string& name : names) {
      void* h = ::dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL);
      if (!h) {
        const char* e = ::dlerror();
        if (l.why.empty()) l.why = e ? e : name + " does not load";
        continue;
      }
      using GetVersion = size_t (*)();
      auto get_version = reinterpret_cast<GetVersion>(::dlsym(h, "cublasLtGetVersion"));
      if (!get_version) {
        l.why = name + " has no cublasLtGetVersion";
        continue;  // never unloaded: libraries stay for the life of the process
      }
      const size_t v = get_version();
      l.present = true;
      l.path = name;
      l.version = std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
                  std::to_string(v % 100);
      l.why.clear();
      break;
    }
    return l;
  }();
  return lib;
}

}  // namespace emmy::cuda
