#include "nvrtc_compiler.hpp"

#include <nvrtc.h>

#include <atomic>
#include <filesystem>

#include "emmy/status.hpp"

namespace emmy::cuda {

namespace fs = std::filesystem;

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

NvrtcCompiler::NvrtcCompiler(std::string cache_dir, std::string arch)
    : cache_(std::move(cache_dir)), arch_(std::move(arch)) {}

std::vector<std::string> NvrtcCompiler::options(Regime regime) const {
  return {"--gpu-architecture=" + arch_, "--std=c++17", "-default-device",
          regime == Regime::rank ? "-Xptxas=-O1" : "-Xptxas=-O3"};
}

namespace {
// Whether this NVRTC takes --split-compile: unknown (-1) until a program's compile says so; an
// NVRTC without it answers NVRTC_ERROR_INVALID_OPTION once, and programs compile serially after.
std::atomic<int> g_split_compile{-1};
}  // namespace

bool nvrtc_compiles_programs_split() {
  return g_split_compile.load() == 1;
}

CompileOutcome NvrtcCompiler::compile(const std::string& source, Regime regime, int kernels) const {
  CompileOutcome out;
  std::vector<std::string> opts = options(regime);
  std::string key_text = "nvrtc " + nvrtc_version() + "\n";
  for (const auto& o : opts) key_text += o + "\n";
  key_text += source;
  fs::create_directories(cache_.dir());
  const std::string key = backend_support::content_hash(key_text, backend_support::kCudaHash);
  const fs::path cubin = cache_.entry(key, ".cubin");
  out.cubin_path = cubin.string();
  if (cache_.has(key, ".cubin")) {
    out.ok = true;
    out.cached = true;
    return out;
  }
  nvrtcProgram prog = nullptr;
  auto create = [&] {
    if (nvrtcCreateProgram(&prog, source.c_str(), "emmy_kernel.cu", 0, nullptr, nullptr) !=
        NVRTC_SUCCESS)
      throw Error("cuda backend: nvrtcCreateProgram failed");
  };
  create();
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  nvrtcResult r = NVRTC_ERROR_INVALID_OPTION;
  if (kernels > 1 && g_split_compile.load() != 0) {
    std::vector<const char*> split = argv;
    split.push_back("--split-compile=0");  // 0: as many threads as the machine has
    r = nvrtcCompileProgram(prog, static_cast<int>(split.size()), split.data());
    if (r == NVRTC_ERROR_INVALID_OPTION) {
      g_split_compile.store(0);
      nvrtcDestroyProgram(&prog);
      create();  // a program is compiled once
    } else {
      g_split_compile.store(1);
    }
  }
  if (r == NVRTC_ERROR_INVALID_OPTION)
    r = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  if (log_size > 1) {
    out.log.resize(log_size);
    nvrtcGetProgramLog(prog, out.log.data());
    out.log.resize(log_size - 1);
  }
  if (r != NVRTC_SUCCESS) {
    out.log = std::string("nvrtc: ") + nvrtcGetErrorString(r) + "\n" + out.log;
    nvrtcDestroyProgram(&prog);
    return out;
  }
  size_t size = 0;
  nvrtcGetCUBINSize(prog, &size);
  std::string bytes(size, '\0');
  nvrtcGetCUBIN(prog, bytes.data());
  nvrtcDestroyProgram(&prog);
  // The source goes beside the cubin as <hash>.cu (first, so every cached cubin has one): it
  // traces a cubin back to its template and knobs (bench/qwen_layer/sass_summary.py). Its first
  // line names the NVRTC version and options, the rest of the hash key.
  std::string traced = "// emmy nvrtc " + nvrtc_version();
  for (const auto& o : opts) traced += " " + o;
  traced += "\n" + source;
  backend_support::CompileCache::write_whole(cache_.entry(key, ".cu"), traced, "cuda backend");
  backend_support::CompileCache::write_whole(cubin, bytes, "cuda backend");
  out.ok = true;
  return out;
}

}  // namespace emmy::cuda
