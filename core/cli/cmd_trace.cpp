// Placeholder until the trace command lands.
#include <iostream>

#include "cli/commands.hpp"

namespace emmy::cli {
int run_trace(const GlobalOptions&, const std::vector<std::string>&) {
  std::cerr << "emmy trace: not built yet\n";
  return 1;
}
}  // namespace emmy::cli
