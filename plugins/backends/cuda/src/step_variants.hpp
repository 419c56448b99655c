// The configurations a library step's library describes beside the one it ran (emmy/cuda_step.h,
// PREFIX_describe's lines after the first), read from the description the worker returns with a
// measurement (wire.hpp) into MeasureResult::variants (emmy/backend.hpp) for the search's prior.
#pragma once

#include <string>
#include <vector>

#include "emmy/backend.hpp"

namespace emmy::cuda {

// Every line of `description` that holds " | " (or ends in " |": knobs without facts),
// "knob=value ... | fact=value ...": the template's knobs on the left, the library's facts on the
// right, each value a number (std::from_chars, the whole token, finite). A token that is not
// NAME=NUMBER is skipped, as is a line with no knob left; other lines (the step's own first line,
// "name=value" pairs without a bar) are not variants.
std::vector<KnobFacts> parse_step_variants(const std::string& description);

}  // namespace emmy::cuda
