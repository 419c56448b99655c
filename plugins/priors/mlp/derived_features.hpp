// Inputs of the mlp prior that relate the knobs to the problem, so that what the net learns on
// one kernel carries over to kernels of other shapes: how many tiles (blocks, tasks) a tile
// shape makes of M x N, how many waves those are over the device's parallel units and how full
// the last one is, the work padded tiles waste, the bytes a tile moves per k-step and how many
// steps it takes, the work per thread, shared memory per block and the blocks per SM it allows,
// a tile's arithmetic intensity, whether the vector width divides the row.
//
// The template is the kernel's op class (matmul, attention, pointwise, reduction; cublaslt has
// no tile knobs); the backend is told by its knob names (the cuda templates have warps, block,
// stages, ...; the cpu ones threads, mr, rows_per_task, ...), so rows of both backends can share
// a reservoir. Dimensions come from the summary shape and the FLOPs (the tuner passes the output
// shape: K of a matmul is FLOPs / (2 batch M N)).
//
// Partial assignments: when any knob is undecided (listed missing) the knob-dependent inputs are
// zero and the `known` input is 0; the trainer masks rows the same way (trainer.hpp), so the net
// learns what an undecided configuration averages to.
#pragma once

#include <map>
#include <set>
#include <string>

#include "emmy/prior.hpp"

namespace emmy::priors {

// What the derived inputs need to know of the device: the cuda figures are the H100/H200's
// (mlp options `sms`, `smem_kib_per_sm`); the cpu's parallel units are the `threads` knob.
struct DeviceFacts {
  double sms = 132;
  double smem_per_sm = 228.0 * 1024;
  double threads_per_sm = 2048;
  double blocks_per_sm = 32;
};

// Problem dimensions read from the features, per template (all >= 1 once known).
struct ProblemDims {
  double m = 0, n = 0, k = 0;  // matmul M N K; attention Sq D Skv; rows, cols, reduced length
  double batch = 1;            // matmul/attention leading dims (heads included)
  double elem = 4;             // bytes per element
  // A gated matmul (SwiGLU in the product's epilogue: silu(x W_gate) * (x W_up), one product of
  // 2n columns written as n): its flops are twice a plain product's of the same output, so K
  // read as a plain product's would be 2K. Told by its bytes (problem_dims).
  bool gated = false;
};

enum class Backend { unknown, cpu, cuda };

// The backend whose template has these knob names.
Backend backend_of(const std::set<std::string>& knob_names);
ProblemDims problem_dims(const KernelFeatures& f);

// The knob-dependent figures, before scaling (tests check them on known shapes).
struct TileFigures {
  bool known = false;          // all knobs it needs decided, and a template it understands
  double items = 0;            // tiles / blocks / tasks
  double units = 1;            // items that run at once (SMs x blocks per SM, or threads)
  double waves = 0;            // items / units
  double wave_efficiency = 0;  // items / (ceil(waves) * units)
  double padding = 1;          // padded work / real work (>= 1)
  double step_bytes = 0;       // bytes an item loads per step (a k-step, a kv tile, a vector chunk)
  double steps = 0;            // steps per item
  double per_thread = 0;       // outputs (or elements) per thread
  double smem_bytes = 0;       // shared memory per block (cuda)
  double blocks_per_sm = 0;    // occupancy (cuda)
  double intensity = 0;        // FLOPs per byte a tile loads
  double working_set = 0;      // bytes a tile keeps live (cpu: cache fit)
  bool aligned = true;         // the vector width divides the row
};

TileFigures tile_figures(const KernelFeatures& f, const std::map<std::string, double>& knobs,
                         Backend backend, const DeviceFacts& device);

constexpr int kDerivedWidth = 20;
constexpr int kDerivedKnownInput = 7;  // the first knob-dependent input: 1 when computed

// Writes kDerivedWidth inputs. `names` are all knob names (decided and undecided) of the
// assignment; `any_missing` whether some are undecided.
void encode_derived(const KernelFeatures& f, const std::map<std::string, double>& knobs,
                    const std::set<std::string>& names, bool any_missing, const DeviceFacts& device,
                    float* out);

}  // namespace emmy::priors
