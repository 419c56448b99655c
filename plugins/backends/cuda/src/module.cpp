#include "module.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include "emmy/status.hpp"
#include "expr.hpp"

namespace emmy::cuda {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

int64_t resident_blocks(int64_t shared_bytes, int64_t work) {
  const int64_t per_sm = std::clamp<int64_t>(kSharedBytesPerSm / (shared_bytes + 1024), 1, 2);
  return std::min<int64_t>(work, per_sm * kSms);
}

std::string replace_all(std::string text, const std::string& key, const std::string& value) {
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

namespace {

// The dtypes a tensor map is encoded for (the worker maps the same names to CUtensorMapDataType).
bool tensor_map_dtype(const std::string& name, ir::DType& out) {
  for (ir::DType d : {ir::DType::bf16, ir::DType::f16, ir::DType::f32})
    if (ir::to_string(d) == name) {
      out = d;
      return true;
    }
  return false;
}

std::string render_step(const LibraryStep& step, int64_t group) {
  std::string s = "//@emmy step " + std::to_string(group) + " " + step.library + " " + step.prefix +
                  " " + std::to_string(step.buffers.size());
  for (int64_t b : step.buffers) s += " " + std::to_string(b);
  return s + " : " + step.plan + "\n";
}

// Why a step cannot be a plan line ("" when it can): the line is split at blanks up to " : ".
std::string step_problem(const LibraryStep& step) {
  auto blank = [](const std::string& t) { return t.find_first_of(" \t\r\n") != std::string::npos; };
  if (step.library.empty() || blank(step.library))
    return "library path '" + step.library + "' is empty or has blanks";
  if (step.prefix.empty() ||
      step.prefix.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != std::string::npos ||
      (step.prefix[0] >= '0' && step.prefix[0] <= '9'))
    return "prefix '" + step.prefix + "' is not a C identifier";
  if (step.plan.empty() || step.plan.find_first_of("\r\n") != std::string::npos)
    return "the plan is empty or not one line";
  for (int64_t b : step.buffers)
    if (b < 0) return "a negative buffer";
  return "";
}

// Reads "GROUP LIBRARY PREFIX N BUFFER... : PLAN" after "//@emmy step".
Launch parse_step(std::istringstream& f, const std::string& line) {
  auto bad = [&](const std::string& why) {
    return Error("cuda backend: bad plan line '" + line + "': " + why);
  };
  Launch l;
  LibraryStep step;
  int64_t n = -1;
  std::string colon;
  f >> l.group >> step.library >> step.prefix >> n;
  if (!f || l.group < 0 || n < 0) throw bad("not GROUP LIBRARY PREFIX N BUFFER... : PLAN");
  step.buffers.resize(size_t(n));
  for (int64_t& b : step.buffers) f >> b;
  f >> colon;
  if (!f || colon != ":")
    throw bad("not " + std::to_string(n) + " buffers, then ' : ' and the plan");
  std::getline(f, step.plan);
  step.plan.erase(0, step.plan.find_first_not_of(' '));
  if (std::string why = step_problem(step); !why.empty()) throw bad(why);
  l.kernel = step.prefix;
  l.step = std::move(step);
  return l;
}

}  // namespace

std::string render_plan(const Plan& plan) {
  std::string s = plan.awaits_producers ? "//@emmy awaits_producers\n" : "";
  for (int64_t b : plan.scratch_bytes) s += "//@emmy scratch " + std::to_string(b) + "\n";
  for (const TensorMap& t : plan.tensor_maps) {
    s += "//@emmy tmap " + std::to_string(t.buffer) + " " + std::string(ir::to_string(t.dtype)) +
         " " + std::to_string(t.swizzle_bytes) + " " + std::to_string(t.dims.size());
    for (const auto* list : {&t.dims, &t.strides_bytes, &t.box})
      for (int64_t v : *list) s += " " + std::to_string(v);
    s += "\n";
  }
  for (const Launch& l : plan.launches)
    if (l.is_library())
      s += render_step(*l.step, l.group);
    else
      s += "//@emmy launch " + l.kernel + " " + std::to_string(l.grid[0]) + " " +
           std::to_string(l.grid[1]) + " " + std::to_string(l.grid[2]) + " " +
           std::to_string(l.block) + " " + std::to_string(l.shared_bytes) +
           (l.group ? " " + std::to_string(l.group) : std::string()) + "\n";
  return s;
}

Plan parse_plan(const std::string& source) {
  Plan plan;
  std::istringstream in(source);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("//@emmy ", 0) != 0) continue;
    std::istringstream f(line.substr(8));
    std::string what;
    f >> what;
    if (what == "awaits_producers") {
      plan.awaits_producers = true;
    } else if (what == "scratch") {
      int64_t b = -1;
      f >> b;
      if (!f || b < 0) throw Error("cuda backend: bad plan line '" + line + "'");
      plan.scratch_bytes.push_back(b);
    } else if (what == "launch") {
      Launch l;
      f >> l.kernel >> l.grid[0] >> l.grid[1] >> l.grid[2] >> l.block >> l.shared_bytes;
      bool ok = bool(f);
      std::string group;
      if (ok && (f >> group)) {  // optional: the kernel of a program
        size_t used = 0;
        try {
          l.group = std::stoll(group, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        ok = used == group.size();
      }
      if (!ok || l.group < 0 || l.block <= 0 || l.grid[0] <= 0 || l.grid[1] <= 0 || l.grid[2] <= 0)
        throw Error("cuda backend: bad plan line '" + line + "'");
      plan.launches.push_back(l);
    } else if (what == "step") {
      plan.launches.push_back(parse_step(f, line));
    } else if (what == "tmap") {
      TensorMap t;
      std::string dtype;
      int64_t rank = 0;
      f >> t.buffer >> dtype >> t.swizzle_bytes >> rank;
      bool ok = f && t.buffer >= 0 && tensor_map_dtype(dtype, t.dtype) && rank >= 1 && rank <= 5 &&
                (t.swizzle_bytes == 0 || t.swizzle_bytes == 32 || t.swizzle_bytes == 64 ||
                 t.swizzle_bytes == 128);
      auto read = [&](std::vector<int64_t>& list, int64_t n) {
        list.resize(size_t(std::max<int64_t>(n, 0)));
        for (int64_t& v : list) f >> v;
        for (int64_t v : list) ok = ok && v > 0;
      };
      if (ok) {
        read(t.dims, rank);
        read(t.strides_bytes, rank - 1);
        read(t.box, rank);
      }
      if (!ok || !f) throw Error("cuda backend: bad plan line '" + line + "'");
      plan.tensor_maps.push_back(t);
    }
  }
  if (plan.launches.empty())
    throw Error("cuda backend: the source has no '//@emmy launch' or '//@emmy step' line");
  return plan;
}

ModuleBuilder::ModuleBuilder(const ir::Graph& g) : g_(g) {
  for (ir::ValueId v : g.inputs())
    pointers_.push_back({input_name(pointers_.size()), g.type(v).dtype});
  size_t k = 0;
  for (ir::ValueId v : g.outputs) pointers_.push_back({output_name(k++), g.type(v).dtype});
}

std::string ModuleBuilder::add_scratch(ir::DType dtype, int64_t count) {
  if (!plan_.tensor_maps.empty())
    throw Error(
        "cuda backend: scratch added after a tensor map (the maps' pointer follows the buffers)");
  std::string name = "scr" + std::to_string(plan_.scratch_bytes.size());
  plan_.scratch_bytes.push_back(std::max<int64_t>(1, count) * ir::size_of(dtype));
  pointers_.push_back({name, dtype});
  return name;
}

std::string ModuleBuilder::add_tensor_map(const std::string& pointer, std::vector<int64_t> dims,
                                          std::vector<int64_t> strides_bytes,
                                          std::vector<int64_t> box, int64_t swizzle_bytes) {
  TensorMap t;
  t.buffer = -1;
  for (size_t i = 0; i < pointers_.size(); ++i)
    if (pointers_[i].first == pointer) {
      t.buffer = int64_t(i);
      t.dtype = pointers_[i].second;
    }
  if (t.buffer < 0)
    throw Error("cuda backend: a tensor map over '" + pointer +
                "', which is no buffer of the module");
  t.dims = std::move(dims);
  t.strides_bytes = std::move(strides_bytes);
  t.box = std::move(box);
  t.swizzle_bytes = swizzle_bytes;
  plan_.tensor_maps.push_back(std::move(t));
  return "(emmy_tmaps + " + std::to_string((plan_.tensor_maps.size() - 1) * 128) + "ull)";
}

void ModuleBuilder::add_kernel(const std::string& name, const int64_t grid[3], int64_t block,
                               const std::string& body, int64_t shared_bytes,
                               const std::string& attributes) {
  Launch l;
  l.kernel = name;
  for (int i = 0; i < 3; ++i) l.grid[i] = grid[i];
  l.block = block;
  l.shared_bytes = shared_bytes;
  plan_.launches.push_back(l);
  plan_.awaits_producers = true;  // the first statement below
  std::string k = "extern \"C\" __global__ void " + (attributes.empty() ? "" : attributes + " ") +
                  "__launch_bounds__(" + std::to_string(block) + ") " + name +
                  "(void* const* __restrict__ emmy_buf) {\n";
  size_t n_in = g_.inputs().size();
  for (size_t i = 0; i < pointers_.size(); ++i) {
    const auto& [ptr, dtype] = pointers_[i];
    bool is_input = i < n_in;
    k += "  " + std::string(is_input ? "const " : "") + storage_type(dtype) + "* __restrict__ " +
         ptr + " = (" + (is_input ? "const " : "") + storage_type(dtype) + "*)emmy_buf[" +
         std::to_string(i) + "];\n";
    // Pointers read from the table are generic as far as the compiler knows, and an access
    // through a generic pointer is a generic LD/ST (an address-space check per access, no
    // non-coherent path); every buffer is device global memory, and saying so gives LDG/STG.
    k += "  __builtin_assume(__isGlobal(" + ptr + "));\n";
  }
  if (!plan_.tensor_maps.empty())
    k += "  const unsigned long long emmy_tmaps = (unsigned long long)emmy_buf[" +
         std::to_string(pointers_.size()) + "];\n";
  // Before the body reads anything a previous kernel wrote (Plan::awaits_producers).
  k += "  emmy_await_producers();\n" + body + "}\n\n";
  kernels_ += k;
}

void ModuleBuilder::add_library_step(const LibraryStep& step) {
  if (std::string why = step_problem(step); !why.empty())
    throw Error("cuda backend: library step: " + why);
  for (int64_t b : step.buffers)
    if (b >= int64_t(pointers_.size()))
      throw Error("cuda backend: library step names buffer " + std::to_string(b) +
                  "; the module has " + std::to_string(pointers_.size()));
  Launch l;
  l.kernel = step.prefix;
  l.step = step;
  plan_.launches.push_back(l);
}

std::string ModuleBuilder::finish(const std::string& note) const {
  std::string s = device_prelude();
  if (!note.empty()) s += "// " + note + "\n";
  s += render_plan(plan_) + "\n" + kernels_;
  return s;
}

}  // namespace emmy::cuda
