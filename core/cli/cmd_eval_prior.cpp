// Placeholder until `emmy eval prior` lands.
#include <iostream>

#include "cli/commands.hpp"

namespace emmy::cli {
int run_eval_prior(const GlobalOptions&, const std::vector<std::string>&) {
  std::cerr << "emmy eval prior: not built yet\n";
  return 1;
}
}  // namespace emmy::cli
