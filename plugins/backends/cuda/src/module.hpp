// A generated CUDA module: its source and the launch plan the worker follows. The plan travels
// inside the source as `//@emmy` comment lines, so an Artifact (cubin path + source) is enough
// to run it. Kernels take one parameter, `void* const* emmy_buf`: the slice's inputs, then its
// outputs, then scratch buffers, each a device pointer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "emmy/ir.hpp"

namespace emmy::cuda {

struct Launch {
  std::string kernel;
  int64_t grid[3] = {1, 1, 1};
  int64_t block = 128;
  int64_t shared_bytes = 0;  // dynamic shared memory
};

struct Plan {
  std::vector<Launch> launches;
  std::vector<int64_t> scratch_bytes;
};

// "//@emmy scratch N" and "//@emmy launch NAME GX GY GZ BLOCK SMEM" lines.
std::string render_plan(const Plan& plan);
// Reads the plan back from a source; throws emmy::Error when it has no launch line or a bad one.
Plan parse_plan(const std::string& source);

// Assembles a module: the prelude, the plan, and kernels whose bodies a template generates.
class ModuleBuilder {
 public:
  explicit ModuleBuilder(const ir::Graph& g);
  // Pointer names: in<i> / out<k> / scr<j>, declared in every kernel with their element types.
  std::string input_name(size_t i) const { return "in" + std::to_string(i); }
  std::string output_name(size_t k) const { return "out" + std::to_string(k); }
  // A scratch buffer of `count` elements of `dtype`; returns its pointer name.
  std::string add_scratch(ir::DType dtype, int64_t count);
  void add_kernel(const std::string& name, const int64_t grid[3], int64_t block, const std::string& body,
                  int64_t shared_bytes = 0);
  std::string finish(const std::string& note = "") const;

 private:
  const ir::Graph& g_;
  Plan plan_;
  std::vector<std::pair<std::string, ir::DType>> pointers_;  // in emmy_buf order
  std::string kernels_;
};

int64_t ceil_div(int64_t a, int64_t b);

}  // namespace emmy::cuda
