// Placeholder until the tune command lands.
#include <iostream>

#include "cli/commands.hpp"

namespace emmy::cli {
int run_tune(const GlobalOptions&, const std::vector<std::string>&) {
  std::cerr << "emmy tune: not built yet\n";
  return 1;
}
}  // namespace emmy::cli
