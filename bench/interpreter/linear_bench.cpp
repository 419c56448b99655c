// emmy-bench-interpreter: the reference interpreter's linear (x[M, K] @ w[N, K]^T, bf16 inputs,
// computed in f64 as every reference is) at the shapes given, M,K,N each, default the Qwen3
// layer's products at B=8 S=512, and its batched matmul (a[Z, M, K] @ b[Z, K, N]) for shapes
// given as bmm:Z,M,K,N (the attention's q @ k^T at B=8 S=512 is bmm:128,512,128,512): the
// interpreter is most of a large tune's reference time (`time_s.reference` in a tune's report).
// Wall seconds and multiply-adds per second, on every core (`parallel_rows`). A benchmark, not a
// test: docs/PERFORMANCE.md has figures.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "emmy/ir.hpp"
#include "ir/interpreter.hpp"

int main(int argc, char** argv) {
  using namespace emmy;
  std::vector<std::string> shapes(argv + 1, argv + argc);
  if (shapes.empty())
    shapes = {"4096,1024,4096", "4096,1024,6144", "4096,2048,1024", "4096,3072,1024"};
  for (const std::string& s : shapes) {
    long long z = 0, m = 0, k = 0, n = 0;
    const bool bmm = s.rfind("bmm:", 0) == 0;
    const bool parsed =
        bmm ? std::sscanf(s.c_str() + 4, "%lld,%lld,%lld,%lld", &z, &m, &k, &n) == 4 && z > 0
            : std::sscanf(s.c_str(), "%lld,%lld,%lld", &m, &k, &n) == 3;
    if (!parsed || m <= 0 || k <= 0 || n <= 0) {
      std::fprintf(stderr, "emmy-bench-interpreter: '%s' is not M,K,N or bmm:Z,M,K,N (positive)\n",
                   s.c_str());
      return 2;
    }
    ir::Program p;
    ir::Builder b(p.graph);
    if (bmm) {
      const ir::ValueId a = b.input("a", {ir::DType::bf16, {z, m, k}});
      const ir::ValueId w = b.input("b", {ir::DType::bf16, {z, k, n}});
      b.output(b.matmul(a, w));
    } else {
      z = 1;
      const ir::ValueId x = b.input("x", {ir::DType::bf16, {m, k}});
      const ir::ValueId w = b.input("w", {ir::DType::bf16, {n, k}}, "weight");
      b.output(b.op(ir::Op::linear, {x, w}, {}, "proj"));
    }
    const auto inputs = ir::random_inputs(p.graph, 1);
    const auto t0 = std::chrono::steady_clock::now();
    const auto out = ir::evaluate(p.graph, inputs);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s %s%lldx%lld -> %lld: %.3f s, %.2f G multiply-adds/s (%zu output bytes)\n",
                bmm ? "matmul" : "linear", bmm ? (std::to_string(z) + "x").c_str() : "", m, k, n,
                sec, double(z) * double(m) * double(k) * double(n) / sec * 1e-9,
                out.at(0).data.size());
  }
  return 0;
}
