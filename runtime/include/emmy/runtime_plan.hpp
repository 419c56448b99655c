// The plan of an Emmy export as plain data (docs/RUNTIME.md), and its file form (runtime/plan.fbs):
// `emmy export` fills a PlanData and writes it with encode_plan; libemmy_runtime reads it back
// with decode_plan. No dependency on the tuner, its database or the plugins.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace emmy::runtime {

// The plan format this library writes and reads. Bumped when a file of the old format would be
// misread (a field's meaning changed); added fields do not bump it.
inline constexpr uint32_t kPlanFormatVersion = 1;
// The plan's file name inside an export folder, and the FlatBuffers file identifier.
inline constexpr const char* kPlanFileName = "plan.emmyplan";
inline constexpr const char* kPlanIdentifier = "EMXP";

// Every error of loading or running an export: the message names the file or tensor and what is
// wrong with it.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct BufferInfo {
  std::string name;
  std::string role;   // input, weight, mask, causal_mask, output, intermediate, scratch
  std::string dtype;  // f32, f16, bf16, i32, i64, bool, f64, u8 (scratch)
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  int32_t value_id = -1;
};

// cuda (runtime/plan.fbs has the meaning of each field): a library step, a launch, a tensor map,
// a step library of the export folder.
struct LibraryStepInfo {
  std::string library, prefix, plan;
  std::vector<uint32_t> buffers;  // indices into PlanData::device_buffers
};
struct LaunchInfo {
  std::string symbol;  // empty for a library step
  std::vector<uint32_t> grid, block;
  uint32_t shared_bytes = 0;
  bool is_step = false;
  LibraryStepInfo step;
};
struct TensorMapInfo {
  uint32_t buffer = 0;  // index into PlanData::device_buffers
  std::string dtype;    // bf16, f16, f32
  uint32_t swizzle_bytes = 0;
  std::vector<uint64_t> dims, strides_bytes;
  std::vector<uint32_t> box;
};
struct StepLibraryInfo {
  std::string file, digest;
  uint32_t abi_version = 0;
};

struct KernelInfo {
  std::string name;
  std::string structural_key;
  std::string templ;
  std::string config;
  std::string symbol;
  std::vector<uint32_t> inputs, outputs;  // buffer indices
  double tuned_us = 0;
  // cuda launch data (unused by the cpu backend)
  std::string binary;
  std::vector<uint32_t> grid, block;
  uint32_t shared_bytes = 0;
  std::vector<LaunchInfo> launches;  // cuda: launches and library steps in order
};

struct PlanData {
  uint32_t format_version = kPlanFormatVersion;
  std::string backend, environment, emmy_version, source, graph_name, graph_key, run_id;
  int64_t created_unix = 0;
  std::string binary, binary_digest;
  std::vector<BufferInfo> buffers;
  std::vector<KernelInfo> kernels;  // launch order
  std::vector<uint32_t> inputs, outputs;
  std::string graph;  // the IR graph's FlatBuffers bytes (core/ir/graph.fbs)
  double tuned_total_us = 0;
  // cuda
  std::vector<uint32_t> device_buffers;  // the kernels' buffer table, as buffer indices
  std::vector<TensorMapInfo> tensor_maps;
  std::vector<StepLibraryInfo> step_libraries;
  std::string device, arch;
  // Every kernel of the cubin waits for its producers before reading (runtime/plan.fbs): a
  // launch right after another kernel's is made overlapping its tail.
  bool kernels_await_producers = false;
};

// Size in bytes of one element of an IR dtype name; 0 for a name that is none.
uint64_t dtype_size(std::string_view dtype);

// The file's bytes. Throws Error when the plan breaks a rule decode_plan checks.
std::string encode_plan(const PlanData& plan);
// Reads a plan file's bytes; `where` names the file in messages. Throws Error naming what is
// wrong: not a plan file (another identifier), another format version, damaged (FlatBuffers
// verifier, digest), or inconsistent (an index out of range, a size that is not dtype x shape).
PlanData decode_plan(std::string_view bytes, const std::string& where);

// Digest of bytes / of a file's content (64-bit FNV-1a, as 16 hex digits): ties the plan to its
// binaries. Not a security measure: it finds damage and mix-ups, not forgery.
std::string digest(std::string_view bytes);
std::string file_digest(const std::string& path);  // throws Error when unreadable

}  // namespace emmy::runtime
