// Random valid graphs for round-trip and interpreter tests: a seeded generator tries random ops
// on random operands through the Builder and keeps those that inference accepts.
#pragma once

#include <cstdint>

#include "emmy/ir.hpp"

namespace emmy::ir::testing {

Graph random_graph(uint64_t seed, int steps = 30);

}  // namespace emmy::ir::testing
