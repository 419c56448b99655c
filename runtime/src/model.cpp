// Model: an export loaded (plan decoded, binaries checked against it, buffers allocated), its
// inputs bound by name, run by the backend's executor.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "emmy/runtime.hpp"
#include "executor.hpp"

namespace emmy::runtime {
namespace {

namespace fs = std::filesystem;

// 64-byte aligned, zeroed memory (a cache line: what the generated kernels' vector loads like).
struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using Memory = std::unique_ptr<void, AlignedFree>;
Memory allocate(uint64_t bytes) {
  const uint64_t rounded = ((bytes == 0 ? 1 : bytes) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw Error("cannot allocate " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, rounded);
  return Memory(p);
}

// A causal mask [.., L, S]: true where the key index (column) <= the query index (row), as the
// IR's causal_mask inputs mean (and the reference interpreter's random inputs hold).
void fill_causal_mask(const BufferInfo& b, void* data) {
  auto* out = static_cast<unsigned char*>(data);
  const int64_t rows = b.shape.size() >= 2 ? b.shape[b.shape.size() - 2] : 1;
  const int64_t cols = b.shape.empty() ? 1 : b.shape.back();
  const uint64_t plane = static_cast<uint64_t>(rows * cols);
  for (uint64_t i = 0; i < b.bytes; ++i) {
    const int64_t r = static_cast<int64_t>((i % plane) / static_cast<uint64_t>(cols));
    const int64_t c = static_cast<int64_t>(i % static_cast<uint64_t>(cols));
    out[i] = c <= r ? 1 : 0;
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot be read");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(path + ": read error");
  return bytes;
}

}  // namespace

struct Model::Impl {
  std::string folder;
  PlanData plan;
  std::vector<Memory> owned;   // per buffer; a graph input's made by its first bind (copy)
  std::vector<void*> buffers;  // what the kernels use: owned memory or a bound view
  std::vector<bool> bound;     // per graph input (index into plan.inputs)
  std::unique_ptr<Executor> executor;

  size_t input_index(std::string_view name) const {
    for (size_t i = 0; i < plan.inputs.size(); ++i)
      if (plan.buffers[plan.inputs[i]].name == name) return i;
    std::string names;
    for (uint32_t b : plan.inputs) names += (names.empty() ? "" : ", ") + plan.buffers[b].name;
    throw Error("the export has no input named '" + std::string(name) + "' (its inputs: " + names +
                ")");
  }
  const BufferInfo& checked(size_t input, size_t bytes) const {
    const BufferInfo& b = plan.buffers[plan.inputs[input]];
    if (bytes != b.bytes)
      throw Error("input '" + b.name + "' is " + b.dtype + " of " + std::to_string(b.bytes) +
                  " bytes; " + std::to_string(bytes) + " bytes were given");
    return b;
  }
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model Model::load(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  std::error_code ec;
  fs::path plan_path = path;
  if (fs::is_directory(plan_path, ec)) plan_path /= kPlanFileName;
  if (!fs::exists(plan_path, ec))
    throw Error(plan_path.string() + ": no such file (an export is the folder emmy export writes)");
  impl->folder = plan_path.parent_path().string();
  if (impl->folder.empty()) impl->folder = ".";
  impl->plan = decode_plan(read_file(plan_path.string()), plan_path.string());
  PlanData& plan = impl->plan;

  if (plan.backend != "cpu" && plan.backend != "cuda")
    throw Error(plan_path.string() + ": an export for the " + plan.backend +
                " backend, which this runtime cannot run (it runs cpu and cuda exports)");
  const bool cuda = plan.backend == "cuda";
  // cuda: a program of library steps alone has no cubin.
  if (!(cuda && plan.binary.empty())) {
    if (plan.binary.empty() || plan.binary.find('/') != std::string::npos)
      throw Error(plan_path.string() + ": the plan names no kernel binary inside its folder ('" +
                  plan.binary + "')");
    const std::string binary = impl->folder + "/" + plan.binary;
    if (std::string got = file_digest(binary); got != plan.binary_digest)
      throw Error(binary + ": is not the " + (cuda ? "cubin" : "library") +
                  " this plan was exported with (digest " + got + ", the plan says " +
                  plan.binary_digest + ")");
  }
  for (const StepLibraryInfo& lib : plan.step_libraries) {
    const std::string path = impl->folder + "/" + lib.file;
    std::error_code ec;
    if (!fs::exists(path, ec))
      throw Error(path + ": the library step library the plan names is missing");
    if (std::string got = file_digest(path); got != lib.digest)
      throw Error(path + ": is not the step library this plan was exported with (digest " + got +
                  ", the plan says " + lib.digest + ")");
  }

  // cuda: host memory for the graph's outputs only (what run() copies them into); the rest lives
  // on the device. A graph input's host memory is made when a copy is first bound into it
  // (Model::bind on cpu), never at load: a model's weights are bound as views (or on the
  // device), and allocating and zeroing them here made loading the 28-layer Qwen3 2.8 s (1.2 GB
  // of bf16 weights). The causal mask, filled here, is the exception.
  std::vector<bool> host(plan.buffers.size(), !cuda);
  for (uint32_t b : plan.inputs) host[b] = false;
  for (uint32_t b : plan.outputs) host[b] = true;
  for (uint32_t b : plan.inputs)
    if (plan.buffers[b].role == "causal_mask" && plan.buffers[b].dtype == "bool") host[b] = true;
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    impl->owned.push_back(host[b] ? allocate(plan.buffers[b].bytes) : Memory());
    impl->buffers.push_back(impl->owned.back().get());
  }
  impl->bound.assign(plan.inputs.size(), false);
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const BufferInfo& b = plan.buffers[plan.inputs[i]];
    if (b.role == "causal_mask" && b.dtype == "bool") {
      fill_causal_mask(b, impl->buffers[plan.inputs[i]]);
      impl->bound[i] = true;
    }
  }
  if (cuda) {
    impl->executor = make_cuda_executor(plan, impl->folder);
    for (size_t i = 0; i < plan.inputs.size(); ++i)
      if (impl->bound[i])
        impl->executor->upload(plan.inputs[i], impl->buffers[plan.inputs[i]],
                               plan.buffers[plan.inputs[i]].bytes);
    return Model(std::move(impl));
  }
  impl->executor = make_cpu_executor(plan, impl->folder);
  return Model(std::move(impl));
}

const PlanData& Model::plan() const {
  return impl_->plan;
}

std::vector<BufferInfo> Model::inputs() const {
  std::vector<BufferInfo> out;
  for (uint32_t b : impl_->plan.inputs) out.push_back(impl_->plan.buffers[b]);
  return out;
}

std::vector<BufferInfo> Model::outputs() const {
  std::vector<BufferInfo> out;
  for (uint32_t b : impl_->plan.outputs) out.push_back(impl_->plan.buffers[b]);
  return out;
}

void Model::bind(std::string_view name, const void* data, size_t bytes) {
  const size_t i = impl_->input_index(name);
  impl_->checked(i, bytes);
  const uint32_t b = impl_->plan.inputs[i];
  if (impl_->executor->on_device()) {
    impl_->executor->upload(b, data, bytes);  // straight to the device, no host copy kept
  } else {
    if (!impl_->owned[b]) impl_->owned[b] = allocate(bytes);  // its first copy (see load)
    impl_->buffers[b] = impl_->owned[b].get();                // back to its own if it was a view
    if (bytes) std::memcpy(impl_->buffers[b], data, bytes);
  }
  impl_->bound[i] = true;
}

void Model::bind_view(std::string_view name, const void* data, size_t bytes) {
  const size_t i = impl_->input_index(name);
  impl_->checked(i, bytes);
  if (!data) throw Error("input '" + std::string(name) + "': bind_view got a null pointer");
  // A device cannot use host memory in place: on cuda a view is a copy (bind_device is the
  // in-place way there).
  if (impl_->executor->on_device()) return bind(name, data, bytes);
  // Kernels take inputs as const void* const*: a viewed input is only ever read.
  impl_->buffers[impl_->plan.inputs[i]] = const_cast<void*>(data);
  impl_->bound[i] = true;
}

void Model::bind_device(std::string_view name, uint64_t device_pointer, size_t bytes) {
  const size_t i = impl_->input_index(name);
  impl_->checked(i, bytes);
  if (!device_pointer)
    throw Error("input '" + std::string(name) + "': bind_device got a null pointer");
  impl_->executor->bind_device(impl_->plan.inputs[i], device_pointer);
  impl_->bound[i] = true;
}

uint64_t Model::device_pointer(std::string_view name) const {
  for (const auto* list : {&impl_->plan.inputs, &impl_->plan.outputs})
    for (uint32_t b : *list)
      if (impl_->plan.buffers[b].name == name) return impl_->executor->device_pointer(b);
  throw Error("the export has no input or output named '" + std::string(name) + "'");
}

std::vector<std::string> Model::unbound() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < impl_->bound.size(); ++i)
    if (!impl_->bound[i]) out.push_back(impl_->plan.buffers[impl_->plan.inputs[i]].name);
  return out;
}

void Model::run() {
  run_checked(true);
}

void Model::run_on_device() {
  run_checked(false);
}

void Model::enqueue(uint64_t stream) {
  check_bound("enqueue");
  impl_->executor->enqueue(stream);
}

void Model::check_bound(const char* what) const {
  if (auto missing = unbound(); !missing.empty()) {
    std::string names;
    for (const auto& n : missing) names += (names.empty() ? "" : ", ") + n;
    throw Error(std::string(what) + ": " + std::to_string(missing.size()) +
                " input(s) not bound: " + names);
  }
}

void Model::run_checked(bool copy_outputs) {
  check_bound("run");
  impl_->executor->run(impl_->buffers, copy_outputs);
}

const void* Model::output(size_t index) const {
  if (index >= impl_->plan.outputs.size())
    throw Error("output " + std::to_string(index) + ": the export has " +
                std::to_string(impl_->plan.outputs.size()) + " outputs");
  return impl_->buffers[impl_->plan.outputs[index]];
}

const void* Model::output(std::string_view name) const {
  for (size_t i = 0; i < impl_->plan.outputs.size(); ++i)
    if (impl_->plan.buffers[impl_->plan.outputs[i]].name == name) return output(i);
  throw Error("the export has no output named '" + std::string(name) + "'");
}

}  // namespace emmy::runtime
