#include "export/exporter.hpp"

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include "emmy/cuda_step.h"
#include "emmy/fork.hpp"
#include "export/cuda_plan.hpp"
#include "export/plan_builder.hpp"
#include "ir/serialize.hpp"
#include "search/pipeline.hpp"
#include "store/keys.hpp"
#include "store/tuning_store.hpp"
#include "tune/backend_choice.hpp"
#include "tune/run_setup.hpp"
#include "tune/tuner.hpp"

namespace emmy::exporter {
namespace {

namespace fs = std::filesystem;

// The file name of the cpu backend's library inside the export folder, and of the cuda
// backend's cubin (one module holding every kernel of the program).
constexpr const char* kCpuLibrary = "kernels.so";
constexpr const char* kCudaCubin = "program.cubin";

std::string short_key(const std::string& key) {
  return key.substr(0, 8);
}

// The backend named by the options (or chosen as tune chooses), created to build exports. One
// whose manifest declares no `export` option cannot: said so by name.
std::shared_ptr<Backend> export_backend(const tune::TuneOptions& options, PluginHost& host,
                                        std::string& name) {
  name = options.backend.empty() ? tune::choose_backend(options, host).name : options.backend;
  const PluginRecord* record = host.find(name, "backend");
  bool can_export = false;
  if (record)
    for (const ManifestOption& o : record->options) can_export |= o.name == "export";
  if (record && record->ok && !can_export)
    throw tune::BadInput("the " + name +
                         " backend cannot export (its plugin declares no `export` option); "
                         "tune and export with --backend cpu or cuda");
  tune::TuneOptions for_export = options;
  for_export.backend = name;
  for_export.backend_options["export"] = "1";
  return tune::choose_backend(for_export, host).backend;
}

// Whether the plan's kernel has its successful deploy measurement in `env`, where the tune
// stores it (tune/kernel_tuning.cpp): under its key and configuration key; for a kernel tuned
// with its attention producer (key "<fused><<producer>"), the fused kernel's rows under the key
// before '<', or the pair's, keyed "<producer config> + <its config>"; and a built-in template
// that fell back keeps the template asked for in the row's key, the one built (the plan's) in
// its `templ`.
bool has_deploy_row(const store::TuningStore& store, const std::string& env,
                    const store::PlanKernel& k) {
  std::vector<std::string> keys = {k.structural_key};
  if (auto carried = k.structural_key.find('<'); carried != std::string::npos)
    keys.push_back(k.structural_key.substr(0, carried));
  const std::string tail = " + " + k.config_key;
  for (const std::string& key : keys) {
    if (auto row = store.lookup(env, key, k.config_key, Regime::deploy); row && row->ok())
      return true;
    for (const auto& m : store.variants(key)) {
      if (m.env != env || m.regime != Regime::deploy || !m.ok() || m.structural_key != key)
        continue;
      if (m.templ == k.templ && m.knobs == k.knobs) return true;
      if (m.config_key.size() > tail.size() &&
          m.config_key.compare(m.config_key.size() - tail.size(), tail.size(), tail) == 0)
        return true;
    }
  }
  return false;
}

// Why there is no plan: the kernels of the grouping the structural passes make by default that
// have no successful deploy measurement in `env`, and the environments that do have a plan.
std::string no_plan_reason(const tune::TuneOptions& options, PluginHost& host, Backend& backend,
                           const store::TuningStore& store, const ir::Graph& graph,
                           const std::string& env, const std::string& gkey) {
  std::string why = "no tuned plan for this graph (" + tune::describe_source(options) + ", key " +
                    short_key(gkey) + ") on " + env;
  std::vector<std::string> untuned;
  try {
    // The passes of the run, as tune makes them (tune/run_setup.hpp).
    const tune::PassPipeline pipeline =
        tune::make_pipeline(options.passes, host, options.plugin_options);
    const std::vector<Pass*>& passes = pipeline.passes;
    ir::Program p{graph, ir::singleton_grouping(graph)};
    DefaultResolver resolver;
    search::PipelineOptions po;
    po.filter = search::PassFilter::structural_only;
    search::run_pipeline(p, passes, resolver, backend.capabilities(), po);
    std::set<std::string> seen;
    for (const ir::Kernel& k : p.grouping.kernels) {
      const std::string key = ir::structural_key(p.graph, k);
      if (!seen.insert(key).second) continue;
      bool tuned = false;
      for (const auto& m : store.variants(key))
        tuned |= m.env == env && m.regime == Regime::deploy && m.ok() && m.structural_key == key;
      if (!tuned) untuned.push_back(ir::kernel_name(p.graph, k) + " [" + short_key(key) + "]");
    }
  } catch (const Error& e) {
    why += " (its kernels could not be listed: " + std::string(e.what()) + ")";
  }
  if (!untuned.empty()) {
    why += "; untuned kernels:";
    for (const auto& u : untuned) why += " " + u + (u == untuned.back() ? "" : ",");
  } else {
    why += "; its kernels are measured, but no tune of it has finished";
  }
  std::vector<std::string> elsewhere;
  for (const auto& plan : store.plans())
    if (plan.graph_key == gkey && plan.env != env) elsewhere.push_back(plan.env);
  if (!elsewhere.empty()) {
    why +=
        ". Plans of this graph exist for other environments (the same --backend, --workers "
        "and --backend-option as the tune reach them):";
    for (const auto& e : elsewhere) why += "\n  " + e;
  }
  return why + "\nrun emmy tune with the same SOURCE and options first";
}

// The export folder: created, or one that holds an earlier export (its plan file), never a
// folder of the user's with other files.
fs::path prepare_folder(const std::string& out) {
  fs::path folder = out;
  std::error_code ec;
  if (fs::exists(folder, ec)) {
    if (!fs::is_directory(folder, ec))
      throw tune::BadInput("--out '" + out + "' is a file, not an export folder");
    const bool empty = fs::is_empty(folder, ec);
    if (!empty && !fs::exists(folder / runtime::kPlanFileName, ec))
      throw tune::BadInput("--out '" + out + "' is a folder with other files and no " +
                           runtime::kPlanFileName +
                           "; an export is written into a new or empty "
                           "folder, or over an earlier export");
  }
  fs::create_directories(folder, ec);
  if (ec) throw Error("cannot create the export folder " + out + ": " + ec.message());
  return folder;
}

// Writes `bytes` to `path` through a temporary file renamed into place, so a reader never sees
// half a file.
void write_atomically(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) throw Error("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Error("cannot write " + path.string() + ": " + ec.message());
}

std::string read_binary(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) throw Error("cannot read " + what + " " + path);
  if (bytes.empty()) throw Error(what + " " + path + " is empty or missing");
  return bytes;
}

}  // namespace

void write_export(const std::string& out, const std::string& backend, runtime::PlanData& data,
                  const Artifact& artifact) {
  const fs::path folder = out;
  const bool cuda = backend == "cuda";
  data.binary = cuda ? kCudaCubin : kCpuLibrary;
  if (cuda) {
    const std::vector<std::string> step_libraries = add_cuda_plan(data, artifact.source);
    bool any_kernel = false;  // a program of library steps alone (all cuBLASLt) has no cubin
    for (const runtime::KernelInfo& k : data.kernels)
      for (const runtime::LaunchInfo& l : k.launches) any_kernel |= !l.is_step;
    if (!any_kernel) data.binary.clear();
    // The step libraries, copied: the export runs without the plugins (docs/RUNTIME.md, Library
    // steps, says which library the cublaslt plugin's steps name and why it is self-contained).
    data.step_libraries.clear();
    for (const std::string& path : step_libraries) {
      const std::string bytes = read_binary(path, "the library step library");
      runtime::StepLibraryInfo lib;
      lib.file = fs::path(path).filename().string();
      lib.digest = runtime::digest(bytes);
      lib.abi_version = EMMY_CUDA_STEP_ABI_VERSION;
      write_atomically(folder / lib.file, bytes);
      data.step_libraries.push_back(lib);
    }
  }
  if (!data.binary.empty()) {
    const std::string bytes = read_binary(artifact.handle, "the built program");
    write_atomically(folder / data.binary, bytes);
    data.binary_digest = runtime::digest(bytes);
  }
  write_atomically(folder / runtime::kPlanFileName, runtime::encode_plan(data));
}

ExportReport export_model(const ExportOptions& options, PluginHost& host) {
  const tune::TuneOptions& o = options.tune;
  ExportReport report;
  auto since = std::chrono::steady_clock::now();
  auto lap = [&](const char* step) {
    const auto now = std::chrono::steady_clock::now();
    report.seconds.emplace_back(step, std::chrono::duration<double>(now - since).count());
    since = now;
  };
  tune::check_plugin_options(o, host);
  std::shared_ptr<Backend> backend = export_backend(o, host, report.backend);
  lap("backend");

  // The graph, as the tune loads it (tune/run_setup.hpp): its key finds the plan.
  const ir::Graph graph = tune::import_graph({o.source, o.code, o.frontend_options}, o.frontend,
                                             host, tune::describe_source(o))
                              .graph;
  const std::string gkey = tune::graph_key(graph);
  report.env = backend->environment_fingerprint();
  lap("graph");

  std::unique_ptr<store::TuningStore> store;
  try {
    store = store::TuningStore::open_reader(o.db);
  } catch (const store::DatabaseMissing&) {
    throw Untuned("no tuning database at " + o.db +
                  ": nothing is tuned; run emmy tune with the "
                  "same SOURCE and options first");
  }
  auto plan = store->plan(report.env, gkey);
  if (!plan) throw Untuned(no_plan_reason(o, host, *backend, *store, graph, report.env, gkey));
  if (plan->program_graph.empty())
    throw Untuned("the plan of this graph (run " + plan->run_id +
                  ") was stored by an emmy that "
                  "did not record the program; run emmy tune again with the same options (it "
                  "measures nothing new and records it)");
  // Every kernel of the plan has its deploy row: the configuration is what was measured, not
  // something forgotten since (emmy eval failures --forget deletes failures only, but a database
  // copied in parts could lack rows).
  std::vector<std::string> missing;
  for (const store::PlanKernel& k : plan->kernels)
    if (!has_deploy_row(*store, report.env, k))
      missing.push_back(k.kernel_name + " [" + short_key(k.structural_key) + "] at " +
                        k.config_key);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += "\n  " + m;
    throw Untuned("the plan's kernels without a deploy measurement in this database (untuned):" +
                  list + "\nrun emmy tune with the same SOURCE and options");
  }
  report.run_id = plan->run_id;
  report.tuned_total_us = plan->total_us;
  lap("database");

  // The program as the tune deployed it, in launch order, built by the backend in one library.
  ir::Graph program_graph = ir::parse(plan->program_graph);
  ir::Grouping grouping;
  grouping.kernels = plan->program_kernels;
  if (std::string bad = ir::verify_grouping(program_graph, grouping); !bad.empty())
    throw Error("the stored plan's program is not a valid grouping (" + bad + ")");
  const ir::Slice slice = program_slice(program_graph, grouping);
  Artifact artifact;
  MeasureResult failure;
  if (Status st = backend->build(slice, Regime::deploy, artifact, failure); !st.ok())
    throw Error("the " + report.backend + " backend could not build the export: " + st.message());
  if (failure.failure != FailureKind::none)
    throw Error("the export's library does not build (" + std::string(to_string(failure.failure)) +
                "): " + failure.message.substr(0, 4000));
  lap("build");

  runtime::PlanData data = plan_data(program_graph, slice.grouping, [](size_t i) {
    // The cpu backend's export symbols; cuda's are its launches' (add_cuda_plan).
    return "emmy_export_k" + std::to_string(i);
  });
  std::map<std::string, double> tuned_us;
  for (const store::PlanKernel& k : plan->kernels) {
    tuned_us[k.structural_key] = k.time_us;
    // A kernel tuned with its producer ("<fused><<producer>") deploys under the fused key.
    tuned_us.emplace(k.structural_key.substr(0, k.structural_key.find('<')), k.time_us);
  }
  for (size_t i = 0; i < data.kernels.size(); ++i) {
    const ir::Kernel& k = slice.grouping.kernels[i];
    data.kernels[i].config = store::config_key(k.templ, k.knobs);
    if (auto it = tuned_us.find(data.kernels[i].structural_key); it != tuned_us.end())
      data.kernels[i].tuned_us = it->second;
    report.kernels.push_back(data.kernels[i].name + "  " + data.kernels[i].config);
  }
  data.backend = report.backend;
  data.environment = report.env;
  data.emmy_version = EMMY_VERSION;
  data.source = tune::describe_source(o);
  data.graph_key = gkey;
  data.run_id = plan->run_id;
  data.created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  data.tuned_total_us = plan->total_us;

  std::string out = options.out;
  if (out.empty()) {
    // A file name of its own: "Qwen/Qwen3-Embedding-0.6B.layer0" ->
    // Qwen_Qwen3-Embedding-0.6B.layer0.emmy
    out = graph.name.empty() ? std::string("model") : graph.name;
    for (char& c : out)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
    out += ".emmy";
  }
  lap("plan");
  const fs::path folder = prepare_folder(out);
  write_export(folder.string(), report.backend, data, artifact);
  report.folder = folder.string();
  lap("write");
  return report;
}

}  // namespace emmy::exporter
