// `emmy eval`: reads the tuning database with no GPU (docs/DESIGN.md, CLI).
//   emmy eval variants --kernel NAME   what was measured, best first
//   emmy eval failures                 failing configurations grouped by kind
//   emmy eval runs                     past runs with their totals and validation gap
//   emmy eval prior                    the prior's checkpoint (cmd_eval_prior.cpp)
// The database is opened as a reader (a RocksDB secondary instance), so this works while an
// `emmy tune` writes to it and never disturbs it. The report logic is in core/eval/eval_report.hpp.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "eval/eval_report.hpp"
#include "store/tuning_store.hpp"

namespace emmy::cli {
namespace {

constexpr const char* kEvalUsage = R"(usage: emmy eval <what> [options]

  variants --kernel NAME   what was measured for a kernel (its name as trace and tune print
                           it, e.g. input_layernorm or q_proj+k_proj+v_proj, a prefix of it,
                           or a structural-key prefix), best first, with regime, time and knobs
  failures                 failing configurations grouped by kind, with the knob values every
                           failing row shares; --forget deletes them (--kernel, --kind filter)
  runs                     past tuning runs with their totals and validation gap
  prior                    the prior's checkpoint

`emmy eval <what> --help` for its options. The database is --db (default $EMMY_HOME/tuning.db).
)";

std::unique_ptr<store::TuningStore> open_db(const GlobalOptions& g) {
  return store::TuningStore::open_reader(g.db);
}

int eval_variants(const GlobalOptions& g, const std::vector<std::string>& args) {
  po::options_description desc("emmy eval variants options");
  desc.add_options()("help,h", "this text")(
      "kernel,k", po::value<std::string>(),
      "kernel name as emmy trace/tune print it (\"input_layernorm\", "
      "\"self_attn.q_proj+k_proj+v_proj\" "
      "or \"q_proj+k_proj+v_proj\", \"matmul\"), a prefix of one, or a prefix of a structural key")(
      "limit,n", po::value<size_t>()->default_value(20), "rows per kernel (0: all)")(
      "json", po::bool_switch(), "print JSON")("csv", po::bool_switch(), "print CSV");
  po::positional_options_description pos;
  pos.add("kernel", 1);
  auto vm = parse_layered(g, "eval.variants", desc, pos, args);
  if (vm.count("help")) {
    print_help("emmy eval variants --kernel NAME [--limit N] [--json | --csv]", desc,
               "Rows are best first: successes by median time (deploy rows marked), then "
               "failures.");
    return kExitOk;
  }
  if (!vm.count("kernel"))
    throw po::error("--kernel NAME is required (an op name like matmul, or a key prefix)");
  if (vm["json"].as<bool>() && vm["csv"].as<bool>())
    throw po::error("--json and --csv exclude each other");
  std::string kernel = vm["kernel"].as<std::string>();
  auto db = open_db(g);
  auto groups = eval::group_variants(db->variants(kernel), db->kernels(), vm["limit"].as<size_t>());
  if (vm["json"].as<bool>()) {
    std::cout << eval::variants_json(groups) << "\n";
  } else if (vm["csv"].as<bool>()) {
    eval::print_variants_csv(std::cout, groups);
  } else if (groups.empty()) {
    std::cout << "nothing measured for kernel '" << kernel << "' in " << g.db << "\n";
  } else {
    std::ostringstream text;  // stored strings may carry escape sequences
    eval::print_variants_text(text, groups);
    std::cout << eval::terminal_safe(text.str());
  }
  return kExitOk;
}

// --kind KIND: nullopt for "" (every kind); po::error naming the kinds for anything else.
std::optional<FailureKind> parse_kind(const std::string& kind) {
  if (kind.empty()) return std::nullopt;
  for (auto k : {FailureKind::build_error, FailureKind::runtime_fault, FailureKind::timeout,
                 FailureKind::wrong_result, FailureKind::refused})
    if (kind == to_string(k)) return k;
  throw po::error("--kind '" + kind +
                  "' is not one of build_error, runtime_fault, timeout, wrong_result, refused");
}

// --forget: the one write `emmy eval` does. It takes the writer lock as `emmy tune` does, so a
// tune holding the database makes it a clear error (exit 3), never a race.
int forget_failures(const GlobalOptions& g, const std::string& kernel, const std::string& kind,
                    std::optional<FailureKind> only) {
  // Only a database (whole or damaged) is opened: a writer's open would otherwise fill a new,
  // empty or foreign folder with database files (issue 21, options that do not apply).
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::path(g.db) / "CURRENT", ec) &&
      !(std::filesystem::is_directory(g.db, ec) && store::has_database_files(g.db))) {
    std::cerr << "emmy eval failures: no tuning database at " << g.db << "; nothing to forget\n";
    return kExitUsage;
  }
  std::unique_ptr<store::TuningStore> db;
  try {
    db = store::TuningStore::open_writer(g.db);
  } catch (const store::DatabaseBusy& e) {
    std::cerr << "emmy eval failures --forget: " << e.what()
              << " (forget after that tune has finished)\n";
    return kExitBusy;
  }
  size_t n = db->forget_failures(kernel, only);
  std::cout << "forgot " << n << (n == 1 ? " failure row" : " failure rows");
  if (!kernel.empty()) std::cout << " of kernel '" << kernel << "'";
  if (!kind.empty()) std::cout << " of kind " << kind;
  std::cout << " in " << g.db << "\n";
  return kExitOk;
}

int eval_failures(const GlobalOptions& g, const std::vector<std::string>& args) {
  po::options_description desc("emmy eval failures options");
  desc.add_options()("help,h", "this text")("kernel,k", po::value<std::string>()->default_value(""),
                                            "only this kernel (a name as trace/tune print it, a "
                                            "prefix of one, or a structural-key prefix)")(
      "kind", po::value<std::string>()->default_value(""),
      "only this kind: build_error, runtime_fault, timeout, wrong_result, refused")(
      "json", po::bool_switch(), "print JSON")(
      "forget", po::bool_switch(),
      "delete the failure rows selected (--kernel, --kind; all when neither is given) so the "
      "next tune measures those configurations again; successes are kept");
  auto vm = parse_layered(g, "eval.failures", desc, {}, args);
  if (vm.count("help")) {
    print_help(
        "emmy eval failures [--kernel NAME] [--kind KIND] [--json] [--forget]", desc,
        "Groups: build_error, runtime_fault, timeout, wrong_result, refused (knob values the\n"
        "template cannot take for that kernel); each with its count, "
        "a sample\nmessage and the knob values that every failing row of the group has.\n"
        "--forget is for failure rows written before emmy told a candidate's own failures\n"
        "from the machinery's (a missing or killed worker, an interrupt); it needs the\n"
        "database for itself (exit 3 while an emmy tune runs on it).");
    return kExitOk;
  }
  const std::string kernel = vm["kernel"].as<std::string>();
  const std::string kind = vm["kind"].as<std::string>();
  const std::optional<FailureKind> only = parse_kind(kind);
  if (vm["forget"].as<bool>()) {
    if (vm["json"].as<bool>()) throw po::error("--forget prints a count, not --json");
    return forget_failures(g, kernel, kind, only);
  }
  auto db = open_db(g);
  auto rows = db->failures(kernel);
  if (only)
    rows.erase(
        std::remove_if(rows.begin(), rows.end(), [&](const auto& r) { return r.failure != *only; }),
        rows.end());
  auto groups = eval::group_failures(rows);
  if (vm["json"].as<bool>())
    std::cout << eval::failures_json(groups) << "\n";
  else {
    std::ostringstream text;  // stored strings may carry escape sequences
    eval::print_failures_text(text, groups);
    std::cout << eval::terminal_safe(text.str());
  }
  return kExitOk;
}

int eval_runs(const GlobalOptions& g, const std::vector<std::string>& args) {
  po::options_description desc("emmy eval runs options");
  desc.add_options()("help,h", "this text")("limit,n", po::value<size_t>()->default_value(0),
                                            "newest N runs (0: all)")("json", po::bool_switch(),
                                                                      "print JSON");
  auto vm = parse_layered(g, "eval.runs", desc, {}, args);
  if (vm.count("help")) {
    print_help("emmy eval runs [--limit N] [--json]", desc,
               "Newest first. gap % = (assembled - best total) / best total: what isolated "
               "kernel timings miss.");
    return kExitOk;
  }
  auto db = open_db(g);
  auto runs = db->runs();
  eval::sort_runs(runs);
  size_t limit = vm["limit"].as<size_t>();
  if (limit > 0 && runs.size() > limit) runs.resize(limit);
  if (vm["json"].as<bool>())
    std::cout << eval::runs_json(runs) << "\n";
  else {
    std::ostringstream text;  // stored strings may carry escape sequences
    eval::print_runs_text(text, runs);
    std::cout << eval::terminal_safe(text.str());
  }
  return kExitOk;
}

}  // namespace

int run_eval(const GlobalOptions& g, const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? std::cerr : std::cout) << kEvalUsage;
    return args.empty() ? kExitUsage : kExitOk;
  }
  const std::string what = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (what == "variants") return eval_variants(g, rest);
    if (what == "failures") return eval_failures(g, rest);
    if (what == "runs") return eval_runs(g, rest);
    if (what == "prior") return run_eval_prior(g, rest);
  } catch (const store::DatabaseMissing& e) {
    std::cerr << "emmy eval " << what << ": " << e.what() << "\n";
    return kExitUsage;
  }
  std::cerr << "emmy eval: unknown report '" << what
            << "' (reports: variants, failures, runs, prior; see emmy eval --help)\n";
  return kExitUsage;
}

}  // namespace emmy::cli
