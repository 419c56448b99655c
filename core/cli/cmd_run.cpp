// `emmy run EXPORT`: an export run by libemmy_runtime, checked against the reference interpreter.
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "export/export_check.hpp"

namespace emmy::cli {
namespace {

constexpr const char* kEpilogue =
    R"TXT(EXPORT is a folder `emmy export` wrote (or its plan.emmyplan). Its inputs and weights are
bound by name to seeded random tensors (the interpreter's: floats uniform in [-1, 1), causal
masks lower-triangular), or to --inputs DIR/<name>.bin where that file exists (raw row-major
bytes of the input's dtype and shape); then it runs through libemmy_runtime and each output is
compared with the reference interpreter's on the graph the export carries: the relative RMS
error must stay within what the tune allows a whole graph (1e-3 for f32, 5e-2 for bf16).

Exit codes: 0 every output matches, 1 a mismatch (or the run failed), 2 bad usage or an export
that cannot be loaded: missing, not a plan, another format version, damaged, its kernels'
library not the one it was written with, or for a backend this runtime cannot run.)TXT";

}  // namespace

int run_run(const GlobalOptions& g, const std::vector<std::string>& args) {
  std::string path, inputs_dir;
  uint64_t seed = 0;
  int repeat = 1;
  po::options_description desc("emmy run options");
  // clang-format off
  desc.add_options()
    ("help,h", "this text")
    ("export", po::value<std::string>(&path), "export folder (positional)")
    ("inputs", po::value<std::string>(&inputs_dir), "folder of <input name>.bin files to use instead of random tensors")
    ("seed", po::value<uint64_t>(&seed)->default_value(0), "seed of the random inputs")
    ("repeat", po::value<int>(&repeat)->default_value(1), "runs to time (the median is printed)");
  // clang-format on
  po::positional_options_description pos;
  pos.add("export", 1);
  po::variables_map vm = parse_layered(g, "run", desc, pos, args);
  if (vm.count("help")) {
    print_help("emmy run EXPORT [--inputs DIR] [--seed N] [--repeat N]", desc, kEpilogue);
    return kExitOk;
  }
  if (path.empty()) {
    std::cerr << "emmy run: give the EXPORT folder (see emmy run --help)\n";
    return kExitUsage;
  }
  if (repeat < 1) {
    std::cerr << "emmy run: --repeat must be at least 1\n";
    return kExitUsage;
  }
  std::optional<runtime::Model> model;
  try {
    model.emplace(runtime::Model::load(path));
  } catch (const runtime::Error& e) {
    std::cerr << "emmy run: " << e.what() << "\n";
    return kExitUsage;
  }
  const runtime::PlanData& plan = model->plan();
  std::cout << "export of " << plan.source << " (" << plan.backend << ", " << plan.kernels.size()
            << " kernels, tuned by run " << plan.run_id << " on " << plan.environment << ")\n";
  // The names --inputs files and the runtime's bind() take.
  const std::vector<runtime::BufferInfo> inputs = model->inputs();
  if (g.verbose) {
    for (const auto& in : inputs) {
      std::string shape;
      for (int64_t d : in.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
      std::cout << "input " << in.name << " " << in.dtype << "[" << shape << "] (" << in.role
                << ")\n";
    }
  } else {
    std::cout << inputs.size() << " inputs, weights included (emmy -v run lists their names)\n";
  }
  exporter::CheckResult r;
  try {
    r = exporter::check_export(*model, seed, inputs_dir, repeat);
  } catch (const runtime::Error& e) {
    std::cerr << "emmy run: " << e.what() << "\n";
    return kExitUsage;
  }
  for (const auto& name : r.inputs_from_files)
    std::cout << "input " << name << " from " << inputs_dir << "\n";
  for (const auto& o : r.outputs) {
    char line[512];
    if (o.mismatch.empty() && o.limit > 0)
      std::snprintf(line, sizeof line,
                    "output %s %s: max abs error %.3g, relative rms %.3g (limit %.0e) %s",
                    o.name.c_str(), o.type.c_str(), o.max_abs_error, o.relative_rms, o.limit,
                    o.pass ? "PASS" : "FAIL");
    else
      std::snprintf(line, sizeof line, "output %s %s: max abs error %.3g %s %s", o.name.c_str(),
                    o.type.c_str(), o.max_abs_error, o.pass ? "PASS" : "FAIL", o.mismatch.c_str());
    std::cout << line << "\n";
  }
  std::cout << "run: " << r.run_ms << " ms (median of " << r.runs << ")\n"
            << (r.pass() ? "PASS"
                         : "FAIL: the export's outputs differ from the reference interpreter's")
            << "\n";
  return r.pass() ? kExitOk : kExitFailure;
}

}  // namespace emmy::cli
