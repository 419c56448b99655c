// A generated CUDA module: its source and the launch plan the worker follows. The plan travels
// inside the source as `//@emmy` comment lines, so an Artifact (cubin path + source) is enough
// to run it. Kernels take one parameter, `void* const* emmy_buf`: the slice's inputs, then its
// outputs, then scratch buffers, each a device pointer; a module that uses the bulk tensor copy
// engine (TMA) gets one more: its tensor maps, 128 bytes each, which the worker encodes over
// those buffers (they live in global memory, so the one-pointer kernel signature holds).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "emmy/ir.hpp"
#include "wire.hpp"

namespace emmy::cuda {

// A library step (emmy/cuda_step.h): a template plugin's call into a library, made by the worker.
using LibraryStep = wire::LibraryStep;

// A step of the plan: a launch of one of the module's kernels, or (with `step`) a library step
// the worker makes instead (kernel then the step's prefix; grid, block and shared memory unused).
struct Launch {
  std::string kernel;
  int64_t grid[3] = {1, 1, 1};
  int64_t block = 128;
  int64_t shared_bytes = 0;  // dynamic shared memory
  // Which kernel of a program the launch belongs to (0 in a module of one kernel). The worker
  // flushes L2 before each group of a program and times each group on its own, so that an
  // assembled graph is measured the way its kernels were measured in isolation.
  int64_t group = 0;
  std::optional<LibraryStep> step = std::nullopt;
  bool is_library() const { return step.has_value(); }
};

// A TMA tensor map over one of the module's buffers (cuTensorMapEncodeTiled's arguments):
// dims and box innermost first, strides in bytes for dims 1.. (dim 0 is contiguous).
struct TensorMap {
  int64_t buffer = 0;  // index into emmy_buf (inputs, outputs, scratch)
  ir::DType dtype = ir::DType::bf16;
  std::vector<int64_t> dims, strides_bytes, box;
  int64_t swizzle_bytes = 0;  // 0 (none), 32, 64 or 128
};

struct Plan {
  std::vector<Launch> launches;
  std::vector<int64_t> scratch_bytes;
  std::vector<TensorMap> tensor_maps;
  // Every kernel of the module calls emmy_await_producers() before it reads anything (the
  // device prelude's griddepcontrol.wait), so a launch that follows another kernel's may be made
  // with programmatic stream serialization: its blocks start while the previous kernel's last
  // blocks finish, and wait there for its results. Sources from before that rule lack the line
  // and are launched one after the other, as they were timed.
  bool awaits_producers = false;
  // Whether any step launches a kernel of the module (a plan of library calls alone has no cubin).
  bool has_kernels() const {
    for (const Launch& l : launches)
      if (!l.is_library()) return true;
    return false;
  }
};

// "//@emmy scratch N", "//@emmy launch NAME GX GY GZ BLOCK SMEM [GROUP]",
// "//@emmy step GROUP LIBRARY PREFIX N BUFFER... : PLAN" (a library step, in plan order with the
// launches; LIBRARY and PREFIX without blanks, PLAN the rest of the line) and
// "//@emmy tmap BUFFER DTYPE SWIZZLE RANK DIMS... STRIDES... BOX..." lines, and
// "//@emmy awaits_producers" (Plan::awaits_producers).
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
  // A scratch buffer of `count` elements of `dtype`; returns its pointer name. Scratch comes
  // before any tensor map (the maps' pointer follows the buffers).
  std::string add_scratch(ir::DType dtype, int64_t count);
  // A tensor map over the buffer named `pointer` (in<i> / out<k> / scr<j>); returns a device
  // expression for its generic address (in the `emmy_tmaps` table every kernel then declares).
  std::string add_tensor_map(const std::string& pointer, std::vector<int64_t> dims,
                             std::vector<int64_t> strides_bytes, std::vector<int64_t> box,
                             int64_t swizzle_bytes);
  // `attributes` go before __launch_bounds__ (e.g. __cluster_dims__: a compile-time cluster,
  // which a plain launch honours, so the plan's launch line needs nothing more).
  void add_kernel(const std::string& name, const int64_t grid[3], int64_t block,
                  const std::string& body, int64_t shared_bytes = 0,
                  const std::string& attributes = "");
  // A library step (its buffers index the module's pointers: inputs, outputs, scratch); throws
  // emmy::Error when one is outside them or the step cannot be written as a plan line.
  void add_library_step(const LibraryStep& step);
  // How many buffers a step may name so far (inputs, outputs, scratch added).
  int64_t buffer_count() const { return int64_t(pointers_.size()); }
  std::string finish(const std::string& note = "") const;

 private:
  const ir::Graph& g_;
  Plan plan_;
  std::vector<std::pair<std::string, ir::DType>> pointers_;  // in emmy_buf order
  std::string kernels_;
};

int64_t ceil_div(int64_t a, int64_t b);

// The SMs of an H100 or H200 and the shared memory of one (228 KiB): a persistent kernel (knob
// persistent=1 of the attention and the matmul) launches as many blocks as these hold at once.
// Another device computes the same result, its blocks then not all resident at once.
constexpr int64_t kSms = 132;
constexpr int64_t kSharedBytesPerSm = 228 * 1024;
// A persistent grid for `work` items: as many blocks of `shared_bytes` dynamic shared memory as
// fit the SMs at once (with the 1 KiB the hardware reserves per block, at most two a SM by
// registers), so that none waits for another to end; never more blocks than items.
int64_t resident_blocks(int64_t shared_bytes, int64_t work);
// `text` with every `key` replaced by `value` (left to right; a replacement is not searched again).
std::string replace_all(std::string text, const std::string& key, const std::string& value);

}  // namespace emmy::cuda
