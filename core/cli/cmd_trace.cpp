// `emmy trace`: lowers a model to the IR and shows what the tuner would work on: op counts, the
// kernels of the default grouping (every fork answered with option 0, the untuned default:
// fuse), and the distinct kernels by structural key. Nothing is built or measured.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/input_checks.hpp"
#include "cli/options.hpp"
#include "cli/plugin_options.hpp"
#include "emmy/templates.hpp"
#include "plugin_host/plugin_host.hpp"
#include "tune/run_setup.hpp"

#ifndef EMMY_INSTALL_PLUGIN_DIR
#define EMMY_INSTALL_PLUGIN_DIR ""
#endif

namespace emmy::cli {
namespace {

constexpr const char* kEpilogue =
    R"TXT(SOURCE is a Hugging Face model id (Qwen/Qwen3-Embedding-0.6B; config from --model-config,
the local Hugging Face cache or the configs shipped with Emmy), a TorchScript file (.pt), a
torch.export archive (.pt2, torch.export.save of PyTorch up to 2.11), or nothing with --code EXPR.

The default grouping is what the pipeline gives when every fork takes its option 0 (fuse, the
untuned defaults); --fork PREFIX=LABEL answers chosen forks otherwise. Kernels with the same
structural key are one unit of tuning work.

Examples:
  emmy trace Qwen/Qwen3-Embedding-0.6B --layer 0
  emmy trace Qwen/Qwen3-Embedding-0.6B --layer 0 --fork fuse_horizontal=split --ir
  emmy trace --code "torch.softmax(torch.randn(64,128), -1)" --json)TXT";

// Answers option 0, or the option --fork PREFIX=LABEL names for forks whose name starts with
// PREFIX, and remembers what was asked and answered.
class RecordingResolver final : public Resolver {
 public:
  explicit RecordingResolver(std::vector<std::pair<std::string, std::string>> overrides)
      : overrides_(std::move(overrides)) {}
  size_t choose(const ForkSite& site) override {
    size_t answer = 0;
    for (const auto& [prefix, label] : overrides_) {
      if (site.name.rfind(prefix, 0) != 0) continue;
      auto it = std::find_if(site.options.begin(), site.options.end(),
                             [&](const ForkOption& o) { return o.label == label; });
      used.insert(prefix);
      if (it == site.options.end()) {
        // Reported after the pipeline (no exception through a pass): option 0 meanwhile.
        std::string labels;
        for (const auto& o : site.options) labels += (labels.empty() ? "" : ", ") + o.label;
        if (error.empty())
          error =
              "--fork " + prefix + "=" + label + ": fork '" + site.name + "' has options " + labels;
        break;
      }
      answer = static_cast<size_t>(it - site.options.begin());
      break;
    }
    sites.push_back(site);
    answers.push_back(answer);
    return answer;
  }
  std::vector<ForkSite> sites;
  std::vector<size_t> answers;
  std::set<std::string> used;  // --fork prefixes that matched a fork
  std::string error;           // a --fork label no option has

 private:
  std::vector<std::pair<std::string, std::string>> overrides_;
};

// What a kernel computes, in a few words: its ops in order (casts and index ops left out).
std::string kernel_summary(const ir::Graph& g, const ir::Kernel& k) {
  std::vector<std::string> ops;
  for (ir::ValueId v : k.nodes) {
    ir::Op op = g.node(v).op;
    if (op == ir::Op::cast || is_index_op(op)) continue;
    std::string name(ir::to_string(op));
    if (std::find(ops.begin(), ops.end(), name) == ops.end()) ops.push_back(name);
  }
  if (ops.empty()) return "copy";
  std::string out;
  for (const auto& o : ops) out += (out.empty() ? "" : "+") + o;
  return out;
}

// Caps that list every template without knobs: lowering still picks templates when no backend
// is loaded (--backend none).
BackendCaps template_only_caps() {
  BackendCaps caps;
  caps.backend = "none";
  for (const std::string& t : template_names()) caps.templates[t] = {};
  return caps;
}

struct DistinctKernel {
  std::string key, name, summary, templ;
  int count = 0;
  size_t nodes = 0;
  ir::KernelStats stats;
};

}  // namespace

int run_trace(const GlobalOptions& g, const std::vector<std::string>& args) {
  std::string source, code, frontend_name, backend_name, passes_spec;
  po::options_description desc("emmy trace options");
  // clang-format off
  desc.add_options()
    ("help,h", "this text")
    ("source", po::value<std::string>(&source), "model id or file (positional)")
    ("code", po::value<std::string>(&code), "inline PyTorch expression");
  // clang-format on
  add_model_options(desc, "(a global --config FILE.json works too)");
  // clang-format off
  desc.add_options()
    ("frontend", po::value<std::string>(&frontend_name), "frontend plugin (default: the first that accepts SOURCE)")
    ("backend", po::value<std::string>(&backend_name)->default_value("cpu"), "backend whose templates and knobs lowering uses; 'none' for templates only")
    ("passes", po::value<std::string>(&passes_spec), "pass pipeline: edits of the default (+NAME,-NAME, default,+NAME), ordered by the passes' manifests (AFTER/BEFORE); or an explicit comma list (\"default\" expands), run as written once checked against those constraints")
    ("pass-option", po::value<std::vector<std::string>>(), "PASS.KEY=VALUE passed to a pass (repeatable; also [plugin PASS] in the config file)")
    ("fork", po::value<std::vector<std::string>>(), "PREFIX=LABEL: answer forks whose name starts with PREFIX with that option (repeatable), e.g. fuse_horizontal=split")
    ("ir", "print the IR text (after the passes) and each kernel's nodes")
    ("json", "print a JSON report instead of the tables");
  // clang-format on
  po::positional_options_description pos;
  pos.add("source", 1);
  po::variables_map vm = parse_layered(g, "trace", desc, pos, args);
  if (vm.count("help")) {
    print_help("emmy trace [SOURCE] [--code EXPR] [options]", desc, kEpilogue);
    return kExitOk;
  }
  if (source.empty() == code.empty()) {
    std::cerr
        << "emmy trace: give either a SOURCE (model id, .pt or .pt2 file) or --code EXPR (see emmy "
           "trace --help)\n";
    return kExitUsage;
  }
  if (!code.empty())
    if (std::string bad = code_option_problem(vm); !bad.empty()) {
      std::cerr << "emmy trace: " << bad << "\n";
      return kExitUsage;
    }
  FrontendRequest request{source, code, frontend_options(vm)};
  if (!vm.count("model-config") && g.config_file.size() > 5 &&
      g.config_file.substr(g.config_file.size() - 5) == ".json")
    request.options["config"] = g.config_file;
  OptionsByPlugin pass_options;
  if (g.config_file.size() <= 5 || g.config_file.substr(g.config_file.size() - 5) != ".json")
    pass_options = read_plugin_sections(g.config_file);
  if (vm.count("pass-option"))
    add_option_flags(pass_options, "--pass-option",
                     vm["pass-option"].as<std::vector<std::string>>(), true);

  PluginHost host;
  host.discover(default_plugin_paths(g.argv0, EMMY_INSTALL_PLUGIN_DIR, g.plugin_paths));
  // Every [plugin NAME] and --pass-option names a plugin found, and a pass's keys are its
  // manifest's, whether or not this pipeline runs it: a misspelling is never ignored.
  for (const auto& [name, given] : pass_options) {
    const PluginRecord* r = host.find(name);
    if (r == nullptr || !r->ok)
      throw po::error("options for '" + name + "': no plugin named '" + name +
                      "' was found (emmy plugins lists them)");
    try {
      if (r->kind == "pass")
        host.options_for(name, "pass", PluginOptions(given.begin(), given.end()));
    } catch (const Error& e) {
      throw po::error(e.what());
    }
  }
  // 1. The run's setup, as emmy tune makes it (tune/run_setup.hpp): the pipeline, then the
  // frontend (named, or the first that accepts the request) and its graph.
  tune::PassPipeline pipeline;
  try {
    pipeline = tune::make_pipeline(passes_spec, host, pass_options);
  } catch (const tune::BadInput& e) {
    throw po::error(e.what());
  }
  const std::vector<std::string>& pass_names = pipeline.names;
  tune::ImportedGraph imported;
  try {
    imported =
        tune::import_graph(request, frontend_name, host, code.empty() ? source : "--code " + code);
  } catch (const tune::BadInput& e) {
    std::cerr << "emmy trace: " << e.what() << "\n";
    return kExitUsage;
  } catch (const Error& e) {
    std::cerr << "emmy trace: " << e.what() << "\n";
    return kExitFailure;
  }
  frontend_name = imported.frontend;
  const ir::Graph& graph = imported.graph;

  // 2. The backend's capabilities (templates and knobs for lowering).
  BackendCaps caps = template_only_caps();
  std::string caps_note;
  if (backend_name != "none") {
    try {
      caps = host.make_backend(backend_name)->capabilities();
    } catch (const std::exception& e) {
      caps_note = std::string("backend '") + backend_name + "' unavailable (" + e.what() +
                  "): templates chosen without backend knobs";
    }
  }

  // 3. The pipeline, every fork at option 0 (or as --fork says), with the checks emmy tune runs.
  std::vector<std::pair<std::string, std::string>> overrides;
  if (vm.count("fork"))
    for (const auto& f : vm["fork"].as<std::vector<std::string>>()) {
      auto eq = f.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == f.size())
        throw po::error("--fork takes PREFIX=LABEL, got '" + f + "'");
      overrides.emplace_back(f.substr(0, eq), f.substr(eq + 1));
    }
  RecordingResolver resolver(overrides);
  ir::Program program;
  try {
    program = tune::run_pipeline_once(graph, pipeline, resolver, caps);
  } catch (const Error& e) {
    std::cerr << "emmy trace: " << e.what() << "\n";
    return kExitFailure;
  }

  if (!resolver.error.empty()) {
    std::cerr << "emmy trace: " << resolver.error << "\n";
    return kExitUsage;
  }
  for (const auto& [prefix, label] : overrides)
    if (!resolver.used.count(prefix))
      std::cerr << "emmy trace: warning: --fork " << prefix << "=" << label << " matched no fork\n";

  // 4. Counts.
  std::map<std::string, int> op_counts;
  for (const auto& n : graph.nodes)
    if (n.op != ir::Op::input && n.op != ir::Op::constant)
      op_counts[std::string(ir::to_string(n.op))]++;
  std::vector<DistinctKernel> distinct;
  std::map<std::string, size_t> by_key;
  std::map<std::string, int> by_template;
  for (const auto& k : program.grouping.kernels) {
    std::string key = ir::structural_key(program.graph, k);
    std::string templ = k.templ.empty() ? best_template(program.graph, k) + "?" : k.templ;
    by_template[templ]++;
    auto [it, fresh] = by_key.emplace(key, distinct.size());
    if (fresh) {
      distinct.push_back({key, ir::kernel_name(program.graph, k), kernel_summary(program.graph, k),
                          templ, 0, k.nodes.size(), ir::kernel_stats(program.graph, k)});
    }
    distinct[it->second].count++;
  }
  std::vector<std::pair<const ForkSite*, size_t>> structural;
  std::set<std::string> in_place;
  for (size_t i = 0; i < resolver.sites.size(); ++i) {
    const ForkSite& s = resolver.sites[i];
    if (s.kind == ForkKind::structural)
      structural.emplace_back(&s, resolver.answers[i]);
    else
      in_place.insert(s.name);
  }

  if (vm.count("json")) {
    nlohmann::json j;
    j["graph"] = graph.name;
    j["frontend"] = frontend_name;
    j["backend"] = caps.backend;
    j["passes"] = pass_names;
    j["compute_nodes"] = graph.compute_node_count();
    j["ops"] = op_counts;
    j["kernels"] = program.grouping.kernels.size();
    j["distinct_kernels"] = distinct.size();
    j["templates"] = by_template;
    for (const auto& [s, a] : structural)
      j["structural_forks"].push_back({{"name", s->name}, {"answer", s->options[a].label}});
    j["in_place_forks"] = in_place;
    for (const auto& d : distinct)
      j["distinct"].push_back({{"key", d.key},
                               {"name", d.name},
                               {"ops", d.summary},
                               {"template", d.templ},
                               {"count", d.count},
                               {"nodes", d.nodes},
                               {"flops", d.stats.flops},
                               {"bytes", d.stats.bytes}});
    if (vm.count("ir")) j["ir"] = ir::print(program.graph);
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }

  std::ostream& out = std::cout;
  out << "graph " << graph.name << " (frontend " << frontend_name
      << "): " << graph.compute_node_count() << " ops, " << graph.inputs().size() << " inputs\n";
  out << "ops:";
  for (const auto& [op, n] : op_counts) out << " " << op << "=" << n;
  out << "\npasses: ";
  for (size_t i = 0; i < pass_names.size(); ++i) out << (i ? "," : "") << pass_names[i];
  out << "\nbackend: " << caps.backend << (caps_note.empty() ? "" : " (" + caps_note + ")") << "\n";
  out << "structural forks (" << structural.size() << "):";
  for (const auto& [s, a] : structural)
    out << "\n  " << s->name << " -> " << s->options[a].label << (a == 0 ? " (default)" : "");
  out << "\nin-place forks per kernel template: " << in_place.size() << " names\n";
  out << "kernels: " << program.grouping.kernels.size() << ", distinct: " << distinct.size()
      << " (";
  bool first = true;
  for (const auto& [t, n] : by_template) {
    out << (first ? "" : ", ") << t << " " << n;
    first = false;
  }
  out << ")\n\n";
  size_t name_width = 6;
  for (const auto& d : distinct) name_width = std::max(name_width, d.name.size() + 2);
  out << std::left << std::setw(4) << "#" << std::setw(static_cast<int>(name_width)) << "name"
      << std::setw(11) << "template" << std::setw(7) << "count" << std::setw(7) << "nodes"
      << std::setw(18) << "key"
      << "ops\n";
  for (size_t i = 0; i < distinct.size(); ++i) {
    const auto& d = distinct[i];
    out << std::left << std::setw(4) << i << std::setw(static_cast<int>(name_width)) << d.name
        << std::setw(11) << d.templ << std::setw(7) << d.count << std::setw(7) << d.nodes
        << std::setw(18) << d.key.substr(0, 16) << d.summary << "\n";
  }
  if (vm.count("ir")) {
    out << "\n" << ir::print(program.graph);
    for (size_t i = 0; i < program.grouping.kernels.size(); ++i) {
      const auto& k = program.grouping.kernels[i];
      out << "kernel " << i << " [" << (k.templ.empty() ? "-" : k.templ) << "] "
          << ir::structural_key(program.graph, k).substr(0, 16) << ":";
      for (ir::ValueId v : k.nodes) out << " %" << v;
      out << "\n";
    }
  }
  return kExitOk;
}

}  // namespace emmy::cli
