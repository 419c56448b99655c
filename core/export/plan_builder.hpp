// From a deployed program (graph + grouping with templates and knobs) to an export's plan: the
// kernels in launch order, one buffer per value that crosses a kernel's boundary, the graph's
// inputs and outputs by name. Backend-neutral; the backend's library supplies the symbols.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "emmy/ir.hpp"
#include "emmy/runtime_plan.hpp"

namespace emmy::exporter {

// The grouping's kernels in an order where each comes after the kernels producing its inputs
// (the grouping's order among ready ones). Throws emmy::Error on a cycle.
ir::Grouping launch_order(const ir::Graph& g, const ir::Grouping& grouping);

// The slice a backend builds an export's library from: the whole graph, its kernels in
// launch_order, every node its own origin.
ir::Slice program_slice(const ir::Graph& g, const ir::Grouping& grouping);

// The plan's buffers, kernels (in `ordered`'s order, kernel i calling symbol(i) with its
// ir::boundary inputs and outputs), inputs and outputs, and the graph's bytes. Buffer names: a
// graph input's node name ("input<i>" when it has none, ".<n>" added to a repeated one), a graph
// output's node name unless an input or an earlier output has it ("output<i>" then). Throws
// emmy::Error for a graph an export cannot hold (an output that is an input or a constant).
runtime::PlanData plan_data(const ir::Graph& g, const ir::Grouping& ordered,
                            const std::function<std::string(size_t)>& symbol);

}  // namespace emmy::exporter
