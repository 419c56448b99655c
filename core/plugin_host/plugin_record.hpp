// What discovery knows about one plugin: the fields of its manifest, where it was found, and
// whether the host accepts it (and if not, why, in words that say what to do).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace emmy {

struct ManifestFork {
  std::string name;
  std::string kind;  // "structural" or "in_place"
  std::vector<std::string> knobs;
};

struct ManifestKnob {
  std::string name;
  std::vector<double> values;
};

struct ManifestOption {
  std::string name;
  std::string default_value;
  std::string help;
};

struct PluginRecord {
  // From the manifest (empty where a refused manifest could not be read that far).
  std::string name;
  std::string kind;  // "frontend", "pass", "backend", "prior" or "template"
  std::string version;
  uint32_t abi_version = 0;
  std::string entry_symbol;
  std::string library;  // file name, beside the manifest
  std::string description;
  std::vector<ManifestFork> forks;
  std::vector<ManifestKnob> knobs;
  std::vector<ManifestOption> options;
  std::vector<std::string> after;
  std::vector<std::string> before;
  std::string extends;            // a template plugin's backend ("" for the other kinds)
  bool default_pipeline = false;  // a pass of the default pipeline (docs/PLUGINS.md, Pass order)

  // Where it was found.
  std::string manifest_path;  // absolute
  std::string library_path;   // manifest's folder / library ("" if the manifest names none)

  bool ok = false;
  std::string reason;  // why it was refused ("" when ok)
};

// The plugin kinds, by the names manifests use, and their EmmyPluginKind codes (plugin.hpp).
// kind_code returns 0 for an unknown name; kind_name returns "" for an unknown code.
uint32_t kind_code(std::string_view kind);
std::string_view kind_name(uint32_t code);
// "frontend, pass, backend, prior or template": for messages.
inline constexpr std::string_view kKnownKindsText = "frontend, pass, backend, prior or template";

}  // namespace emmy
