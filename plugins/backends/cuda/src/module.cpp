#include "module.hpp"

#include <sstream>

#include "emmy/status.hpp"
#include "expr.hpp"

namespace emmy::cuda {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string render_plan(const Plan& plan) {
  std::string s;
  for (int64_t b : plan.scratch_bytes) s += "//@emmy scratch " + std::to_string(b) + "\n";
  for (const Launch& l : plan.launches)
    s += "//@emmy launch " + l.kernel + " " + std::to_string(l.grid[0]) + " " + std::to_string(l.grid[1]) + " " +
         std::to_string(l.grid[2]) + " " + std::to_string(l.block) + " " + std::to_string(l.shared_bytes) + "\n";
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
    if (what == "scratch") {
      int64_t b = -1;
      f >> b;
      if (!f || b < 0) throw Error("cuda backend: bad plan line '" + line + "'");
      plan.scratch_bytes.push_back(b);
    } else if (what == "launch") {
      Launch l;
      f >> l.kernel >> l.grid[0] >> l.grid[1] >> l.grid[2] >> l.block >> l.shared_bytes;
      if (!f || l.block <= 0 || l.grid[0] <= 0 || l.grid[1] <= 0 || l.grid[2] <= 0)
        throw Error("cuda backend: bad plan line '" + line + "'");
      plan.launches.push_back(l);
    }
  }
  if (plan.launches.empty()) throw Error("cuda backend: the source has no '//@emmy launch' line");
  return plan;
}

ModuleBuilder::ModuleBuilder(const ir::Graph& g) : g_(g) {
  for (ir::ValueId v : g.inputs()) pointers_.push_back({input_name(pointers_.size()), g.type(v).dtype});
  size_t k = 0;
  for (ir::ValueId v : g.outputs) pointers_.push_back({output_name(k++), g.type(v).dtype});
}

std::string ModuleBuilder::add_scratch(ir::DType dtype, int64_t count) {
  std::string name = "scr" + std::to_string(plan_.scratch_bytes.size());
  plan_.scratch_bytes.push_back(std::max<int64_t>(1, count) * ir::size_of(dtype));
  pointers_.push_back({name, dtype});
  return name;
}

void ModuleBuilder::add_kernel(const std::string& name, const int64_t grid[3], int64_t block, const std::string& body,
                               int64_t shared_bytes) {
  Launch l;
  l.kernel = name;
  for (int i = 0; i < 3; ++i) l.grid[i] = grid[i];
  l.block = block;
  l.shared_bytes = shared_bytes;
  plan_.launches.push_back(l);
  std::string k = "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(block) + ") " + name +
                  "(void* const* __restrict__ emmy_buf) {\n";
  size_t n_in = g_.inputs().size();
  for (size_t i = 0; i < pointers_.size(); ++i) {
    const auto& [ptr, dtype] = pointers_[i];
    bool is_input = i < n_in;
    k += "  " + std::string(is_input ? "const " : "") + storage_type(dtype) + "* __restrict__ " + ptr + " = (" +
         (is_input ? "const " : "") + storage_type(dtype) + "*)emmy_buf[" + std::to_string(i) + "];\n";
  }
  k += body + "}\n\n";
  kernels_ += k;
}

std::string ModuleBuilder::finish(const std::string& note) const {
  std::string s = device_prelude();
  if (!note.empty()) s += "// " + note + "\n";
  s += render_plan(plan_) + "\n" + kernels_;
  return s;
}

}  // namespace emmy::cuda
