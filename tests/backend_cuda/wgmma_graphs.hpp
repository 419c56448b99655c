// What the wgmma tests (codegen here, reference on the GPU) share: the knobs of a wgmma=1 tile
// and a two-kernel program of wgmma linears.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "emmy/ir.hpp"

namespace emmy::cuda::wgmma_test {

// Matmul knobs with wgmma=1; warps 0 = 4 per 64 rows of tile_m (one warpgroup each).
std::map<std::string, double> wgmma(int64_t tile_m, int64_t tile_n, int64_t stages,
                                    int64_t tile_k = 64, int64_t warps = 0);

// Matmul knobs with wgmma=2 (a producer warpgroup besides `warps` consumers; warps 0 = 4 per 64
// rows of tile_m), K split over `splits` blocks, clusters of `cluster` blocks sharing B.
std::map<std::string, double> specialized(int64_t tile_m, int64_t tile_n, int64_t stages,
                                          int64_t splits = 1, int64_t tile_k = 64,
                                          int64_t warps = 0, int64_t cluster = 1);

// `knobs` with `extra`'s values set (e.g. {{"staged", 1}} or {{"persistent", 1}}).
std::map<std::string, double> with_knobs(std::map<std::string, double> knobs,
                                         const std::map<std::string, double>& extra);

// Each of `tiles` with `extra`'s values set, appended to `knobs` (e.g. {{"staged", 1}}: the
// epilogue through shared memory).
void add_with(std::vector<std::map<std::string, double>>& knobs,
              const std::vector<std::map<std::string, double>>& tiles,
              const std::map<std::string, double>& extra);

// Each of `tiles` as resident blocks taking the tiles in turn (persistent=1), with either
// epilogue (staged 0, then 1), appended to `knobs`.
void add_persistent(std::vector<std::map<std::string, double>>& knobs,
                    const std::vector<std::map<std::string, double>>& tiles);
// Each of `tiles` (warps 8, tile_m 64) as persistent=1 pingpong=1: two consumer warpgroups of
// their own tiles taking turns, with either epilogue (staged 0 and 1).
void add_pingpong(std::vector<std::map<std::string, double>>& knobs,
                  const std::vector<std::map<std::string, double>>& tiles);

// Two chained bf16 linears (x @ w1^T, then @ w2^T), each a wgmma=1 kernel, as one slice: the
// tuner's assembled program, whose modules share one tensor-map table.
ir::Slice two_wgmma_linears(int64_t m, int64_t k, int64_t n1, int64_t n2);

}  // namespace emmy::cuda::wgmma_test
