// Placeholder until the plugins command lands.
#include <iostream>

#include "cli/commands.hpp"

namespace emmy::cli {
int run_plugins(const GlobalOptions&, const std::vector<std::string>&) {
  std::cerr << "emmy plugins: not built yet\n";
  return 1;
}
}  // namespace emmy::cli
