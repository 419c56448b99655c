// The matmul template's SIMT path (matmul_parts.hpp: Path::simt): f32 tiles of both operands in
// shared memory, each thread accumulating a TM x TN micro-tile with FMAs, interleaved so that
// shared-memory reads are conflict-free; the operands' prologue is inlined into the tile loads.
#include "matmul_parts.hpp"

namespace emmy::cuda::matmul {
namespace {

// One tile_k slice of both operands into As[k][m] and Bs[k][n] (f32), element by element
// through the index chain.
void load_tiles(Kernel& k, Body& kloop) {
  ExprGen& e = k.e;
  const ir::Node& p = k.p;
  const ir::ValueId mm = k.mt.mm;
  const int64_t BM = k.pl.BM, BN = k.pl.BN, BK = k.pl.BK, T = k.pl.T, M = k.mt.M, N = k.mt.N,
                K = k.mt.K;
  // A linear's weight is [N, K]: read k fastest; a matmul's B is [K, N]: read n fastest.
  const bool b_n_fastest = !k.mt.linear;
  auto out_index = [&k](const std::string& mrow, const std::string& ncol) {
    return k.out_index(mrow, ncol);
  };
  // A tile: k fastest.
  {
    Body load(kloop);
    load.line("const int kk = e % " + std::to_string(BK) + ", mm = e / " + std::to_string(BK) +
              ";");
    load.line("const long long gm = m0 + mm, gk = k0 + kk;");
    load.line("float t = 0.f;");
    Body guarded(load);
    Index ai, bi;
    e.gemm_operands(mm, out_index("gm", "0"), "gk", ai, bi);
    guarded.line("t = (float)" + e.value(p.inputs[0], ai, guarded) + ";");
    load.block("if (gm < " + std::to_string(M) + "LL && gk < " + std::to_string(K) + "LL)",
               guarded);
    load.line("As[kk][mm] = t;");
    kloop.block("for (int e = threadIdx.x; e < " + std::to_string(BM * BK) +
                    "; e += " + std::to_string(T) + ")",
                load);
  }
  // B tile.
  {
    Body load(kloop);
    if (b_n_fastest)
      load.line("const int nn = e % " + std::to_string(BN) + ", kk = e / " + std::to_string(BN) +
                ";");
    else
      load.line("const int kk = e % " + std::to_string(BK) + ", nn = e / " + std::to_string(BK) +
                ";");
    load.line("const long long gn = n0 + nn, gk = k0 + kk;");
    load.line("float t = 0.f;");
    Body guarded(load);
    Index ai, bi;
    e.gemm_operands(mm, out_index("0", "gn"), "gk", ai, bi);
    guarded.line("t = (float)" + e.value(p.inputs[1], bi, guarded) + ";");
    load.block("if (gn < " + std::to_string(N) + "LL && gk < " + std::to_string(K) + "LL)",
               guarded);
    load.line("Bs[kk][nn] = t;");
    kloop.block("for (int e = threadIdx.x; e < " + std::to_string(BN * BK) +
                    "; e += " + std::to_string(T) + ")",
                load);
  }
}

}  // namespace

void emit_simt(Kernel& k) {
  Body& b = k.b;
  const int64_t BM = k.pl.BM, BN = k.pl.BN, BK = k.pl.BK, K = k.mt.K;
  const int64_t TM = k.pl.TM, TN = k.pl.TN, SX = k.pl.SX, SY = k.pl.SY;
  b.line("__shared__ float As[" + std::to_string(BK) + "][" + std::to_string(BM + 4) + "];");
  b.line("__shared__ float Bs[" + std::to_string(BK) + "][" + std::to_string(BN + 4) + "];");
  b.line("const long long bz = blockIdx.z;");
  b.line("const long long m0 = (long long)blockIdx.y * " + std::to_string(BM) +
         "LL, n0 = (long long)blockIdx.x * " + std::to_string(BN) + "LL;");
  b.line("const int tx = threadIdx.x % " + std::to_string(SX) + ", ty = threadIdx.x / " +
         std::to_string(SX) + ";");
  b.line("float acc[" + std::to_string(TM) + "][" + std::to_string(TN) + "];");
  b.line("#pragma unroll");
  b.line("for (int i = 0; i < " + std::to_string(TM) + "; ++i)");
  b.line("  #pragma unroll");
  b.line("  for (int j = 0; j < " + std::to_string(TN) + "; ++j) acc[i][j] = 0.f;");
  {
    Body kloop(b);
    load_tiles(k, kloop);
    kloop.line("__syncthreads();");
    kloop.line("#pragma unroll");
    kloop.line("for (int kk = 0; kk < " + std::to_string(BK) + "; ++kk) {");
    kloop.line("  float a[" + std::to_string(TM) + "], c[" + std::to_string(TN) + "];");
    kloop.line("  #pragma unroll");
    kloop.line("  for (int i = 0; i < " + std::to_string(TM) + "; ++i) a[i] = As[kk][ty + i * " +
               std::to_string(SY) + "];");
    kloop.line("  #pragma unroll");
    kloop.line("  for (int j = 0; j < " + std::to_string(TN) + "; ++j) c[j] = Bs[kk][tx + j * " +
               std::to_string(SX) + "];");
    kloop.line("  #pragma unroll");
    kloop.line("  for (int i = 0; i < " + std::to_string(TM) + "; ++i)");
    kloop.line("    #pragma unroll");
    kloop.line("    for (int j = 0; j < " + std::to_string(TN) +
               "; ++j) acc[i][j] = fmaf(a[i], c[j], acc[i][j]);");
    kloop.line("}");
    kloop.line("__syncthreads();");
    b.block("for (long long k0 = 0; k0 < " + std::to_string(K) + "LL; k0 += " + std::to_string(BK) +
                ")",
            kloop);
  }

  k.epilogue(b,
             {"for (int i = 0; i < " + std::to_string(TM) + "; ++i)",
              "for (int j = 0; j < " + std::to_string(TN) + "; ++j)"},
             "const long long gm = m0 + ty + i * " + std::to_string(SY) + ", gn = n0 + tx + j * " +
                 std::to_string(SX) + ";",
             "acc[i][j]");
}

}  // namespace emmy::cuda::matmul
