// `emmy prior train`: makes a pretrained prior to ship (store/pretrained_prior.hpp) from tables
// of measured rows (store/prior_table.hpp): a fresh prior with the manifest's defaults, the
// given --seed and --prior-option values learns every row in one batch, in the order of the
// files, and its state is written with a header naming the backend and architecture it is for.
// The prior plugins train deterministically (the mlp: one seeded generator, one thread), so the
// same tables, seed and options give the same file, byte for byte, on one machine.
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/plugin_options.hpp"
#include "plugin_host/plugin_host.hpp"
#include "store/pretrained_prior.hpp"
#include "store/prior_table.hpp"

#ifndef EMMY_INSTALL_PLUGIN_DIR
#define EMMY_INSTALL_PLUGIN_DIR ""
#endif

namespace emmy::cli {
namespace {

int run_prior_train(const GlobalOptions& g, const std::vector<std::string>& args) {
  po::options_description desc("emmy prior train options");
  desc.add_options()("help,h", "this text")(
      "data", po::value<std::vector<std::string>>()->multitoken(),
      "JSON-lines tables of measured rows (bench/prior/data/*.jsonl; emmy eval prior --export)")(
      "backend", po::value<std::string>(), "the backend the rows were measured on (cpu, cuda)")(
      "arch", po::value<std::string>(),
      "the architecture they were measured on: x86_64 or aarch64 for cpu, the GPU's model for "
      "cuda (h200: a word of the cuda backend's device name)")("out", po::value<std::string>(),
                                                               "the file to write")(
      "prior", po::value<std::string>()->default_value("mlp"), "the prior plugin to train")(
      "seed", po::value<uint64_t>()->default_value(1), "the prior's seed option")(
      "prior-option", po::value<std::vector<std::string>>(),
      "KEY=VALUE for the prior (repeatable); the file records none of them but the seed, so "
      "write them beside the command that made it");
  po::positional_options_description pos;
  auto vm = parse_layered(g, "prior.train", desc, pos, args);
  if (vm.count("help")) {
    print_help(
        "emmy prior train --data TABLE... --backend NAME --arch NAME --out FILE "
        "[--prior mlp] [--seed N]",
        desc,
        "Trains a fresh prior on the tables' rows and writes its state as a pretrained "
        "prior for that backend\nand architecture. Installed beside the prior plugin "
        "(lib/emmy/plugins/<prior>-pretrained-<backend>-<arch>.ckpt),\na tune whose "
        "$EMMY_HOME has no checkpoint of the prior starts from it.");
    return kExitOk;
  }
  for (const char* required : {"data", "backend", "arch", "out"})
    if (!vm.count(required)) throw po::error(std::string("--") + required + " is required");
  const auto files = vm["data"].as<std::vector<std::string>>();
  const std::string prior_name = vm["prior"].as<std::string>();
  OptionsByPlugin given;
  if (vm.count("prior-option"))
    add_option_flags(given, "--prior-option", vm["prior-option"].as<std::vector<std::string>>(),
                     false, prior_name);
  PluginOptions options(given[prior_name].begin(), given[prior_name].end());
  options["seed"] = std::to_string(vm["seed"].as<uint64_t>());

  store::PretrainedPrior out;
  out.prior = prior_name;
  out.backend = vm["backend"].as<std::string>();
  out.arch = vm["arch"].as<std::string>();
  out.seed = vm["seed"].as<uint64_t>();
  std::vector<PriorRow> rows;
  std::set<std::string> kernels;
  try {
    for (const auto& file : files) {
      for (auto& t : store::read_prior_table(file)) {
        kernels.insert(t.kernel);
        rows.push_back(std::move(t.row));
      }
      // The name as given (relative to the repository in the documented command): the file
      // says what it was made from without naming this machine's folders.
      out.data += (out.data.empty() ? "" : " ") + file;
    }
  } catch (const std::exception& e) {
    std::cerr << "emmy prior train: " << e.what() << "\n";
    return kExitUsage;
  }
  if (rows.empty()) {
    std::cerr << "emmy prior train: the tables hold no rows\n";
    return kExitUsage;
  }
  out.rows = rows.size();

  PluginHost host;
  host.discover(default_plugin_paths(g.argv0, EMMY_INSTALL_PLUGIN_DIR, g.plugin_paths));
  std::shared_ptr<Prior> prior;
  try {
    prior = host.make_prior(prior_name, options);
  } catch (const Error& e) {
    throw po::error(e.what());  // an unknown prior or option: the user's input
  }
  if (Status s = prior->observe(rows); !s.ok()) {
    std::cerr << "emmy prior train: prior " << prior_name << " could not learn: " << s.message()
              << "\n";
    return kExitFailure;
  }
  if (Status s = prior->save(out.state); !s.ok()) {
    std::cerr << "emmy prior train: prior " << prior_name << " could not save: " << s.message()
              << "\n";
    return kExitFailure;
  }
  // What a tune will do with it: load it into a fresh prior.
  if (Status s = host.make_prior(prior_name)->load(out.state); !s.ok()) {
    std::cerr << "emmy prior train: prior " << prior_name
              << " cannot load its own state: " << s.message() << "\n";
    return kExitFailure;
  }
  try {
    store::write_pretrained_prior(vm["out"].as<std::string>(), out);
  } catch (const Error& e) {
    std::cerr << "emmy prior train: " << e.what() << "\n";
    return kExitFailure;
  }
  std::cout << "trained " << prior_name << " (seed " << out.seed << ") on " << rows.size()
            << " rows of " << kernels.size() << " kernels for " << out.backend << " " << out.arch
            << ": " << vm["out"].as<std::string>() << " ("
            << std::filesystem::file_size(vm["out"].as<std::string>()) << " bytes; install as "
            << store::pretrained_file_name(prior_name, out.backend, out.arch) << ")\n";
  return kExitOk;
}

}  // namespace

int run_prior(const GlobalOptions& g, const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::cout << "usage: emmy prior train --data TABLE... --backend NAME --arch NAME --out FILE\n"
                 "  train  make a pretrained prior to ship from tables of measured rows\n";
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "train") return run_prior_train(g, {args.begin() + 1, args.end()});
  std::cerr << "emmy prior: unknown subcommand '" << args[0] << "' (train)\n";
  return kExitUsage;
}

}  // namespace emmy::cli
