// Helpers for the plugin host tests: a scratch folder per test, manifests written with the
// FlatBuffers builder (the same schema emmy_add_plugin() uses), and file copying.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "emmy/plugin.hpp"
#include "manifest_generated.h"

namespace emmy::test {

namespace fs = std::filesystem;

// A fresh folder under the system temp dir, removed when the test ends.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string leaf = "emmy-plugin-host-" + std::to_string(::getpid()) + "-" +
                       (info ? std::string(info->test_suite_name()) + "." + info->name() : "x");
    for (char& c : leaf)
      if (c == '/') c = '_';
    path_ = fs::temp_directory_path() / leaf;
    fs::remove_all(path_);
    fs::create_directories(path_);
    path_ = fs::canonical(path_);  // discovery reports real paths; so do the tests
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const fs::path& path() const { return path_; }
  fs::path sub(const std::string& name) const {
    fs::create_directories(path_ / name);
    return path_ / name;
  }

 private:
  fs::path path_;
};

struct ManifestSpec {
  std::string name = "made_up";
  std::string kind = "pass";
  std::string version = "0.1.0";
  uint32_t abi_version = EMMY_SDK_ABI_VERSION;
  std::string entry_symbol = EMMY_PLUGIN_ENTRY_SYMBOL;
  std::string library;                                     // default: libemmy_<name>.so
  std::vector<std::pair<std::string, std::string>> forks;  // (kind, name), knob "k_<name>"
  std::string extends;  // template plugins' backend; "" writes none
};

inline std::vector<uint8_t> build_manifest(const ManifestSpec& spec) {
  namespace fbm = emmy::manifest;
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fbm::Fork>> forks;
  std::vector<flatbuffers::Offset<fbm::Knob>> knobs;
  for (const auto& [kind, name] : spec.forks) {
    std::vector<flatbuffers::Offset<flatbuffers::String>> fork_knobs{fbb.CreateString("k_" + name)};
    forks.push_back(fbm::CreateForkDirect(fbb, name.c_str(), kind.c_str(), &fork_knobs));
    std::vector<double> values{1, 2, 4};
    knobs.push_back(fbm::CreateKnobDirect(fbb, ("k_" + name).c_str(), &values));
  }
  std::vector<flatbuffers::Offset<fbm::Option>> options{
      fbm::CreateOptionDirect(fbb, "level", "1", "how hard to try")};
  std::vector<flatbuffers::Offset<flatbuffers::String>> after{fbb.CreateString("fold_views")};
  const std::string library = spec.library.empty() ? "libemmy_" + spec.name + ".so" : spec.library;
  auto root = fbm::CreateManifestDirect(
      fbb, spec.name.c_str(), spec.kind.c_str(), spec.version.c_str(), spec.abi_version,
      spec.entry_symbol.c_str(), library.c_str(), "written by a test", &forks, &knobs, &options,
      &after, nullptr, spec.extends.empty() ? nullptr : spec.extends.c_str());
  fbm::FinishManifestBuffer(fbb, root);
  return {fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()};
}

inline void write_file(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::vector<uint8_t> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Copies a fixture plugin (manifest and library) from `from` into `to`.
inline void copy_plugin(const fs::path& from, const std::string& name, const fs::path& to) {
  fs::copy_file(from / (name + ".emmy-manifest"), to / (name + ".emmy-manifest"),
                fs::copy_options::overwrite_existing);
  fs::copy_file(from / ("libemmy_" + name + ".so"), to / ("libemmy_" + name + ".so"),
                fs::copy_options::overwrite_existing);
}

}  // namespace emmy::test
