// `emmy plugins`: what discovery found (from manifests alone), as a table or JSON, and
// `--check NAME`, which loads one plugin, creates its object with default options and destroys it.
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "emmy/status.hpp"
#include "plugin_host/plugin_host.hpp"
#include "plugin_host/template_check.hpp"

#ifndef EMMY_INSTALL_PLUGIN_DIR
#define EMMY_INSTALL_PLUGIN_DIR ""
#endif

namespace emmy::cli {
namespace {

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string forks_text(const PluginRecord& r) {
  std::vector<std::string> items;
  for (const auto& f : r.forks) items.push_back(f.name + " (" + f.kind + ")");
  return items.empty() ? "-" : join(items, ", ");
}

std::string knobs_text(const PluginRecord& r) {
  std::vector<std::string> items;
  for (const auto& k : r.knobs) items.push_back(k.name);
  return items.empty() ? "-" : join(items, ", ");
}

std::string or_dash(const std::string& s) {
  return s.empty() ? "-" : s;
}

void print_table(const PluginHost& host, const std::vector<const PluginRecord*>& shown) {
  std::cout << "Search path:\n";
  for (const auto& d : host.search_dirs()) {
    std::string note = !d.exists    ? "not found"
                       : d.repeated ? "same folder as above, skipped"
                                    : std::to_string(d.manifests) + " manifest(s)";
    std::cout << "  " << d.path << "  (" << note << ")\n";
  }
  std::cout << "\n";
  if (shown.empty()) {
    std::cout << "No plugins found.\n";
    return;
  }
  const std::vector<std::string> head = {"NAME",  "KIND",  "VERSION", "STATUS",
                                         "FORKS", "KNOBS", "PATH"};
  std::vector<std::vector<std::string>> rows;
  for (const auto* r : shown)
    rows.push_back({or_dash(r->name), or_dash(r->kind), or_dash(r->version),
                    r->ok ? "ok" : "refused", forks_text(*r), knobs_text(*r), r->manifest_path});
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    std::cout << line << "\n";
  };
  print_row(head);
  for (size_t i = 0; i < rows.size(); ++i) {
    print_row(rows[i]);
    if (!shown[i]->ok)
      std::cout << "    refused: " << shown[i]->reason << "\n";
    else if (!shown[i]->extends.empty())
      std::cout << "    extends the " << shown[i]->extends << " backend\n";
  }
}

nlohmann::json to_json(const PluginRecord& r) {
  nlohmann::json forks = nlohmann::json::array(), knobs = nlohmann::json::array(),
                 options = nlohmann::json::array();
  for (const auto& f : r.forks)
    forks.push_back({{"name", f.name}, {"kind", f.kind}, {"knobs", f.knobs}});
  for (const auto& k : r.knobs) knobs.push_back({{"name", k.name}, {"values", k.values}});
  for (const auto& o : r.options)
    options.push_back({{"name", o.name}, {"default", o.default_value}, {"help", o.help}});
  return {{"name", r.name},
          {"kind", r.kind},
          {"version", r.version},
          {"abi_version", r.abi_version},
          {"status", r.ok ? "ok" : "refused"},
          {"reason", r.reason},
          {"description", r.description},
          {"forks", forks},
          {"knobs", knobs},
          {"options", options},
          {"after", r.after},
          {"before", r.before},
          {"extends", r.extends},
          {"default_pipeline", r.default_pipeline},
          {"entry_symbol", r.entry_symbol},
          {"manifest", r.manifest_path},
          {"library", r.library_path}};
}

void print_json(const PluginHost& host, const std::vector<const PluginRecord*>& shown) {
  nlohmann::json dirs = nlohmann::json::array(), plugins = nlohmann::json::array();
  for (const auto& d : host.search_dirs())
    dirs.push_back({{"path", d.path},
                    {"real_path", d.real_path},
                    {"exists", d.exists},
                    {"repeated", d.repeated},
                    {"manifests", d.manifests}});
  for (const auto* r : shown) plugins.push_back(to_json(*r));
  nlohmann::json out = {{"search_path", dirs}, {"plugins", plugins}};
  // Manifest text is not guaranteed UTF-8: replace what is not, never throw.
  std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

// Loads NAME, creates its object (with `options`) and destroys it again.
int check(PluginHost& host, const std::string& name, const PluginOptions& options) {
  const PluginRecord* r = host.find(name);
  if (!r) {
    std::cerr << "emmy plugins: no plugin named '" << name
              << "' in the search path (emmy plugins lists what was found)\n";
    return kExitFailure;
  }
  try {
    if (r->kind == "frontend")
      host.make_frontend(name, options).reset();
    else if (r->kind == "pass")
      host.make_pass(name, options).reset();
    else if (r->kind == "backend")
      host.make_backend(name, options).reset();
    else if (r->kind == "prior")
      host.make_prior(name, options).reset();
    else if (r->kind == "template" && r->ok) {
      // The conformance checks of a template, its backend taking it included.
      TemplateCheck t = check_template(host, *r, options);
      if (!t.problem.empty()) throw Error(t.problem);
      std::cout << name << ": ok (template " << r->version << ", loaded " << r->library_path
                << ", created and destroyed; " << t.note << ")\n";
      return kExitOk;
    } else
      host.load(name, r->kind);  // refused with an unknown kind: load() says why
  } catch (const Error& e) {
    std::cerr << "emmy plugins: " << name << ": " << e.what() << "\n";
    return kExitFailure;
  }
  std::cout << name << ": ok (" << r->kind << " " << r->version << ", loaded " << r->library_path
            << ", created and destroyed)\n";
  return kExitOk;
}

}  // namespace

int run_plugins(const GlobalOptions& g, const std::vector<std::string>& args) {
  po::options_description desc("emmy plugins options");
  desc.add_options()("help,h", "this text")("json", "print JSON instead of a table")(
      "kind", po::value<std::string>(),
      "list only plugins of this kind (frontend, pass, backend, prior, template)")(
      "check", po::value<std::string>(),
      "load plugin NAME, create its object and destroy it; prints ok or the error (exit 1)")(
      "option", po::value<std::vector<std::string>>()->composing(),
      "NAME=VALUE passed to the plugin's create() with --check (repeatable)");
  po::positional_options_description pos;
  po::variables_map vm = parse_layered(g, "plugins", desc, pos, args);
  if (vm.count("help")) {
    print_help(
        "emmy [--plugin-path DIR]... plugins [--json] [--kind KIND] [--check NAME [--option "
        "K=V]...]",
        desc,
        "Lists every plugin manifest found in the search path (the build tree's or install\n"
        "prefix's lib/emmy/plugins beside the binary, " EMMY_INSTALL_PLUGIN_DIR
        ",\n--plugin-path folders, EMMY_PLUGIN_PATH) with its status; a refused plugin shows why.\n"
        "Nothing is loaded except with --check.");
    return kExitOk;
  }

  PluginHost host;
  host.discover(default_plugin_paths(g.argv0, EMMY_INSTALL_PLUGIN_DIR, g.plugin_paths));

  if (vm.count("check")) {
    PluginOptions options;
    if (vm.count("option")) {
      for (const auto& kv : vm["option"].as<std::vector<std::string>>()) {
        auto eq = kv.find('=');
        if (eq == std::string::npos || eq == 0)
          throw po::error("--option '" + kv + "' is not NAME=VALUE");
        options[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
    }
    return check(host, vm["check"].as<std::string>(), options);
  }

  std::vector<const PluginRecord*> shown;
  const std::string kind = vm.count("kind") ? vm["kind"].as<std::string>() : "";
  if (!kind.empty() && kind_code(kind) == 0)
    throw po::error("--kind '" + kind + "' is not one of " + std::string(kKnownKindsText));
  for (const auto& r : host.records())
    if (kind.empty() || r.kind == kind) shown.push_back(&r);
  if (vm.count("json"))
    print_json(host, shown);
  else
    print_table(host, shown);
  return kExitOk;
}

}  // namespace emmy::cli
