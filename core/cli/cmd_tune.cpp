// `emmy tune`: the command that creates knowledge (docs/DESIGN.md, Data flow of emmy tune).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/input_checks.hpp"
#include "cli/options.hpp"
#include "cli/plugin_options.hpp"
#include "plugin_host/plugin_host.hpp"
#include "search/candidate.hpp"
#include "store/tuning_store.hpp"
#include "tune/interrupt.hpp"
#include "tune/tuner.hpp"

#ifndef EMMY_INSTALL_PLUGIN_DIR
#define EMMY_INSTALL_PLUGIN_DIR ""
#endif

namespace emmy::cli {
namespace {

constexpr const char* kEpilogue =
    R"TXT(SOURCE is a Hugging Face model id (Qwen/Qwen3-Embedding-0.6B), a TorchScript file (.pt), a
torch.export archive (.pt2, torch.export.save of PyTorch up to 2.11), or nothing with --code EXPR
(an inline PyTorch expression whose torch.randn/rand/zeros/ones/empty calls with constant sizes
become the graph's inputs).

Every configuration is looked up in the tuning database before anything is built: a re-run of
an identical run walks the same path and launches nothing. Measurements within 15 % of the best
so far are re-measured at the deploy setting. At the end the assembled graph and its kernels, each
measured again in isolation, are timed in 20 short alternating rounds and compared (the
validation gap: each side is the 20th percentile of its samples, a program's samples adding up
its kernels' equally ranked times; docs/PERFORMANCE.md says why).

Devices: --gpus N / --devices LIST (cuda) and --workers N (cpu) tune the new kernels of a grouping
side by side, each device measuring one kernel at a time (the cuda backend keeps 4 kernels per
device in flight so that builds overlap measurements; --backend-option kernels_per_device=1 turns
that off). Each kernel's search has its own seed and starts from the same prior, so per-kernel
choices and the total do not depend on the device count (only on the timings measured); the wall
time does. On cuda each search also builds the candidates it would evaluate next while one is
measured (--build-ahead N, default 8 or half the cores; 0 on cpu): their builds are then
compile-cache hits, and what is evaluated and chosen is the same as without.

Examples:
  emmy tune --backend cpu --code "torch.matmul(torch.randn(256,256), torch.randn(256,256))" --patience 10
  emmy tune Qwen/Qwen3-Embedding-0.6B --layer 0 --seq 32 --backend cpu --patience 5
  emmy tune model.pt --input-shape 1x128x64:f32 --json report.json
  emmy tune model.pt2 --input-shape 1x512x1024:bf16   # --input-shape pins dynamic dimensions
  emmy tune Qwen/Qwen3-Embedding-0.6B --layer 0 --backend cuda --gpus 2

Hopeless work is skipped (--hopeless F, default 10): once a grouping has a total, another
grouping whose kernels (those tuned before, and the first measurement of each new one) already
add up to more than F times it is set aside, its remaining kernels untuned; the -v log, the
report (groupings_set_aside) and the run record (emmy eval runs) say why. A candidate running
more than F times its kernel's best known time (over warm-up and samples, plus 2 s) is cut
short: stored as a timeout row naming that limit, never as a time, and measured again by a run
allowing longer.

After the search, a grouping one answer from the best made only of kernels already tuned is
adopted when they add up to less, and deploys only if it is also faster end to end than the
search's own best (both timed; not under --no-validate); the report's groupings_recombined and
recombination_check say so.

Only a candidate's own failures are stored (it did not compile, crashed, hung past --timeout or
computed a wrong result). When the machinery fails (the worker cannot start or is killed from
outside, the compiler is killed, the disk of the build files is full) the candidate is tried once
more, then the run stops with exit 1, storing nothing for it. A tuning database that is corrupt
stops the run before anything is written (exit 4; its files are left as they are); one whose disk
is full stops it at the first write that fails (exit 5), keeping everything stored before.

Untrusted input is bounded and checked before use (docs/SECURITY.md): a .pt file whose code runs
while it loads (__setstate__) needs --trust; --code, config.json sizes and tensors (16 GiB) have
limits; options that do not apply (--layer with --code, ...), a --db folder that is not a tuning
database and a --json path that cannot be written are refused before the run.

Exit codes: 0 ok, 1 failure at run time, 2 bad usage or input (unknown op, model or plugin, an
option out of range or not in the plugin's manifest, a pass order against the manifests, cuda
asked for without a usable CUDA device; nothing is written), 3 the database is in use by
another emmy tune, 4 the database is corrupt, 5 no space left for the
database, 6 crashed inside a plugin (named, with what it was doing; what was stored is kept),
130 interrupted (what was measured is kept).

Search: each kernel's search stops after --patience candidates without a new best, or, with
--budget N, after exactly N candidates (fewer when the kernel has fewer configurations);
--search random picks them at random (each fork uniformly among its options not yet exhausted)
instead of by MCTS, and --prior flat runs MCTS with no prior. These are the baselines
bench/search sets the default (mcts-ranked, mlp, patience 50) beside; the JSON report (--json) lists
every kernel's search evaluation by evaluation ("searches": rank and deploy times in order).

Plugins: --passes edits the default pipeline (+NAME, -NAME, default,+NAME) or lists the passes;
their order comes from the passes' manifests (AFTER/BEFORE), and a list that contradicts them
is refused. Options of passes and priors: --pass-option, --prior-option, or [plugin NAME]
sections of the config file, checked against the manifests. A pass whose fork sets a knob no
template of the backend reads is refused before the search (docs/PLUGINS.md).
Global options (--db, --plugin-path, --config, -v) are listed by emmy --help.)TXT";

constexpr double kMinTimeout = 0.1, kMaxTimeout = 3600;

// What is wrong with a --devices list ("" when nothing): each entry a device number, none twice.
std::string device_list_problem(const std::string& list) {
  std::set<long> seen;
  size_t pos = 0;
  for (;;) {
    size_t comma = list.find(',', pos);
    std::string d = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (d.empty()) return "an empty entry (give device numbers separated by commas, e.g. 0,2)";
    if (d.find_first_not_of("0123456789") != std::string::npos || d.size() > 6)
      return "'" + d + "' is not a device number (0, 1, ...)";
    if (!seen.insert(std::stol(d)).second)
      return "device " + d + " is listed twice (each device measures one kernel at a time)";
    if (comma == std::string::npos) return "";
    pos = comma + 1;
  }
}

// torch.randn(..., device='cuda') (or "cuda:1", .cuda()): the expression means a GPU.
bool code_asks_for_cuda(const std::string& code) {
  static const std::regex cuda(R"((['"]cuda(:[0-9]+)?['"])|(\.cuda\s*\())");
  return std::regex_search(code, cuda);
}

}  // namespace

int run_tune(const GlobalOptions& g, const std::vector<std::string>& args) {
  tune::TuneOptions o;
  std::string passes, frontend_opts, backend_opts, devices;
  int gpus = 0, workers = 0;
  po::options_description desc("emmy tune options");
  // clang-format off
  desc.add_options()
    ("help,h", "this text")
    ("source", po::value<std::string>(&o.source), "model id or file (positional)")
    ("code", po::value<std::string>(&o.code), "inline PyTorch expression to tune");
  // clang-format on
  add_model_options(desc);
  // clang-format off
  desc.add_options()
    ("frontend", po::value<std::string>(&o.frontend), "frontend plugin (default: the first that accepts SOURCE)")
    ("backend", po::value<std::string>(&o.backend), "backend plugin: cpu or cuda (default: cuda when the cuda backend finds a usable CUDA device, else cpu; --code asking for device='cuda', --gpus or --devices ask for cuda)")
    ("backend-option", po::value<std::vector<std::string>>(), "KEY=VALUE passed to the backend (repeatable; the keys it declares: emmy plugins --json --kind backend)")
    ("prior", po::value<std::string>(&o.prior), "prior plugin (default: mlp, which starts as the roofline model and learns from every run ($EMMY_HOME/priors/mlp.ckpt); roofline, with a warning, when mlp is not installed); flat: no prior (untried configurations valued alike; nothing learned or saved)")
    ("passes", po::value<std::string>(&passes), "pass pipeline: edits of the default (+NAME,-NAME, default,+NAME), ordered by the passes' manifests (AFTER/BEFORE); or an explicit comma list (\"default\" expands), run as written once checked against those constraints")
    ("pass-option", po::value<std::vector<std::string>>(), "PASS.KEY=VALUE passed to a pass (repeatable; also [plugin PASS] in the config file; the keys it declares: emmy plugins --json --kind pass)")
    ("prior-option", po::value<std::vector<std::string>>(), "KEY=VALUE passed to the prior (repeatable; also [plugin PRIOR] in the config file; the keys it declares: emmy plugins --json --kind prior)")
    ("patience", po::value<int>(&o.patience)->default_value(50), "inner search stops after this many candidates without a new best")
    ("search", po::value<std::string>(&o.search)->default_value(tune::TuneOptions{}.search), "how each kernel's search picks candidates: mcts-ranked (the tree, each branch valued by the best configuration the prior predicts among those still untried below it, every estimate calibrated alike by the prior's error over all the search's measurements: the prior's ranking of what is left decides, refined by what it learns), mcts (the tree, a tried branch valued by what was measured below it; the default before 2026-12-06), mcts-remaining (as mcts-ranked, each branch's estimate calibrated by its own measurements' errors; an experiment, docs/PERFORMANCE.md) or random (each fork answered uniformly among the options with untried configurations below; no all-defaults first candidate)")
    ("first", po::value<std::string>(&o.first)->default_value(tune::TuneOptions{}.first), "what each kernel's search (mcts) evaluates first: prior-then-defaults (the configuration the prior predicts fastest, then the backend's untuned configuration), defaults (the untuned configuration first, a known-good baseline; the default before 2026-12-06) or prior (the favourite alone); with --prior flat the defaults come first")
    ("budget", po::value<int>(&o.budget), "each kernel's search evaluates exactly N candidates (fewer only when it has fewer), instead of stopping by --patience")
    ("seed", po::value<uint64_t>(&o.seed)->default_value(0), "search seed")
    ("samples", po::value<int>(&o.samples)->default_value(15), "timed repetitions per measurement (median)")
    ("warmup", po::value<int>(&o.warmup)->default_value(3), "untimed repetitions before measuring")
    ("timeout", po::value<double>(&o.timeout_s)->default_value(20), "seconds (0.1 to 3600) before a candidate counts as hung")
    ("hopeless", po::value<double>(&o.hopeless_factor)->default_value(10), "set aside a grouping whose kernels' first measurements put its total beyond F times the best total, and cut short a candidate running beyond F times its kernel's best time (0: never; below 1 sets aside groupings that might still win)")
    ("build-ahead", po::value<int>(&o.build_ahead), "build the N candidates each kernel's search would evaluate next on N threads while one is measured (never changes what is evaluated or chosen; default: 8, or half the cores, on a backend that builds beside its measurements (cuda), 0 on cpu, whose builds would disturb its timings)")
    ("gpus", po::value<int>(&gpus), "cuda: use the first N devices")
    ("devices", po::value<std::string>(&devices), "cuda: device list, e.g. 0,2")
    ("workers", po::value<int>(&workers), "cpu: measure in N worker processes, each pinned to its share of the cores (default 1; --backend-option cores_per_worker=K sets the share)")
    ("no-validate", "skip measuring the assembled graph at the end")
    ("no-progress", "no live progress bar (plain lines)")
    ("json", po::value<std::string>(&o.json_path), "write a JSON report to FILE");
  // clang-format on
  po::positional_options_description pos;
  pos.add("source", 1);
  po::variables_map vm = parse_layered(g, "tune", desc, pos, args);
  if (vm.count("help")) {
    print_help("emmy tune [SOURCE] [--code EXPR] [options]", desc, kEpilogue);
    return kExitOk;
  }
  if (o.source.empty() && o.code.empty()) {
    std::cerr << "emmy tune: give a SOURCE (model id, .pt or .pt2 file) or --code EXPR (see emmy "
                 "tune --help)\n";
    return kExitUsage;
  }
  if (!o.source.empty() && !o.code.empty()) {
    std::cerr << "emmy tune: give either a SOURCE or --code, not both\n";
    return kExitUsage;
  }
  if (o.patience < 1) {
    std::cerr << "emmy tune: --patience must be at least 1\n";
    return kExitUsage;
  }
  if (!search::parse_first_candidate(o.first)) {
    std::cerr << "emmy tune: --first '" << o.first << "' is not " << search::kFirstCandidateNames
              << "\n";
    return kExitUsage;
  }
  if (!search::parse_search_kind(o.search)) {
    std::cerr << "emmy tune: --search '" << o.search << "' is not " << search::kSearchNames << "\n";
    return kExitUsage;
  }
  if (vm.count("budget") && o.budget < 1) {
    std::cerr << "emmy tune: --budget " << o.budget
              << " is not a positive number of candidates per kernel\n";
    return kExitUsage;
  }
  // One stopping rule per run: a patience given beside a budget would be silently unused.
  if (vm.count("budget") && !vm["patience"].defaulted()) {
    std::cerr << "emmy tune: give --patience or --budget, not both (a budget replaces the "
                 "patience)\n";
    return kExitUsage;
  }
  if (o.samples < 1 || o.warmup < 0) {
    std::cerr << "emmy tune: --samples must be >= 1, --warmup >= 0\n";
    return kExitUsage;
  }
  // A timeout row is stored as the candidate's failure: a limit no kernel can meet (0.001, nan)
  // or none at all (inf, 1e99) would record the machinery's setting as the kernel's fault.
  if (!(o.timeout_s >= kMinTimeout && o.timeout_s <= kMaxTimeout)) {
    std::cerr << "emmy tune: --timeout " << vm["timeout"].as<double>()
              << " is not a number of seconds from " << kMinTimeout << " to " << kMaxTimeout
              << "\n";
    return kExitUsage;
  }
  if (vm.count("build-ahead") && !(o.build_ahead >= 0 && o.build_ahead <= 64)) {
    std::cerr << "emmy tune: --build-ahead " << o.build_ahead
              << " is not a number of candidates from 0 to 64\n";
    return kExitUsage;
  }
  if (!(o.hopeless_factor >= 0 && std::isfinite(o.hopeless_factor))) {
    std::cerr << "emmy tune: --hopeless " << vm["hopeless"].as<double>()
              << " is not 0 (never set aside) or a positive factor\n";
    return kExitUsage;
  }
  // Options a --code expression has no use for are refused rather than ignored: the user meant
  // something by them (also when EMMY_SEQ or the config file set them).
  if (!o.code.empty())
    if (std::string bad = code_option_problem(vm); !bad.empty()) {
      std::cerr << "emmy tune: " << bad << "\n";
      return kExitUsage;
    }
  o.frontend_options = frontend_options(vm);
  if (vm.count("backend-option")) {
    for (const auto& kv : vm["backend-option"].as<std::vector<std::string>>()) {
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::cerr << "emmy tune: --backend-option '" << kv << "' is not KEY=VALUE\n";
        return kExitUsage;
      }
      o.backend_options[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  // Kernels are tuned side by side, one per device: GPUs for cuda, worker processes for cpu. The
  // device list is checked here, before any plugin loads; the counts go to the backend as given.
  if (vm.count("gpus") && vm.count("devices")) {
    std::cerr << "emmy tune: give --gpus N or --devices LIST, not both\n";
    return kExitUsage;
  }
  if (vm.count("gpus") && gpus < 1) {
    std::cerr << "emmy tune: --gpus " << gpus << " is not a positive number of devices\n";
    return kExitUsage;
  }
  if (vm.count("devices"))
    if (std::string bad = device_list_problem(devices); !bad.empty()) {
      std::cerr << "emmy tune: --devices '" << devices << "': " << bad << "\n";
      return kExitUsage;
    }
  // No --backend: the flags and the expression may ask for one; else the machine decides
  // (tune/backend_choice.hpp).
  if (o.backend.empty()) {
    if (vm.count("gpus") || vm.count("devices")) {
      o.backend = "cuda";
      o.backend_reason = vm.count("gpus") ? "--gpus chooses GPUs" : "--devices chooses GPUs";
    } else if (vm.count("workers")) {
      o.backend = "cpu";
    } else if (code_asks_for_cuda(o.code)) {
      o.backend = "cuda";
      o.backend_reason =
          "the --code expression asks for device 'cuda'; --backend cpu runs it on the CPU";
    }
  }
  if (o.backend == "cpu" && (vm.count("gpus") || vm.count("devices"))) {
    std::cerr << "emmy tune: --gpus and --devices choose GPUs of the cuda backend; the cpu backend "
                 "fans out over --workers N\n";
    return kExitUsage;
  }
  if (o.backend == "cuda" && vm.count("workers")) {
    std::cerr << "emmy tune: --workers is for the cpu backend; the cuda backend fans out over "
                 "--gpus N or --devices LIST\n";
    return kExitUsage;
  }
  if (vm.count("workers")) o.backend_options["workers"] = std::to_string(workers);
  if (vm.count("gpus")) o.backend_options["gpus"] = std::to_string(gpus);
  if (!devices.empty()) o.backend_options["devices"] = devices;
  o.passes = passes;
  // [plugin NAME] sections first, then the flags, which win; names and keys are checked against
  // the manifests when the run starts (tune/tuner.cpp).
  o.plugin_options = read_plugin_sections(g.config_file);
  if (vm.count("pass-option"))
    add_option_flags(o.plugin_options, "--pass-option",
                     vm["pass-option"].as<std::vector<std::string>>(), true);
  if (vm.count("prior-option")) {
    if (o.prior == tune::kFlatPrior) {
      std::cerr << "emmy tune: --prior flat has no options (it is no prior at all)\n";
      return kExitUsage;
    }
    if (o.prior.empty()) {
      std::cerr << "emmy tune: --prior-option needs --prior NAME (the options are that prior's)\n";
      return kExitUsage;
    }
    add_option_flags(o.plugin_options, "--prior-option",
                     vm["prior-option"].as<std::vector<std::string>>(), false, o.prior);
  }
  o.validate = !vm.count("no-validate");
  o.progress_bar = !vm.count("no-progress");
  o.db = g.db;
  o.home = g.home;
  o.verbose = g.verbose;
  o.plugin_paths = default_plugin_paths(g.argv0, EMMY_INSTALL_PLUGIN_DIR, g.plugin_paths);

  // Paths checked before the run: a folder of the user's is never filled with database files,
  // and a report that cannot be written is known now, not after the whole tune.
  if (std::string bad = db_path_problem(o.db); !bad.empty()) {
    std::cerr << "emmy tune: --db '" << o.db << "' " << bad << "\n";
    return kExitUsage;
  }
  if (!o.json_path.empty())
    if (std::string bad = json_path_problem(o.json_path); !bad.empty()) {
      std::cerr << "emmy tune: --json '" << o.json_path << "' " << bad << "\n";
      return kExitUsage;
    }

  PluginHost host;
  host.discover(o.plugin_paths);
  tune::Progress progress(o.verbose, o.progress_bar);
  tune::TuneReport report;
  tune::install_interrupt_handler();
  int code = kExitOk;
  try {
    tune::run_tuning(o, host, progress, report);
  } catch (const store::DatabaseBusy& e) {
    std::cerr << "emmy tune: " << e.what() << "\n";
    return kExitBusy;
  } catch (const tune::Interrupted&) {
    std::cerr << "emmy tune: interrupted; everything measured so far is in " << o.db
              << " and the next run goes on from there\n";
    code = kExitInterrupted;
  } catch (const tune::BadInput& e) {
    std::cerr << "emmy tune: " << e.what() << "\n";
    return kExitUsage;
  }
  if (code == kExitOk) {
    if (!report.backend_note.empty()) std::cout << report.backend_note << "\n";
    std::cout << "run " << report.run_id << " (" << report.backend << " on " << report.devices
              << (report.devices == 1 ? " device" : " devices") << ", prior " << report.prior
              << (report.prior_replays.empty() ? ""
                                               : " as run " + report.prior_replays + " started")
              << ", " << report.groupings_tried << " groupings tried, " << report.wall_s << " s)\n"
              << report.table();
  }
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    out << report.to_json().dump(2) << "\n";
    if (!out) {
      std::cerr << "emmy tune: cannot write the JSON report to " << o.json_path << "\n";
      return kExitFailure;
    }
  }
  return code;
}

}  // namespace emmy::cli
