// The manifests of the build tree's plugin folder and of its example plugins' folder (a template
// there would extend every run of its backend, so the examples are kept apart), which both
// conformance suites run over.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

namespace emmy::conformance {

inline const std::vector<std::string> kPluginDirs = {EMMY_PLUGIN_DIR, EMMY_EXAMPLE_PLUGIN_DIR};

inline std::vector<std::string> in_tree_manifests() {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const std::string& dir : kPluginDirs) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ".emmy-manifest") out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

inline std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = std::filesystem::path(info.param).stem().string();
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s.empty() ? "unnamed" : s;
}

}  // namespace emmy::conformance
