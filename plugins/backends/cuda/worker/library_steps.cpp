// Library steps in the worker (library_steps.hpp): the C ABI of emmy/cuda_step.h, resolved by
// dlsym.
#include "library_steps.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <memory>

namespace emmy::cuda {

namespace {

// Room for a library's message; longer ones are cut.
constexpr size_t kMessageBytes = 4096;

std::runtime_error unavailable(const std::string& library, const std::string& why) {
  return std::runtime_error("library step unavailable: " + library + ": " + why);
}

}  // namespace

const LibrarySteps::Functions& LibrarySteps::functions(const std::string& library,
                                                       const std::string& prefix) {
  // One worker thread makes every request: no lock. Libraries and their functions stay for the
  // life of the process (a plugin's library state, e.g. its cuBLASLt handle, with them).
  static std::map<std::pair<std::string, std::string>, Functions> loaded;
  auto key = std::make_pair(library, prefix);
  if (auto it = loaded.find(key); it != loaded.end()) return it->second;
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = ::dlerror();
    throw unavailable(library, e ? e : "does not load");
  }
  auto find = [&](const char* what) {
    const std::string name = prefix + "_" + what;
    void* f = ::dlsym(lib, name.c_str());
    if (!f)
      throw unavailable(library, "it exports no " + name + " (emmy_add_plugin(... EXPORTS ...))");
    return f;
  };
  auto abi = reinterpret_cast<EmmyCudaStepAbiVersionFn>(find("abi_version"));
  if (abi() != EMMY_CUDA_STEP_ABI_VERSION)
    throw unavailable(library, "it was built for library step ABI " + std::to_string(abi()) +
                                   ", the worker speaks " +
                                   std::to_string(EMMY_CUDA_STEP_ABI_VERSION));
  Functions fn;
  fn.prepare = reinterpret_cast<EmmyCudaStepPrepareFn>(find("prepare"));
  fn.workspace_bytes = reinterpret_cast<EmmyCudaStepWorkspaceBytesFn>(find("workspace_bytes"));
  fn.run = reinterpret_cast<EmmyCudaStepRunFn>(find("run"));
  fn.release = reinterpret_cast<EmmyCudaStepReleaseFn>(find("release"));
  // Optional: a library that does not describe its steps is no less usable.
  fn.describe =
      reinterpret_cast<EmmyCudaStepDescribeFn>(::dlsym(lib, (prefix + "_describe").c_str()));
  return loaded.emplace(key, fn).first->second;
}

LibrarySteps::~LibrarySteps() {
  for (Step& s : steps_)
    if (s.handle) s.fn->release(s.handle);
}

size_t LibrarySteps::prepare(const std::string& library, const std::string& prefix,
                             const std::string& plan, const std::vector<int64_t>& buffers) {
  const Functions& fn = functions(library, prefix);
  int status = EMMY_CUDA_STEP_FAILED;
  std::string message(kMessageBytes, '\0');
  void* handle =
      fn.prepare(plan.data(), plan.size(), buffers.size(), &status, message.data(), message.size());
  message.resize(std::min(message.find('\0'), message.size()));
  if (!handle || status != EMMY_CUDA_STEP_OK) {
    if (handle) fn.release(handle);  // a library that says no and still hands out a step
    if (message.empty()) message = prefix + "_prepare gave no reason";
    if (status == EMMY_CUDA_STEP_REFUSED) throw StepRefused(message);
    throw std::runtime_error(message);
  }
  steps_.push_back(Step{&fn, handle, buffers, fn.workspace_bytes(handle)});
  return steps_.size() - 1;
}

uint64_t LibrarySteps::workspace_bytes() const {
  uint64_t most = 0;
  for (const Step& s : steps_) most = std::max(most, s.workspace);
  return most;
}

std::string LibrarySteps::describe(size_t step) const {
  const Step& s = steps_.at(step);
  if (!s.fn->describe) return "";
  // Its first line and the variants' (emmy/cuda_step.h): a few kilobytes; asked again with room
  // for the whole where the library says it is longer.
  std::string text(kMessageBytes, '\0');
  size_t length = s.fn->describe(s.handle, text.data(), text.size());
  if (length >= text.size()) {
    text.assign(length + 1, '\0');
    length = s.fn->describe(s.handle, text.data(), text.size());
  }
  text.resize(std::min({text.find('\0'), text.size(), length}));
  return text;
}

void LibrarySteps::run(size_t step, const std::vector<CUdeviceptr>& buffers, CUdeviceptr workspace,
                       CUstream stream) {
  const Step& s = steps_.at(step);
  std::vector<uint64_t> mine;
  for (int64_t b : s.buffers) {
    if (b < 0 || size_t(b) >= buffers.size())
      throw std::runtime_error("a library step names buffer " + std::to_string(b) +
                               "; the request has " + std::to_string(buffers.size()));
    mine.push_back(uint64_t(buffers[size_t(b)]));
  }
  std::string message(kMessageBytes, '\0');
  // CUstream is a pointer (struct CUstream_st*): passed as the C ABI's void*.
  int status = s.fn->run(s.handle, mine.data(), mine.size(), s.workspace ? uint64_t(workspace) : 0,
                         static_cast<void*>(stream), message.data(), message.size());
  if (status != EMMY_CUDA_STEP_OK) {
    message.resize(std::min(message.find('\0'), message.size()));
    throw std::runtime_error(message.empty() ? "a library step failed without a message" : message);
  }
}

}  // namespace emmy::cuda
