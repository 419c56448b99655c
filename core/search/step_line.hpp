// One line per search step, as `emmy tune -v` prints them (the user's run description: "-v prints
// one line per step of the search instead of the live progress bar").
#pragma once

#include <string>

#include "search/candidate.hpp"

namespace emmy::search {

// e.g. "step 12  tile_m=64 tile_n=32  183.20 us  best 150.10 us  3 since best"
//      "step 13  tile_m=128 tile_n=32  FAILED (build_error)  best 150.10 us  4 since best"
// A cached result is marked "(cached)", a replayed path "(replayed)".
std::string format_step(const StepInfo& s);

}  // namespace emmy::search
