// `emmy export`: what a tune chose, built into a folder libemmy_runtime loads (docs/RUNTIME.md).
#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/input_checks.hpp"
#include "cli/options.hpp"
#include "cli/plugin_options.hpp"
#include "export/exporter.hpp"
#include "store/tuning_store.hpp"

#ifndef EMMY_INSTALL_PLUGIN_DIR
#define EMMY_INSTALL_PLUGIN_DIR ""
#endif

namespace emmy::cli {
namespace {

constexpr const char* kEpilogue =
    R"TXT(SOURCE and the model options are those of the tune (emmy tune --help): the same frontend
turns them into the same graph, whose key and the backend's environment fingerprint find the
plan the tune chose in the tuning database (--db). Give the same --backend, --workers and
--backend-option as the tune (the cores a worker had are part of the fingerprint) and the same
--passes. Nothing is measured; the database is only read.

The export is a folder: plan.emmyplan (FlatBuffers, runtime/plan.fbs: format version, the
environment fingerprint it was tuned on, kernels in launch order, buffers with dtype and shape,
graph inputs and weights by name, the IR graph) and the kernels, built at the deploy setting
(cpu: kernels.so, one extern "C" entry per kernel; cuda: program.cubin for the tuned architecture,
its launches, tensor maps and library steps in the plan, and each step's library copied).
libemmy_runtime loads it (emmy run checks it). It prints the kernels in launch order and where
its time went (plugins, backend start, graph, database, build, plan, write; seconds).

Exit codes: 0 written, 1 failure (the library does not build, a file cannot be written),
2 bad usage or input, untuned included: no database, no plan of this graph in this environment
(the message names the kernels without a deploy measurement and the environments that have a
plan), or a plan kernel without its measurement; also a backend that cannot export (one whose
plugin declares no `export` option), 4 the database is corrupt.

Examples:
  emmy tune --backend cpu --code "torch.matmul(torch.randn(64,64), torch.randn(64,64))" --patience 2
  emmy export --backend cpu --code "torch.matmul(torch.randn(64,64), torch.randn(64,64))" --out mm.emmy
  emmy run mm.emmy
  emmy export Qwen/Qwen3-Embedding-0.6B --layer 0 --seq 32 --backend cpu --out layer0.emmy)TXT";

}  // namespace

int run_export(const GlobalOptions& g, const std::vector<std::string>& args) {
  exporter::ExportOptions e;
  tune::TuneOptions& o = e.tune;
  int workers = 0;
  po::options_description desc("emmy export options");
  // clang-format off
  desc.add_options()
    ("help,h", "this text")
    ("source", po::value<std::string>(&o.source), "model id or file, as tuned (positional)")
    ("code", po::value<std::string>(&o.code), "inline PyTorch expression, as tuned");
  // clang-format on
  add_model_options(desc);
  // clang-format off
  desc.add_options()
    ("frontend", po::value<std::string>(&o.frontend), "frontend plugin (default: the first that accepts SOURCE)")
    ("backend", po::value<std::string>(&o.backend), "backend the tune used: cpu or cuda (default: as emmy tune chooses)")
    ("backend-option", po::value<std::vector<std::string>>(), "KEY=VALUE of the backend, as tuned (repeatable)")
    ("workers", po::value<int>(&workers), "cpu: --workers of the tune (each worker's cores are part of the environment)")
    ("passes", po::value<std::string>(&o.passes), "pass pipeline, as tuned")
    ("pass-option", po::value<std::vector<std::string>>(), "PASS.KEY=VALUE, as tuned (repeatable)")
    ("out,o", po::value<std::string>(&e.out), "export folder to write (default: <graph name>.emmy here); new, empty or an earlier export");
  // clang-format on
  po::positional_options_description pos;
  pos.add("source", 1);
  po::variables_map vm = parse_layered(g, "export", desc, pos, args);
  if (vm.count("help")) {
    print_help("emmy export [SOURCE] [--code EXPR] [model options] [--out FOLDER]", desc,
               kEpilogue);
    return kExitOk;
  }
  if (o.source.empty() == o.code.empty()) {
    std::cerr << "emmy export: give a SOURCE (model id, .pt or .pt2 file) or --code EXPR, as tuned "
                 "(see emmy export --help)\n";
    return kExitUsage;
  }
  if (!o.code.empty())
    if (std::string bad = code_option_problem(vm); !bad.empty()) {
      std::cerr << "emmy export: " << bad << "\n";
      return kExitUsage;
    }
  o.frontend_options = frontend_options(vm);
  if (vm.count("backend-option"))
    for (const auto& kv : vm["backend-option"].as<std::vector<std::string>>()) {
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::cerr << "emmy export: --backend-option '" << kv << "' is not KEY=VALUE\n";
        return kExitUsage;
      }
      o.backend_options[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  if (vm.count("workers")) {
    if (o.backend.empty()) o.backend = "cpu";
    o.backend_options["workers"] = std::to_string(workers);
  }
  o.plugin_options = read_plugin_sections(g.config_file);
  if (vm.count("pass-option"))
    add_option_flags(o.plugin_options, "--pass-option",
                     vm["pass-option"].as<std::vector<std::string>>(), true);
  o.db = g.db;
  o.home = g.home;
  o.plugin_paths = default_plugin_paths(g.argv0, EMMY_INSTALL_PLUGIN_DIR, g.plugin_paths);

  const auto start = std::chrono::steady_clock::now();
  PluginHost host;
  host.discover(o.plugin_paths);
  const double discovery_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  exporter::ExportReport report;
  try {
    report = exporter::export_model(e, host);
  } catch (const tune::BadInput& bad) {
    std::cerr << "emmy export: " << bad.what() << "\n";
    return kExitUsage;
  }
  std::cout << "exported " << report.kernels.size() << " kernels (" << report.backend
            << ", tuned by run " << report.run_id << ", " << report.tuned_total_us
            << " us tuned) to " << report.folder << "\n";
  for (size_t i = 0; i < report.kernels.size(); ++i)
    std::cout << "  " << i << "  " << report.kernels[i] << "\n";
  // Where the time went (issue 22's target: export + load under a second for the whole model).
  std::ostringstream steps;
  steps << std::fixed << std::setprecision(3) << "plugins " << discovery_s;
  double total = discovery_s;
  for (const auto& [step, s] : report.seconds) {
    steps << ", " << step << " " << s;
    total += s;
  }
  std::cout << "in " << std::fixed << std::setprecision(3) << total << " s: " << steps.str()
            << "\n";
  return kExitOk;
}

}  // namespace emmy::cli
