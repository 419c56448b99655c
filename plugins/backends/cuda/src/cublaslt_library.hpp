// libcublasLt as this process finds it. The cublaslt template plugin's library steps call it in
// the worker (plugins/templates/cublaslt: cublaslt_runner.cpp looks for it the same way), so the
// backend offers that plugin only where the library loads, and the plugin names the version in
// the environment fingerprint: both ask here, so they agree with what the worker will load.
#pragma once

#include <string>

namespace emmy::cuda {

// dlopen "libcublasLt.so.13", then "libcublasLt.so", then the toolkit's library folder the
// backend was built against: the worker loads it the same way. Looked up once; nothing is
// called that needs a device.
struct CublasLtLibrary {
  bool present = false;
  std::string version;  // "13.1.0"
  std::string path;     // what was loaded
  std::string why;      // why it was not found
};
const CublasLtLibrary& cublaslt_library();

}  // namespace emmy::cuda
