#include "nvrtc_compiler.hpp"

#include <nvrtc.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "emmy/status.hpp"

namespace emmy::cuda {

namespace fs = std::filesystem;

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string content_hash(const std::string& text) {
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  for (unsigned char c : text) {
    h1 = (h1 ^ c) * 0x100000001b3ull;
    h2 = (h2 ^ (c + 0x5bu)) * 0x100000001b3ull;
    h2 ^= h2 >> 29;
  }
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h1), static_cast<unsigned long long>(h2));
  return buf;
}

namespace {

// Write to a private temporary name, then rename: concurrent builds of one key stay whole.
void write_whole(const fs::path& path, const std::string& bytes) {
  static std::atomic<unsigned> counter{0};
  std::ostringstream tmp_name;
  tmp_name << path.string() << ".tmp." << ::getpid() << "." << std::this_thread::get_id() << "." << counter++;
  {
    std::ofstream f(tmp_name.str(), std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) throw Error("cuda backend: cannot write " + tmp_name.str());
  }
  fs::rename(tmp_name.str(), path);
}

}  // namespace

NvrtcCompiler::NvrtcCompiler(std::string cache_dir, std::string arch)
    : cache_dir_(std::move(cache_dir)), arch_(std::move(arch)) {}

std::vector<std::string> NvrtcCompiler::options(Regime regime) const {
  return {"--gpu-architecture=" + arch_, "--std=c++17", "-default-device",
          regime == Regime::rank ? "-Xptxas=-O1" : "-Xptxas=-O3"};
}

CompileOutcome NvrtcCompiler::compile(const std::string& source, Regime regime) const {
  CompileOutcome out;
  std::vector<std::string> opts = options(regime);
  std::string key_text = "nvrtc " + nvrtc_version() + "\n";
  for (const auto& o : opts) key_text += o + "\n";
  key_text += source;
  fs::create_directories(cache_dir_);
  fs::path cubin = fs::path(cache_dir_) / (content_hash(key_text) + ".cubin");
  out.cubin_path = cubin.string();
  std::error_code ec;
  if (fs::exists(cubin, ec) && fs::file_size(cubin, ec) > 0) {
    out.ok = true;
    out.cached = true;
    return out;
  }
  nvrtcProgram prog = nullptr;
  if (nvrtcCreateProgram(&prog, source.c_str(), "emmy_kernel.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS)
    throw Error("cuda backend: nvrtcCreateProgram failed");
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  nvrtcResult r = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
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
  write_whole(fs::path(cubin).replace_extension(".cu"), traced);
  write_whole(cubin, bytes);
  out.ok = true;
  return out;
}

}  // namespace emmy::cuda
