// `emmy trace ARGS --json` run by the frontend tests that compare structural keys across
// frontends: the distinct kernels of the default grouping, key -> name.
#pragma once

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace emmy::testing {

inline std::map<std::string, std::string> traced_kernels(const std::string& emmy,
                                                         const std::string& args) {
  std::string cmd = emmy + " trace " + args + " --json 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run " + cmd);
  std::string text;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) text.append(buf, n);
  int rc = pclose(pipe);
  if (rc != 0) throw std::runtime_error(cmd + " failed:\n" + text);
  std::map<std::string, std::string> out;
  nlohmann::json report = nlohmann::json::parse(text);  // kept: at() returns into it
  for (const auto& d : report.at("distinct"))
    out[d.at("key").get<std::string>()] = d.at("name").get<std::string>();
  return out;
}

}  // namespace emmy::testing
