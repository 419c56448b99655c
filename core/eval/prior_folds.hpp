// Leave-kernels-out cross-validation of a prior on a table of measured rows (`emmy eval prior
// --data`): kernels are dealt into folds; for each fold a fresh prior learns every other fold's
// rows and predicts the fold's, so every prediction is for a kernel the prior never measured.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "emmy/prior.hpp"

namespace emmy::prior_eval {

// The fold of each kernel name: names sorted by a hash of the name (deterministic, mixing
// op classes), then dealt round-robin. Same names and fold count, same folds, on any machine.
std::vector<int> kernel_folds(const std::vector<std::string>& kernel_of_row, int folds);

struct CrossValidated {
  std::vector<double> predicted;  // per row, by the prior that never saw the row's kernel
  double train_s = 0;             // training time over all folds
};

// Throws emmy::Error when a fresh prior cannot learn a fold's rows (its message).
// `for_rank` (optional): a fresh prior that predicts rank-regime times (the mlp's option
// predict_regime=rank); it loads each fold's trained state and predicts the fold's rank rows,
// so that rows of both regimes are each predicted for their own (Prior::predict takes none).
CrossValidated cross_validate(const std::function<std::shared_ptr<Prior>()>& fresh_prior,
                              const std::vector<PriorRow>& rows,
                              const std::vector<std::string>& kernel_of_row, int folds,
                              const std::function<std::shared_ptr<Prior>()>& for_rank = {});

}  // namespace emmy::prior_eval
