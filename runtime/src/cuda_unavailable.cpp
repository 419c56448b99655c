// Built without the CUDA toolkit's headers: a cuda export is refused by name.
#include "executor.hpp"

namespace emmy::runtime {

std::unique_ptr<Executor> make_cuda_executor(const PlanData&, const std::string& folder) {
  throw Error(folder + ": a cuda export, but this libemmy_runtime was built without CUDA");
}

}  // namespace emmy::runtime
