#include "export/cuda_plan.hpp"

#include <filesystem>
#include <sstream>

#include "emmy/status.hpp"

namespace emmy::exporter {
namespace {

struct LineError {
  const std::string& line;
  Error operator()(const std::string& why) const {
    return Error("the cuda program's plan line '" + line + "' " + why);
  }
};

template <typename T>
std::vector<T> read_list(std::istringstream& f, int64_t n, const LineError& bad) {
  std::vector<T> out;
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = -1;
    f >> v;
    if (!f || v < 0) throw bad("does not read (" + std::to_string(n) + " values expected)");
    out.push_back(static_cast<T>(v));
  }
  return out;
}

}  // namespace

std::vector<std::string> add_cuda_plan(runtime::PlanData& data, const std::string& source) {
  std::vector<std::string> libraries;  // paths, in first-use order
  data.device_buffers.clear();
  data.device_buffers.insert(data.device_buffers.end(), data.inputs.begin(), data.inputs.end());
  data.device_buffers.insert(data.device_buffers.end(), data.outputs.begin(), data.outputs.end());
  std::istringstream in(source);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("//@emmy ", 0) != 0) continue;
    const LineError bad{line};
    std::istringstream f(line.substr(8));
    std::string what;
    f >> what;
    if (what == "awaits_producers") {
      data.kernels_await_producers = true;
    } else if (what == "export") {
      std::string key, value;
      f >> key;
      std::getline(f, value);
      value.erase(0, value.find_first_not_of(' '));
      if (key == "arch") data.arch = value;
      if (key == "device") data.device = value;
    } else if (what == "scratch") {
      const uint64_t bytes = read_list<uint64_t>(f, 1, bad)[0];
      runtime::BufferInfo b;
      b.name = "scratch" + std::to_string(data.device_buffers.size() - data.inputs.size() -
                                          data.outputs.size());
      b.role = "scratch";
      b.dtype = "u8";
      b.shape = {static_cast<int64_t>(bytes)};
      b.bytes = bytes;
      data.buffers.push_back(b);
      data.device_buffers.push_back(static_cast<uint32_t>(data.buffers.size() - 1));
    } else if (what == "tmap") {
      runtime::TensorMapInfo t;
      int64_t buffer = -1, swizzle = -1, rank = 0;
      f >> buffer >> t.dtype >> swizzle >> rank;
      if (!f || buffer < 0 || swizzle < 0 || rank < 1 || rank > 5) throw bad("does not read");
      t.buffer = static_cast<uint32_t>(buffer);
      t.swizzle_bytes = static_cast<uint32_t>(swizzle);
      t.dims = read_list<uint64_t>(f, rank, bad);
      t.strides_bytes = read_list<uint64_t>(f, rank - 1, bad);
      t.box = read_list<uint32_t>(f, rank, bad);
      data.tensor_maps.push_back(t);
    } else if (what == "launch" || what == "step") {
      runtime::LaunchInfo l;
      int64_t group = 0;
      if (what == "launch") {
        int64_t block = 0, smem = -1;
        f >> l.symbol;
        l.grid = read_list<uint32_t>(f, 3, bad);
        f >> block >> smem;
        if (!f || block <= 0 || smem < 0) throw bad("does not read");
        if (!(f >> group)) group = 0;  // optional: the kernel of a program
        l.block = {static_cast<uint32_t>(block), 1, 1};
        l.shared_bytes = static_cast<uint32_t>(smem);
      } else {
        std::string path, colon;
        int64_t n = -1;
        f >> group >> path >> l.step.prefix >> n;
        if (!f || n < 0) throw bad("does not read");
        l.step.buffers = read_list<uint32_t>(f, n, bad);
        f >> colon;
        if (colon != ":") throw bad("has no ' : ' before the step's plan");
        std::getline(f, l.step.plan);
        l.step.plan.erase(0, l.step.plan.find_first_not_of(' '));
        l.is_step = true;
        l.step.library = std::filesystem::path(path).filename().string();
        bool known = false;
        for (const std::string& p : libraries) {
          if (std::filesystem::path(p).filename() != l.step.library) continue;
          if (p != path)
            throw bad("names library " + path + ", and another line " + p +
                      ", of the same file name");
          known = true;
        }
        if (!known) libraries.push_back(path);
      }
      if (group < 0 || static_cast<size_t>(group) >= data.kernels.size())
        throw bad("is of kernel " + std::to_string(group) + "; the program has " +
                  std::to_string(data.kernels.size()));
      runtime::KernelInfo& k = data.kernels[static_cast<size_t>(group)];
      if (k.launches.empty()) k.symbol = l.is_step ? l.step.prefix : l.symbol;
      k.launches.push_back(l);
    }
  }
  for (const runtime::TensorMapInfo& t : data.tensor_maps)
    if (t.buffer >= data.device_buffers.size())
      throw Error("the cuda program has a tensor map over buffer " + std::to_string(t.buffer) +
                  " of " + std::to_string(data.device_buffers.size()));
  return libraries;
}

}  // namespace emmy::exporter
