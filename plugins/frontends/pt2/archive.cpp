#include "archive.hpp"

#include "emmy/status.hpp"

namespace emmy::pt2 {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

Archive::Archive(const std::string& path) : zip_(path) {
  // torch.export.save writes every entry under one top folder named after the file.
  for (const auto& name : zip_.names()) {
    auto slash = name.find('/');
    if (slash == std::string::npos) continue;
    std::string top = name.substr(0, slash + 1);
    if (zip_.contains(top + "archive_format")) {
      prefix_ = top;
      break;
    }
  }
  if (prefix_.empty())
    throw Error(
        "'" + path + "' is a ZIP but not a torch.export archive: no <name>/archive_format entry " +
        "(a TorchScript .pt file goes to the torchscript frontend; save with torch.export.save)");
  std::string format = trim(zip_.read(prefix_ + "archive_format"));
  if (format != kArchiveFormat)
    throw Error("'" + path + "' has archive format '" + format + "'; the pt2 frontend reads '" +
                kArchiveFormat + "' (torch.export.save)");
  std::string version = zip_.contains(prefix_ + "archive_version")
                            ? trim(zip_.read(prefix_ + "archive_version"))
                            : "";
  if (version != std::to_string(kArchiveVersion))
    throw Error("'" + path + "' has .pt2 archive version '" + version +
                "'; the pt2 frontend reads version " + std::to_string(kArchiveVersion) +
                " (PyTorch 2.11's torch.export.save)");
  if (zip_.contains(prefix_ + "byteorder")) {
    std::string order = trim(zip_.read(prefix_ + "byteorder"));
    if (order != "little")
      throw Error("'" + path + "' stores its tensors " + order +
                  "-endian; the pt2 frontend reads little-endian ones");
  }

  std::string model = prefix_ + "models/model.json";
  if (!zip_.contains(model)) {
    std::string found;
    for (const auto& name : zip_.names())
      if (name.rfind(prefix_ + "models/", 0) == 0 && name.size() > 5 &&
          name.substr(name.size() - 5) == ".json")
        found += (found.empty() ? "" : ", ") + name;
    throw Error("'" + path + "' has no " + model +
                (found.empty() ? std::string(" (no exported program in the archive)")
                               : " (it holds " + found +
                                     "; the pt2 frontend reads the program named 'model')"));
  }
  try {
    program_ = nlohmann::json::parse(zip_.read(model));
  } catch (const nlohmann::json::exception& e) {
    throw Error("'" + path + "': " + model + " is not valid JSON: " + e.what());
  }
  if (!program_.is_object() || !program_.contains("schema_version") ||
      !program_.contains("graph_module"))
    throw Error("'" + path + "': " + model +
                " is not a serialized ExportedProgram (no schema_version/graph_module)");
  const auto& sv = program_["schema_version"];
  int major = sv.value("major", -1), minor = sv.value("minor", -1);
  std::string written_by = " (written by PyTorch " + torch_version() + ")";
  if (major != kSchemaMajor || minor > kSchemaMinorMax || minor < 0)
    throw Error(
        "'" + path + "' uses torch.export schema version " + std::to_string(major) + "." +
        std::to_string(minor) + written_by + "; the pt2 frontend reads schema " +
        std::to_string(kSchemaMajor) + ".0 to " + std::to_string(kSchemaMajor) + "." +
        std::to_string(kSchemaMinorMax) +
        " (PyTorch up to 2.11): export the model with a PyTorch that writes a schema it reads");

  read_tensor_config(prefix_ + "data/weights/model_weights_config.json", prefix_ + "data/weights/",
                     weights_);
  read_tensor_config(prefix_ + "data/constants/model_constants_config.json",
                     prefix_ + "data/constants/", constants_);
}

std::string Archive::torch_version() const {
  auto it = program_.find("torch_version");
  return it != program_.end() && it->is_string() ? it->get<std::string>() : "unknown";
}

void Archive::read_tensor_config(const std::string& entry, const std::string& dir,
                                 std::map<std::string, StoredTensor>& out) {
  if (!zip_.contains(entry)) return;  // a program without weights or constants
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(zip_.read(entry));
  } catch (const nlohmann::json::exception& e) {
    throw Error("'" + path() + "': " + entry + " is not valid JSON: " + e.what());
  }
  if (!config.contains("config") || !config["config"].is_object())
    throw Error("'" + path() + "': " + entry + " has no 'config' object");
  for (const auto& [fqn, item] : config["config"].items()) {
    if (item.value("use_pickle", false))
      throw Error("'" + path() + "': '" + fqn +
                  "' is stored as a pickle, which the pt2 frontend never reads " +
                  "(no code from the file is run)");
    out[fqn] = StoredTensor{dir + item.value("path_name", ""),
                            item.value("tensor_meta", nlohmann::json::object())};
  }
}

}  // namespace emmy::pt2
