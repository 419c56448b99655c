// The matmul template's warp-specialized Hopper loop (knob wgmma=2, matmul_wgmma.hpp).
//
// Why: in the wgmma=1 loop thread 0 of a consumer warp issues every copy and a block barrier per
// k-slice tells it a stage is free, so every slice costs all warps a barrier and the copies
// wait behind thread 0's own products. Here a producer warpgroup (one elected thread) only
// copies: it waits on a stage's "empty" mbarrier, arms its "full" one and issues both TMA
// copies; each consumer warp waits on "full", issues its wgmmas and, once the previous slice's
// products are done (wait_group 1), arrives on that slice's "empty" barrier. No block-wide
// barrier is left in the main loop. With two consumer warpgroups the producer gives registers
// back (setmaxnreg) so that the consumers' accumulators (up to 128 floats) fit.
//
// Split-K (tile.splits > 1): blocks along grid x take (tile column, split) pairs; split s adds
// the k-slices [s * KT / splits, (s + 1) * KT / splits). Products of M = 512 fill only 32 of 132
// SMs with 128 x 128 tiles when N = 1024 (o_proj, down): splitting K is how they fill the GPU.
// The partial tiles are added in split order (the result's bits do not depend on which block
// came first), either inside a cluster of the tile's splits through distributed shared memory
// (kClusterReduction, tile.reduce_in_cluster) or through global scratch by the block that
// counts itself last on the tile's counter (kSplitReduction; the counter is reset by that
// block, scratch being zeroed when allocated).
#include <algorithm>
#include <cstdio>
#include <string>

#include "expr.hpp"
#include "matmul_wgmma.hpp"
#include "module.hpp"

namespace emmy::cuda {

namespace {

// What both loops start with: the ring's buffer, its "full" and "empty" barriers, the wait.
const char* const kRingPreamble =
    R"(extern __shared__ __align__(1024) unsigned char emmy_wgmma_smem[];
__shared__ __align__(8) unsigned long long emmy_full[@STAGES@];
__shared__ __align__(8) unsigned long long emmy_empty[@STAGES@];
// The dynamic buffer is over-allocated by 1024 bytes: its start rounded up to the swizzle period.
const unsigned emmy_base = ((unsigned)__cvta_generic_to_shared(emmy_wgmma_smem) + 1023u) & ~1023u;
const unsigned emmy_full0 = (unsigned)__cvta_generic_to_shared(&emmy_full[0]);
const unsigned emmy_empty0 = (unsigned)__cvta_generic_to_shared(&emmy_empty[0]);
auto emmy_full_at = [&](int s) { return emmy_full0 + 8u * (unsigned)s; };
auto emmy_empty_at = [&](int s) { return emmy_empty0 + 8u * (unsigned)s; };
auto emmy_wait = [](unsigned bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
};
@NORM_DECLS@
)";

const char* const kSpecializedLoop =
    R"(const long long bz = blockIdx.z;
const int emmy_split = (int)(@SPLIT_OF_BLOCK@);
const long long m0 = (long long)blockIdx.y * @BM@LL, n0 = (long long)(@COLUMN_OF_BLOCK@) * @N_STEP@LL;
const int emmy_kt0 = emmy_split * @KT@ / @SPLITS@, emmy_kt1 = (emmy_split + 1) * @KT@ / @SPLITS@;
const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, grp = lane >> 2, tig = lane & 3;
const int emmy_n = emmy_kt1 - emmy_kt0;  // this block's k-slices
@RANK@
if (threadIdx.x == 0) {
  for (int s = 0; s < @STAGES@; ++s) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(emmy_full_at(s)) : "memory");
    // Every consumer warp (of every block of the cluster) hands a stage back.
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(emmy_empty_at(s)), "r"(@EMPTY_COUNT@) : "memory");
  }
  @NORM_INIT@
  @REDUCTION_INIT@
  // The barriers' initialisation, visible to the copy engine before it completes on them.
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
@START_SYNC@
if (warp >= @CW@) {
  @PRODUCER_REGS@
  if (warp == @CW@ && lane == 0) {
    asm volatile("prefetch.tensormap [%0];" :: "l"(@MAP_A@) : "memory");
    asm volatile("prefetch.tensormap [%0];" :: "l"(@MAP_B@) : "memory");
    for (int kt = emmy_kt0; kt < emmy_kt1; ++kt) {
      const int i = kt - emmy_kt0, s = i % @STAGES@;
      // The stage's previous slice (i - stages) handed back by every consumer warp.
      if (i >= @STAGES@) emmy_wait(emmy_empty_at(s), (unsigned)(i / @STAGES@ - 1) & 1u);
      const unsigned a_dst = emmy_base + (unsigned)s * @STAGE_BYTES@u, b_dst = a_dst + @A_BYTES@u;
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(emmy_full_at(s)), "r"(@STAGE_BYTES@) : "memory");
      @COPY_A@
      @COPY_B@
    }
    @PRODUCER_TAIL@
  }
  @NORM_HELPERS@
  return;
}
@CONSUMER_REGS@
@RELEASE@
const int emmy_wg_m = (warp >> 2) / @WG_N@, emmy_wg_n = (warp >> 2) % @WG_N@;
float acc[@NJ@][4];
#pragma unroll
for (int j = 0; j < @NJ@; ++j) { acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f; }
for (int kt = emmy_kt0; kt < emmy_kt1; ++kt) {
  const int i = kt - emmy_kt0, s = i % @STAGES@;
  emmy_wait(@CONSUMER_BAR@(s), (unsigned)(i / @STAGES@) & 1u);
  @SLICE_PRODUCTS@
  // Slice i stays in flight; slice i - 1's products are done, so its stage goes back.
  asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
  if (i > 0) emmy_release((i - 1) % @STAGES@);
}
asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
if (emmy_n > 0) emmy_release((emmy_n - 1) % @STAGES@);
@NORM_SCALE@
)";

// persistent=1: a grid of one block a SM (persistent_grid), each taking the output tiles
// t = blockIdx.x, + gridDim.x, ... (M fastest: the blocks in flight together share B's columns).
// kPersistentStart (the barriers and the producer) is followed by the consumers' loop: both
// warpgroups on each tile (kCooperativeTiles) or each on its own (kPingpongTiles, then
// kPingpongHandOver), each tile's products by kTileProducts.
// The producer runs on into the next tile's slices while the consumers are in the previous
// one's epilogue (the ring's count `u` runs on across tiles, and with it the barriers' phases),
// so a tile's epilogue and the next one's first copies overlap, and no block pays a launch and
// an empty ring per tile. The consumers' tile loop is closed after the epilogue
// (tmpl_matmul.cpp).
const char* const kPersistentStart =
    R"(// Output tile t: M fastest, then N, then the batch.
auto emmy_tile = [](int t, long long& bz, long long& m0, long long& n0) {
  m0 = (long long)(t % @TILES_M@) * @BM@LL;
  n0 = (long long)((t / @TILES_M@) % @TILES_N@) * @N_STEP@LL;
  bz = (long long)(t / @TILES_MN@);
};
const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, grp = lane >> 2, tig = lane & 3;
if (threadIdx.x == 0) {
  for (int s = 0; s < @STAGES@; ++s) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(emmy_full_at(s)) : "memory");
    // The warps that consume a slice hand its stage back.
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(emmy_empty_at(s)), "r"(@EMPTY_COUNT@) : "memory");
  }
  @NORM_INIT@
  // The barriers' initialisation, visible to the copy engine before it completes on them.
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__syncthreads();
if (warp >= @CW@) {
  @PRODUCER_REGS@
  if (warp == @CW@ && lane == 0) {
    asm volatile("prefetch.tensormap [%0];" :: "l"(@MAP_A@) : "memory");
    asm volatile("prefetch.tensormap [%0];" :: "l"(@MAP_B@) : "memory");
    int u = 0;  // the ring's count of slices, across this block's tiles
    for (int t = blockIdx.x; t < @TILES@; t += gridDim.x) {
      long long bz, m0, n0;
      emmy_tile(t, bz, m0, n0);
      for (int kt = 0; kt < @KT@; ++kt, ++u) {
        const int s = u % @STAGES@;
        // The stage's previous slice (u - stages) handed back by the warps that consumed it.
        if (u >= @STAGES@) emmy_wait(emmy_empty_at(s), (unsigned)(u / @STAGES@ - 1) & 1u);
        const unsigned a_dst = emmy_base + (unsigned)s * @STAGE_BYTES@u, b_dst = a_dst + @A_BYTES@u;
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(emmy_full_at(s)), "r"(@STAGE_BYTES@) : "memory");
        @COPY_A@
        @COPY_B@
      }
    }
  }
  @NORM_HELPERS@
  return;
}
@CONSUMER_REGS@
auto emmy_release = [&](int s) {
  __syncwarp();
  if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(emmy_empty_at(s)) : "memory");
};
)";

// The consumers of the persistent loop: both warpgroups on each tile.
const char* const kCooperativeTiles =
    R"(const int emmy_wg_m = (warp >> 2) / @WG_N@, emmy_wg_n = (warp >> 2) % @WG_N@;
int emmy_u = 0;  // the ring's count of slices before this tile
for (int emmy_t = blockIdx.x; emmy_t < @TILES@; emmy_t += gridDim.x, emmy_u += @KT@) {
long long bz, m0, n0;
emmy_tile(emmy_t, bz, m0, n0);
)";

// One tile's products, as both consumer loops run them (emmy_u: the ring's count before the tile).
const char* const kTileProducts =
    R"(float acc[@NJ@][4];
#pragma unroll
for (int j = 0; j < @NJ@; ++j) { acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f; }
for (int kt = 0; kt < @KT@; ++kt) {
  const int u = emmy_u + kt, s = u % @STAGES@;
  emmy_wait(@CONSUMER_BAR@(s), (unsigned)(u / @STAGES@) & 1u);
  @SLICE_PRODUCTS@
  // Slice u stays in flight; slice u - 1's products are done, so its stage goes back.
  asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
  if (kt > 0) emmy_release((u - 1) % @STAGES@);
}
asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
emmy_release((emmy_u + @KT@ - 1) % @STAGES@);
@NORM_SCALE@
)";

// pingpong=1 (persistent, warps 8, tile_m 64): the two consumer warpgroups own whole output
// tiles, the block's q-th tile (t = blockIdx.x + q * gridDim.x) warpgroup q % 2's, and take
// turns on the tensor cores: warpgroup w waits for its turn (named barrier 2 + w) before its
// tile's first slice and, after its last, lets the other go (barrier 3 - w). Why: in the
// persistent loop above both warpgroups share each tile, so the tensor cores idle while they
// store it; here one warpgroup's epilogue runs under the other's products (the cooperative
// kernel's epilogue is a tenth to a fifth of a 128 x 256 tile's time at K = 1024). The producer
// is the persistent loop's: tiles in the block's order, the ring's count running on. The turns
// also keep the ring's phases safe: a warpgroup waits on a slice's "full" barrier only after
// every earlier slice was consumed, so the barrier is never two phases behind the wait. Each
// barrier completes exactly as often as there are turns: the last tile's warpgroup hands no turn.
const char* const kPingpongTiles =
    R"(const int emmy_pp = warp >> 2;  // this warpgroup: the block's tiles q = emmy_pp, + 2, ...
const int emmy_wg_m = 0, emmy_wg_n = 0;  // each warpgroup holds its whole tile
const int emmy_tiles_here = (@TILES@ - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x;
for (int emmy_q = emmy_pp; emmy_q < emmy_tiles_here; emmy_q += 2) {
const int emmy_t = (int)blockIdx.x + emmy_q * (int)gridDim.x, emmy_u = emmy_q * @KT@;
long long bz, m0, n0;
emmy_tile(emmy_t, bz, m0, n0);
// This warpgroup's turn: the other's products of the block's previous tile are done.
if (emmy_q > 0) asm volatile("bar.sync %0, 256;" :: "r"(2 + emmy_pp) : "memory");
)";

// After a tile's products, the turn handed over.
const char* const kPingpongHandOver =
    R"(// The other warpgroup's turn: its tile's products run under this one's epilogue.
if (emmy_q + 1 < emmy_tiles_here) asm volatile("bar.arrive %0, 256;" :: "r"(3 - emmy_pp) : "memory");
)";

const char* const kSplitReduction = R"({
  // Split-K: this block's partial tile, then the last block of the tile adds them all.
  float* const emmy_part = @PART@ + (((long long)blockIdx.z * gridDim.y + blockIdx.y) * @TILES_N@LL + blockIdx.x % @TILES_N@u) * @TILE_FLOATS@LL * @SPLITS@;
  #pragma unroll
  for (int j = 0; j < @NJ@; ++j)
    #pragma unroll
    for (int q = 0; q < 4; ++q)
      __stcg(emmy_part + emmy_split * @TILE_FLOATS@LL + (j * 4 + q) * @CT@ + threadIdx.x, acc[j][q]);
  __threadfence();
  asm volatile("bar.sync 1, @CT@;" ::: "memory");
  __shared__ unsigned emmy_last;
  if (threadIdx.x == 0) {
    unsigned* const emmy_count = (unsigned*)@COUNT@ + ((long long)blockIdx.z * gridDim.y + blockIdx.y) * @TILES_N@LL + blockIdx.x % @TILES_N@u;
    emmy_last = atomicAdd(emmy_count, 1u) == @SPLITS@u - 1u;
    if (emmy_last) *emmy_count = 0u;  // ready for the next launch
  }
  asm volatile("bar.sync 1, @CT@;" ::: "memory");
  if (!emmy_last) return;
  __threadfence();
  // In split order whichever block is last: the same sum, bit for bit, every run. This block's
  // own partial is read back too (the same bits as its accumulators): every load unconditional,
  // so they are issued together rather than one after another behind a branch each.
  #pragma unroll
  for (int j = 0; j < @NJ@; ++j)
    #pragma unroll
    for (int q = 0; q < 4; ++q) {
      float sum = 0.f;
      #pragma unroll
      for (int o = 0; o < @SPLITS@; ++o)
        sum += __ldcg(emmy_part + o * @TILE_FLOATS@LL + (j * 4 + q) * @CT@ + threadIdx.x);
      acc[j][q] = sum;
    }
}
)";

// Split-K inside a cluster (tile.reduce_in_cluster): the splits of one output tile are the
// blocks of a cluster along x. Why: reducing through global scratch (kSplitReduction) writes
// every partial tile to L2 and has the last block read all of them alone, one after the other
// blocks, behind a fence and an atomic; on the N = 1024 products at M = 512 (o_proj, down),
// whose tiles must be split to fill the GPU, that tail is a large part of the kernel. Here each
// block leaves its f32 partial tile in its own shared memory (the ring, free once every warpgroup
// is past its last slice), and block r's share of the consumer warps (warps [r * CW / splits,
// (r + 1) * CW / splits)) adds the partials of every block of the cluster at their own
// accumulators' places through distributed shared memory, in split order (the same bits
// whichever block is first), then runs the epilogue for their rows and columns alone: the
// reduction and the epilogue are shared by the cluster's blocks instead of serialised in one.
// Two mbarriers per block: "written" (every consumer warp of the cluster, once its partial is
// in place) and "read" (every reading warp of the cluster, once it has read this block's
// partial: the block's shared memory must outlive its peers' reads).
const char* const kClusterReduction = R"({
  // Every warpgroup's products are done reading the ring before it holds the partial tile.
  asm volatile("bar.sync 1, @CT@;" ::: "memory");
  #pragma unroll
  for (int j = 0; j < @NJ@; ++j)
    #pragma unroll
    for (int q = 0; q < 4; ++q)
      asm volatile("st.shared.f32 [%0], %1;" :: "r"(emmy_base + (unsigned)(((j * 4 + q) * @CT@ + threadIdx.x) * 4)), "f"(acc[j][q]) : "memory");
  // This warp's part of the partial is written: told to every block of the cluster.
  emmy_arrive_everywhere(emmy_written_bar);
  if (warp / @READERS@ != emmy_split) return;  // another block of the cluster adds these places
  emmy_wait_cluster(emmy_written_bar);
  #pragma unroll
  for (int j = 0; j < @NJ@; ++j)
    #pragma unroll
    for (int q = 0; q < 4; ++q) {
      const unsigned at = emmy_base + (unsigned)(((j * 4 + q) * @CT@ + threadIdx.x) * 4);
      float sum = 0.f;
      #pragma unroll
      for (int o = 0; o < @SPLITS@; ++o) {
        unsigned remote;
        float v;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(at), "r"(o));
        asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
        sum += v;
      }
      acc[j][q] = sum;
    }
  emmy_arrive_everywhere(emmy_read_bar);
  // Peers may still be reading this block's partial: its shared memory stays until they are done.
  emmy_wait_cluster(emmy_read_bar);
}
)";

// The barriers of kClusterReduction, declared and initialised beside the ring's.
const char* const kClusterReductionInit =
    R"(asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(emmy_written_bar), "r"(@CW@ * @SPLITS@) : "memory");
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(emmy_read_bar), "r"(@CW@) : "memory");)";
const char* const kClusterReductionBarriers =
    R"(__shared__ __align__(8) unsigned long long emmy_reduction_bars[2];
const unsigned emmy_written_bar = (unsigned)__cvta_generic_to_shared(&emmy_reduction_bars[0]);
const unsigned emmy_read_bar = emmy_written_bar + 8u;
// This warp arrives on barrier `bar` of every block of the cluster, lane r on block r's (each
// lane's memory operations ordered at the cluster's scope before its lanes' arrivals).
auto emmy_arrive_everywhere = [](unsigned bar) {
  const unsigned rank = threadIdx.x & 31u;
  asm volatile("fence.acq_rel.cluster;" ::: "memory");
  __syncwarp();
  if (rank < @SPLITS@u) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(rank));
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" :: "r"(remote) : "memory");
  }
};
// Waits for the barrier's first phase, seeing what the arriving blocks wrote before they arrived.
auto emmy_wait_cluster = [](unsigned bar) {
  unsigned done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0;\nselp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done) : "r"(bar) : "memory");
  } while (!done);
};
)";

// An absorbed row norm (WgmmaTile::row_norm): its barriers and the rows' scales, beside the
// ring's. "ready" (per stage): the helpers' 96 threads, once the stage's A is multiplied by the
// weight; "rows": the same threads, once a tile's scales are in emmy_rs. One buffer of scales is
// enough: the helpers finish a tile only after the consumers have released one of its slices
// (the tile has more slices than the ring has stages, emit_wgmma_ws_mainloop), so after the
// consumers read the previous tile's scales.
const char* const kNormDecls =
    R"(__shared__ __align__(8) unsigned long long emmy_ready[@STAGES@];
__shared__ __align__(8) unsigned long long emmy_rows[1];
__shared__ float emmy_rs[@BM@];
const unsigned emmy_ready0 = (unsigned)__cvta_generic_to_shared(&emmy_ready[0]);
const unsigned emmy_rows_bar = (unsigned)__cvta_generic_to_shared(&emmy_rows[0]);
auto emmy_ready_at = [&](int s) { return emmy_ready0 + 8u * (unsigned)s; };
// Two 16-bit values of A's row (packed as in memory): their squares added to `ss`, each
// multiplied by its column's weight (`w`, packed alike), rounded back to 16 bits.
auto emmy_norm_pair = [](unsigned v, unsigned w, float& ss) -> unsigned {
  @UNPACK@
  ss = fmaf(lo, lo, fmaf(hi, hi, ss));
  @PACK@
};
)";
const char* const kNormInit =
    R"(for (int s = 0; s < @STAGES@; ++s)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 96;" :: "r"(emmy_ready_at(s)) : "memory");
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 96;" :: "r"(emmy_rows_bar) : "memory");)";

// The helpers: warps 1-3 of the producer warpgroup, 8 lanes a row of the tile (lane c the
// row's 16-byte chunk c of each slice, rows g, g + 12, ...: a quarter warp reads one 128-byte
// row, conflict-free under the swizzle). Each keeps its rows' partial sums of squares in
// registers over the tile's slices; the 8 lanes of a row add theirs at the tile's end.
const char* const kNormHelpers =
    R"(if (warp > @CW@) {
  const int emmy_h = (int)threadIdx.x - (@CW@ + 1) * 32, emmy_c = emmy_h & 7, emmy_g = emmy_h >> 3;
  @NORM_TILES@ {
    float emmy_ss[@NORM_ROWS@];
    #pragma unroll
    for (int i = 0; i < @NORM_ROWS@; ++i) emmy_ss[i] = 0.f;
    for (int kt = 0; kt < @KT@; ++kt) {
      const int u = emmy_q * @KT@ + kt, s = u % @STAGES@;
      @WEIGHT@
      emmy_wait(emmy_full_at(s), (unsigned)(u / @STAGES@) & 1u);
      const unsigned emmy_a = emmy_base + (unsigned)s * @STAGE_BYTES@u;
      #pragma unroll
      for (int i = 0; i < @NORM_ROWS@; ++i) {
        const int r = emmy_g + 12 * i;
        if (r < @BM@) {
          // The swizzle moves 16-byte chunk c of row r to chunk c ^ (r % 8) of its 128 bytes.
          const unsigned at = emmy_a + (unsigned)r * 128u + ((unsigned)(emmy_c ^ (r & 7)) << 4);
          unsigned v0, v1, v2, v3;
          asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3) : "r"(at) : "memory");
          v0 = emmy_norm_pair(v0, emmy_w.x, emmy_ss[i]);
          v1 = emmy_norm_pair(v1, emmy_w.y, emmy_ss[i]);
          v2 = emmy_norm_pair(v2, emmy_w.z, emmy_ss[i]);
          v3 = emmy_norm_pair(v3, emmy_w.w, emmy_ss[i]);
          asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" :: "r"(at), "r"(v0), "r"(v1), "r"(v2), "r"(v3) : "memory");
        }
      }
      // This thread's writes, visible to the consumers' wgmma (the async proxy) once they have
      // seen its arrival.
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(emmy_ready_at(s)) : "memory");
    }
    #pragma unroll
    for (int i = 0; i < @NORM_ROWS@; ++i) {
      float t = emmy_ss[i];
      t += __shfl_xor_sync(0xffffffffu, t, 1);
      t += __shfl_xor_sync(0xffffffffu, t, 2);
      t += __shfl_xor_sync(0xffffffffu, t, 4);
      const int r = emmy_g + 12 * i;
      if (emmy_c == 0 && r < @BM@) emmy_rs[r] = rsqrtf(t / @K@.f + @EPS@);
    }
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(emmy_rows_bar) : "memory");
  }
}
)";

// The consumers, past a tile's last slice: its rows' scales, multiplied into the accumulators.
const char* const kNormScale =
    R"(emmy_wait(emmy_rows_bar, (unsigned)(@TILE_Q@) & 1u);
{
  const int emmy_r = emmy_wg_m * 64 + (warp & 3) * 16 + grp;
  const float emmy_r0 = emmy_rs[emmy_r], emmy_r1 = emmy_rs[emmy_r + 8];
  #pragma unroll
  for (int j = 0; j < @NJ@; ++j) {
    acc[j][0] *= emmy_r0; acc[j][1] *= emmy_r0; acc[j][2] *= emmy_r1; acc[j][3] *= emmy_r1;
  }
}
)";

// kNormDecls' static shared memory: the "ready" barriers, the "rows" barrier, the rows' scales.
int64_t row_norm_static_bytes(const WgmmaTile& tile) {
  return tile.row_norm ? 8 * tile.stages + 8 + 4 * tile.tile_m : 0;
}

// Fills the row norm's places of a loop's text (empty, or the ring's barriers without it).
std::string with_row_norm(std::string text, const WgmmaTile& tile, ir::DType dtype, int64_t K) {
  const bool on = tile.row_norm;
  text = replace_all(text, "@NORM_DECLS@", on ? kNormDecls : "");
  text = replace_all(text, "@NORM_INIT@", on ? kNormInit : "");
  text = replace_all(text, "@NORM_HELPERS@", on ? kNormHelpers : "");
  text = replace_all(text, "@NORM_SCALE@", on ? kNormScale : "");
  text = replace_all(text, "@CONSUMER_BAR@", on ? "emmy_ready_at" : "emmy_full_at");
  if (!on) return text;
  const bool bf16 = dtype == ir::DType::bf16;
  auto unpack = [&](const std::string& v, const std::string& lo, const std::string& hi) {
    return bf16 ? "const float " + lo + " = emmy_bf_lo(" + v + "), " + hi + " = emmy_bf_hi(" + v +
                      ");"
                : "const float " + lo + " = emmy_h2f((unsigned short)(" + v + " & 0xffffu)), " +
                      hi + " = emmy_h2f((unsigned short)(" + v + " >> 16));";
  };
  text = replace_all(text, "@UNPACK@", unpack("v", "lo", "hi") + "\n  " + unpack("w", "w0", "w1"));
  text = replace_all(text, "@PACK@",
                     bf16 ? "return emmy_rbf2(lo * w0, hi * w1);"
                          : "unsigned r;\n  asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\" : \"=r\"(r) : "
                            "\"f\"(hi * w1), \"f\"(lo * w0));\n  return r;");
  // The weight's 8 columns of this thread's chunk, once a slice (L1-resident: K elements); ones
  // without a weight.
  const std::string w = tile.norm_weight;
  const std::string one = bf16 ? "0x3f803f80u" : "0x3c003c00u";
  text = replace_all(
      text, "@WEIGHT@",
      w.empty()
          ? "const uint4 emmy_w = make_uint4(" + one + ", " + one + ", " + one + ", " + one + ");"
          : "const uint4 emmy_w = __ldg((const uint4*)(" + w + " + kt * 64 + emmy_c * 8));");
  text = replace_all(text, "@NORM_ROWS@", std::to_string((tile.tile_m + 11) / 12));
  char eps[40];
  std::snprintf(eps, sizeof eps, "%.9ef", tile.norm_eps);
  text = replace_all(text, "@EPS@", eps);
  return replace_all(text, "@K@", std::to_string(K));
}

// The producer's and the consumers' register counts and the consumer warps, as both loops
// take them. setmaxnreg only moves registers inside the pool the block was launched with: 12
// warps under __launch_bounds__(384) get 168 registers a thread (65536 / 384, rounded down to 8),
// 168 x 384 = 64512 for the block, so 128 x 40 for the producer warpgroup leaves 232 for each of
// the 256 consumer threads. With an absorbed row norm the producer warpgroup's helpers keep a
// tile's sums of squares and a slice's weights in registers: 64 for them (56 spilled in the
// persistent loop, ptxas), which leaves 216 (64512 - 128 x 64 = 256 x 220, rounded down to 8).
// Asking for more than the pool holds is no error: the consumers' setmaxnreg.inc waits forever
// (224 with 64 did, on an H100).
std::string fill_roles(std::string text, const WgmmaTile& tile) {
  const bool move_registers = tile.warps >= 8;
  constexpr int kProducerThreads = 128;
  const int producer_regs = tile.row_norm ? 64 : 40;
  const int consumer_threads = static_cast<int>(tile.warps) * 32,
            threads = kProducerThreads + consumer_threads;
  // What __launch_bounds__(threads) gives a thread: the SM's 65536 registers shared, in 8s.
  const int pool = 65536 / threads / 8 * 8 * threads;
  const int consumer_regs = (pool - producer_regs * kProducerThreads) / consumer_threads / 8 * 8;
  const std::string producer = std::to_string(producer_regs),
                    consumer = std::to_string(consumer_regs);
  text = replace_all(text, "@PRODUCER_REGS@",
                     move_registers ? "asm volatile(\"setmaxnreg.dec.sync.aligned.u32 " + producer +
                                          ";\" ::: \"memory\");"
                                    : "");
  text = replace_all(text, "@CONSUMER_REGS@",
                     move_registers ? "asm volatile(\"setmaxnreg.inc.sync.aligned.u32 " + consumer +
                                          ";\" ::: \"memory\");"
                                    : "");
  return replace_all(text, "@CW@", std::to_string(tile.warps));
}

// A persistent grid: one block a SM. Why not two where the shared memory would hold them: the
// registers seldom do (two consumer warpgroups take 232 a thread by setmaxnreg, filling the
// register file; one warpgroup with the staged epilogue took 170, ptxas), and a block that does
// not fit only starts once a first one has finished all its tiles, a second wave holding its
// share of the tiles.
int64_t persistent_grid(int64_t tiles) {
  return std::min<int64_t>(tiles, kSms);
}

}  // namespace

WgmmaLoop emit_wgmma_ws_mainloop(ModuleBuilder& m, Body& b, ir::DType dtype, const TmaOperand& a,
                                 const TmaOperand& bop, int64_t K, const WgmmaTile& tile,
                                 const WgmmaGrid& grid) {
  using namespace wgmma_text;
  if (tile.pingpong && (!tile.persistent || tile.warps != 8 || tile.tile_m != 64))
    throw KnobRefused(
        "matmul: pingpong=1 takes turns between two consumer warpgroups of their own tiles: "
        "persistent=1, warps=8 and tile_m=64");
  // pingpong: each warpgroup's tile as one warpgroup's, all of tile_n, one 64-row wgmma per k16
  // step.
  WgmmaTile own = tile;
  if (tile.pingpong) own.warps = 4;
  const TileGeometry geo = check_tile(dtype, a, bop, K, own);
  if (tile.stages < 2)
    throw KnobRefused(
        "matmul: wgmma=2 hands stages between warps and needs stages >= 2 (one slice in "
        "flight while the next lands)");
  const int64_t KT = (K + tile.tile_k - 1) / tile.tile_k;
  if (tile.splits < 1 || tile.splits > KT)
    throw KnobRefused("matmul: splits=" + std::to_string(tile.splits) + " exceeds the " +
                      std::to_string(KT) + " k-slices of tile_k " + std::to_string(tile.tile_k));
  const int64_t tiles_n = (grid.N + tile.n_step() - 1) / tile.n_step();
  const int64_t tiles = tiles_n * ((grid.M + tile.tile_m - 1) / tile.tile_m) * grid.batch;
  const int64_t CT = tile.warps * 32, tile_floats = tile.tile_m * tile.tile_n;
  // Scratch before the tensor maps (module.hpp): the partial tiles and one counter per tile.
  std::string part, count;
  const bool cluster_split = tile.splits > 1 && tile.reduce_in_cluster && tile.cluster == 1;
  if (tile.splits > 1 && !cluster_split) {
    part = m.add_scratch(ir::DType::f32, tiles * tile.splits * tile_floats);
    count = m.add_scratch(ir::DType::i32, tiles);
  }
  const int64_t tiles_m = (grid.M + tile.tile_m - 1) / tile.tile_m;
  if (tile.cluster != 1 && tile.cluster != 2)
    throw KnobRefused("matmul: cluster=" + std::to_string(tile.cluster) + ": 1 or 2");
  if (tile.cluster == 2 && tiles_m % 2 != 0)
    throw KnobRefused("matmul: cluster=2 pairs the blocks along M, and " + std::to_string(tiles_m) +
                      " tiles of tile_m " + std::to_string(tile.tile_m) + " do not pair up");
  if (tile.persistent && (tile.splits > 1 || tile.cluster > 1))
    throw KnobRefused("matmul: persistent=1 takes neither splits > 1 nor cluster=2");
  if (tile.row_norm) {
    if (tile.splits != 1 || tile.cluster != 1 || tile.pingpong || tile.tile_k != 64)
      throw KnobRefused(
          "matmul: A's row norm is absorbed with tile_k=64 and without splits, clusters or "
          "pingpong (each block must see its rows' whole K, in 128-byte rows)");
    if (K % 64 != 0)
      throw KnobRefused("matmul: A's row norm is absorbed where K (" + std::to_string(K) +
                        ") is a multiple of 64");
    if (KT <= tile.stages)
      throw KnobRefused("matmul: A's row norm needs more k-slices (" + std::to_string(KT) +
                        ") than stages (" + std::to_string(tile.stages) + ")");
  }
  const std::string map_a = tensor_map(m, a, K, tile.tile_k, tile.tile_m),
                    map_b = tensor_map(m, bop, K, tile.tile_k, b_box_rows(tile));
  if (tile.persistent) {
    // pingpong: each warpgroup's tile as one warpgroup's (`own`), a slice consumed by its 4 warps.
    std::string text = with_row_norm(
        std::string(kRingPreamble) + kPersistentStart +
            (tile.pingpong ? std::string(kPingpongTiles) + kTileProducts + kPingpongHandOver
                           : std::string(kCooperativeTiles) + kTileProducts),
        tile, dtype, K);
    text = replace_all(text, "@NORM_TILES@",
                       "int emmy_q = 0;\n  for (int t = blockIdx.x; t < @TILES@; t += gridDim.x, "
                       "++emmy_q)");
    text = replace_all(text, "@TILE_Q@", "emmy_u / @KT@");
    text = fill_common(text, a, bop, map_a, map_b, dtype, K, own, geo);
    text = replace_all(text, "@EMPTY_COUNT@", tile.pingpong ? "4" : "@CW@");
    text = fill_roles(text, tile);
    text = replace_all(text, "@TILES_M@", std::to_string(tiles_m));
    text = replace_all(text, "@TILES_N@", std::to_string(tiles_n));
    text = replace_all(text, "@TILES_MN@", std::to_string(tiles_m * tiles_n));
    text = replace_all(text, "@TILES@", std::to_string(tiles));
    append_lines(b, text);
    WgmmaLoop loop{geo.smem, geo.n_wg, CT + 128, 1, ""};
    loop.persistent_blocks = persistent_grid(tiles);
    loop.extra_static_bytes = row_norm_static_bytes(tile);
    return loop;
  }
  std::string text =
      with_row_norm(std::string(kRingPreamble) + (cluster_split ? kClusterReductionBarriers : "") +
                        kSpecializedLoop,
                    tile, dtype, K);
  text = replace_all(text, "@NORM_TILES@", "for (int emmy_q = 0; emmy_q < 1; ++emmy_q)");
  text = replace_all(text, "@TILE_Q@", "0");
  text = fill_common(text, a, bop, map_a, map_b, dtype, K, tile, geo);
  const bool pair = tile.cluster == 2;
  // Split-K: the splits of a tile side by side along x (a cluster's blocks), else the tiles'
  // columns side by side for each split.
  text = replace_all(text, "@SPLIT_OF_BLOCK@",
                     cluster_split ? "blockIdx.x % @SPLITS@u" : "blockIdx.x / @TILES_N@u");
  text = replace_all(text, "@COLUMN_OF_BLOCK@",
                     cluster_split ? "blockIdx.x / @SPLITS@u" : "blockIdx.x % @TILES_N@u");
  text = replace_all(text, "@REDUCTION_INIT@", cluster_split ? kClusterReductionInit : "");
  text = replace_all(text, "@RANK@",
                     pair ? "unsigned emmy_rank;\nasm(\"mov.u32 %0, %%cluster_ctarank;\" : "
                            "\"=r\"(emmy_rank));"
                          : "");
  text = replace_all(text, "@EMPTY_COUNT@", std::to_string(tile.warps * tile.cluster));
  // A cluster starts together: no block may multicast into a peer's barriers before the peer
  // has initialised them.
  text = replace_all(
      text, "@START_SYNC@",
      pair || cluster_split
          ? "asm volatile(\"barrier.cluster.arrive.release.aligned;\" ::: \"memory\");\n"
            "asm volatile(\"barrier.cluster.wait.acquire.aligned;\" ::: \"memory\");"
          : "__syncthreads();");
  // The peer's consumers arrive on this block's "empty" barriers until its last slices: the
  // producer waits for every slice to be handed back before the block may exit.
  text =
      replace_all(text, "@PRODUCER_TAIL@",
                  pair ? "for (int i = emmy_n > @STAGES@ ? emmy_n - @STAGES@ : 0; i < emmy_n; ++i) "
                         "emmy_wait(emmy_empty_at(i % @STAGES@), (unsigned)(i / @STAGES@) & 1u);"
                       : "");
  text = replace_all(
      text, "@RELEASE@",
      // The arrival's default semantics (release at the block's scope), as CUTLASS's consumer
      // release: the products that read the stage are complete (wait_group) before it, and
      // nothing this thread wrote needs to be seen by the peer. A release at the cluster's scope
      // fenced every arrival (two a warp a slice).
      pair ? "// Lane r hands the stage back to block r of the cluster (both read its B halves).\n"
             "auto emmy_release = [&](int s) {\n"
             "  __syncwarp();\n"
             "  if (lane < 2) {\n"
             "    unsigned remote;\n"
             "    asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(remote) : "
             "\"r\"(emmy_empty_at(s)), \"r\"(lane));\n"
             "    asm volatile(\"mbarrier.arrive.shared::cluster.b64 _, [%0];\" "
             ":: \"r\"(remote) : \"memory\");\n"
             "  }\n"
             "};"
           : "auto emmy_release = [&](int s) {\n"
             "  __syncwarp();\n"
             "  if (lane == 0) asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: "
             "\"r\"(emmy_empty_at(s)) : \"memory\");\n"
             "};");
  text = replace_all(text, "@STAGES@", std::to_string(tile.stages));
  text = fill_roles(text, tile);
  text = replace_all(text, "@TILES_N@", std::to_string(tiles_n));
  text = replace_all(text, "@SPLITS@", std::to_string(tile.splits));
  append_lines(b, text);
  if (cluster_split) {
    std::string red = kClusterReduction;
    red = replace_all(red, "@SPLITS@", std::to_string(tile.splits));
    red = replace_all(red, "@READERS@", std::to_string(tile.warps / tile.splits));
    red = replace_all(red, "@NJ@", std::to_string(geo.n_wg / 8));
    red = replace_all(red, "@CT@", std::to_string(CT));
    append_lines(b, red);
  } else if (tile.splits > 1) {
    std::string red = kSplitReduction;
    red = replace_all(red, "@PART@", part);
    red = replace_all(red, "@COUNT@", count);
    red = replace_all(red, "@TILES_N@", std::to_string(tiles_n));
    red = replace_all(red, "@TILE_FLOATS@", std::to_string(tile_floats));
    red = replace_all(red, "@SPLITS@", std::to_string(tile.splits));
    red = replace_all(red, "@NJ@", std::to_string(geo.n_wg / 8));
    red = replace_all(red, "@CT@", std::to_string(CT));
    append_lines(b, red);
  }
  WgmmaLoop loop{geo.smem, geo.n_wg, CT + 128, tile.splits, ""};
  loop.extra_static_bytes = row_norm_static_bytes(tile);
  if (pair) loop.kernel_attributes = "__cluster_dims__(1, 2, 1)";
  if (cluster_split) {
    loop.kernel_attributes = "__cluster_dims__(" + std::to_string(tile.splits) + ", 1, 1)";
    // The partial tile, f32, where the ring was.
    loop.shared_bytes = std::max(loop.shared_bytes, 4 * tile.tile_m * tile.tile_n + 1024);
  }
  return loop;
}

}  // namespace emmy::cuda
