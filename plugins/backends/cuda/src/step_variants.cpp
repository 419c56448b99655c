#include "step_variants.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <sstream>

namespace emmy::cuda {

namespace {

// NAME=NUMBER tokens of `text` (separated by white space) into `into`; others skipped.
void read_pairs(const std::string& text, std::map<std::string, double>& into) {
  std::istringstream in(text);
  for (std::string token; in >> token;) {
    const size_t eq = token.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == token.size()) continue;
    // std::from_chars: the C locale's numbers whatever the process's locale.
    const char* first = token.data() + eq + 1;
    const char* last = token.data() + token.size();
    double v = 0;
    const auto [end, error] = std::from_chars(first, last, v);
    if (error != std::errc() || end != last || !std::isfinite(v)) continue;
    into[token.substr(0, eq)] = v;
  }
}

}  // namespace

std::vector<KnobFacts> parse_step_variants(const std::string& description) {
  std::vector<KnobFacts> variants;
  std::istringstream lines(description);
  for (std::string line; std::getline(lines, line);) {
    // " | " splits; a line ending in " |" is knobs with no facts.
    line.erase(line.find_last_not_of(" \t\r") + 1);
    size_t bar = line.find(" | ");
    if (bar == std::string::npos && line.size() >= 2 && line.ends_with(" |")) bar = line.size() - 2;
    if (bar == std::string::npos) continue;
    KnobFacts v;
    read_pairs(line.substr(0, bar), v.knobs);
    if (v.knobs.empty()) continue;
    read_pairs(line.substr(std::min(bar + 3, line.size())), v.facts);
    variants.push_back(std::move(v));
  }
  return variants;
}

}  // namespace emmy::cuda
