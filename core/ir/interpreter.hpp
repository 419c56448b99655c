// The reference interpreter: evaluates any graph (or slice) on the CPU. It is the oracle every
// backend checks its candidates against (docs/DESIGN.md, Backends and measurement).
//
// Every op computes in double precision (matmuls and reductions accumulate in f64) and rounds
// each node's result to the node's dtype, as aten's CPU kernels compute in a wider "opmath"
// type and round once. Integers are carried exactly up to 2^53.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "emmy/ir.hpp"

namespace emmy::ir {

// A dense tensor in host memory: row-major, contiguous; f16/bf16 stored as their 16-bit
// patterns, bool as one byte (0 or 1).
struct HostTensor {
  TensorType type;
  std::vector<unsigned char> data;
};

// Values of a tensor as doubles (decoding f16/bf16/ints/bool), and back (rounding each value to
// the dtype: round-to-nearest-even for floats, truncation toward zero and wrap-around for
// integers, nonzero -> true for bool).
std::vector<double> to_doubles(const HostTensor& t);
HostTensor from_doubles(const TensorType& type, const std::vector<double>& values);
// One value rounded to what `dtype` can hold (the same rounding as from_doubles).
double round_to(DType dtype, double value);
// Every value rounded in place, as round_to rounds one (across the cores when many).
void round_all(DType dtype, std::vector<double>& values);

// Evaluates `g`. `inputs` are given in g.inputs() order and must match their types; returns
// one tensor per g.outputs entry. Throws emmy::Error (naming the node) on an input mismatch,
// an embedding index out of range, an integer division by zero or an invalid graph.
std::vector<HostTensor> evaluate(const Graph& g, const std::vector<HostTensor>& inputs);
// The same, calling `before_node` before each node is computed. What it throws ends the
// evaluation and reaches the caller unchanged: emmy tune stops a whole model's reference (minutes
// at B=8) there on Ctrl-C instead of finishing it first.
std::vector<HostTensor> evaluate(const Graph& g, const std::vector<HostTensor>& inputs,
                                 const std::function<void()>& before_node);

// Deterministic random inputs for g.inputs() (same seed, same tensors on every machine):
// floats uniform in [-1, 1); integers used as embedding indices in [0, rows), other integers
// in [-9, 9] without 0 (safe divisors); bool inputs of role "causal_mask" lower-triangular
// (true where column <= row), other bool inputs random (3/4 true) with the first element of
// every last-dimension row true, so no softmax row is fully masked. Each input is drawn from its
// own stream (seed and position), so the inputs are made on every core at once, and the same
// whatever the number of cores. `before_input` runs before each input is made (on any of those
// threads; what it throws is rethrown here once they stop): a whole model's weights are seconds
// to make, which a Ctrl-C should not have to wait for.
std::vector<HostTensor> random_inputs(const Graph& g, uint64_t seed);
std::vector<HostTensor> random_inputs(const Graph& g, uint64_t seed,
                                      const std::function<void()>& before_input);

// "" when `actual` matches `expected` within the dtype's tolerance (|a - e| <= atol + rtol*|e|:
// f32 1e-4, f16 5e-3, bf16 2e-2, f64 1e-9; integers and bool exactly; NaN matches NaN, an
// infinity matches the same infinity), else a message with the mismatch count, the worst index
// and both values there. Types (dtype and shape) must agree.
std::string compare(const HostTensor& expected, const HostTensor& actual);
// The same, with the tolerance widened to `precision`'s where that is looser: a value computed
// in bf16 and then cast to f32 carries bf16's error (use lowest_precision of the graph).
std::string compare(const HostTensor& expected, const HostTensor& actual, DType precision);
// ||actual - expected|| / ||expected|| over all elements (infinite on a size mismatch or NaN):
// the check for a whole assembled graph, whose error compounds over many kernels.
double relative_rms_error(const HostTensor& expected, const HostTensor& actual);
// Evaluates `g` as `evaluate` does but without rounding any floating result to its dtype: the
// graph in exact arithmetic (to double precision) on the same inputs. Floating outputs come back
// as f64 tensors of the same shapes.
std::vector<HostTensor> evaluate_exact(const Graph& g, const std::vector<HostTensor>& inputs,
                                       const std::function<void()>& before_node = {});

// How much worse than the graph's own rounding a kernel may be against exact arithmetic, as an
// RMS and at its worst element (compare_accuracy).
inline constexpr double kAccuracyRmsFactor = 1.25;
inline constexpr double kAccuracyMaxFactor = 1.5;
// "" when `actual` is about as close to exact arithmetic (`exact`, from evaluate_exact) as the
// graph's own rounding (`expected`, from evaluate): its RMS error against `exact` at most
// kAccuracyRmsFactor times the graph's and its worst error at most kAccuracyMaxFactor times the
// graph's worst; non-finite values must equal the graph's. For a kernel that rounds differently
// from the graph by design (a product absorbing its A's RMSNorm rounds x * w once where the graph
// rounds x * r and then its product with w), where per-element tolerance fails on outputs that
// cancel though the kernel is the more accurate one. A fault moves some element further from
// exact arithmetic than the graph's own worst rounding, or the bulk of them further than its
// RMS, and fails. Else a message saying which.
std::string compare_accuracy(const HostTensor& expected, const HostTensor& actual,
                             const HostTensor& exact);
// The floating dtype with the fewest mantissa bits any node of `g` produces (f64 if none).
DType lowest_precision(const Graph& g);

}  // namespace emmy::ir

namespace emmy {
using ir::compare;
using ir::evaluate;
using ir::HostTensor;
using ir::random_inputs;
}  // namespace emmy
