// Placeholder until the eval command lands.
#include <iostream>

#include "cli/commands.hpp"

namespace emmy::cli {
int run_eval(const GlobalOptions&, const std::vector<std::string>&) {
  std::cerr << "emmy eval: not built yet\n";
  return 1;
}
}  // namespace emmy::cli
