// emmy-bench-interpreter: the reference interpreter (computing in f64, as every reference is) on
// graphs with bf16 inputs, one per argument:
//   M,K,N           linear x[M, K] @ w[N, K]^T (default: the Qwen3 layer's four products at
//                   B=8 S=512);
//   bmm:Z,M,K,N     batched matmul a[Z, M, K] @ b[Z, K, N] (the attention's q @ k^T at B=8 S=512
//                   is bmm:128,512,128,512);
//   attn:B,H,S,D    causal scaled dot-product attention of q, k, v [B, H, S, D], softmax in f32
//                   (emmy::build_attention, as the frontends lower torch's), with the time of
//                   each op kind.
// The interpreter is most of a large tune's reference time (`time_s.reference` in a tune's
// report). Wall seconds and multiply-adds per second, on every core (`parallel_rows`). A
// benchmark, not a test: docs/PERFORMANCE.md has figures.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "emmy/ir.hpp"
#include "ir/interpreter.hpp"

namespace {

using namespace emmy;
using Clock = std::chrono::steady_clock;

struct Case {
  ir::Program program;
  double multiply_adds = 0;
  std::string label;
};

// The case an argument names; false (with a message) when it names none.
bool parse(const std::string& s, Case& c) {
  long long z = 0, m = 0, k = 0, n = 0;
  ir::Builder b(c.program.graph);
  const ir::DType t = ir::DType::bf16;
  if (s.rfind("bmm:", 0) == 0) {
    if (std::sscanf(s.c_str() + 4, "%lld,%lld,%lld,%lld", &z, &m, &k, &n) != 4 || z <= 0 ||
        m <= 0 || k <= 0 || n <= 0)
      return false;
    b.output(b.matmul(b.input("a", {t, {z, m, k}}), b.input("b", {t, {z, k, n}})));
    c.multiply_adds = double(z) * double(m) * double(k) * double(n);
    c.label = "matmul " + std::to_string(z) + "x" + std::to_string(m) + "x" + std::to_string(k) +
              " -> " + std::to_string(n);
    return true;
  }
  if (s.rfind("attn:", 0) == 0) {
    long long batch = 0, heads = 0, seq = 0, dim = 0;
    if (std::sscanf(s.c_str() + 5, "%lld,%lld,%lld,%lld", &batch, &heads, &seq, &dim) != 4 ||
        batch <= 0 || heads <= 0 || seq <= 0 || dim <= 0)
      return false;
    const ir::TensorType qkv{t, {batch, heads, seq, dim}};
    const ir::ValueId q = b.input("q", qkv), key = b.input("k", qkv), v = b.input("v", qkv);
    b.output(ir::build_attention(b, q, key, v, -1, 0.0, /*causal=*/true, /*softmax_in_f32=*/true));
    c.multiply_adds = 2.0 * double(batch * heads) * double(seq) * double(seq) * double(dim);
    c.label = "causal attention " + s.substr(5);
    return true;
  }
  if (std::sscanf(s.c_str(), "%lld,%lld,%lld", &m, &k, &n) != 3 || m <= 0 || k <= 0 || n <= 0)
    return false;
  const ir::ValueId x = b.input("x", {t, {m, k}});
  const ir::ValueId w = b.input("w", {t, {n, k}}, "weight");
  b.output(b.op(ir::Op::linear, {x, w}, {}, "proj"));
  c.multiply_adds = double(m) * double(k) * double(n);
  c.label = "linear " + std::to_string(m) + "x" + std::to_string(k) + " -> " + std::to_string(n);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) args = {"4096,1024,4096", "4096,1024,6144", "4096,2048,1024", "4096,3072,1024"};
  for (const std::string& s : args) {
    Case c;
    if (!parse(s, c)) {
      std::fprintf(stderr,
                   "emmy-bench-interpreter: '%s' is not M,K,N, bmm:Z,M,K,N or attn:B,H,S,D "
                   "(positive)\n",
                   s.c_str());
      return 2;
    }
    const ir::Graph& g = c.program.graph;
    const auto inputs = ir::random_inputs(g, 1);
    // The hook runs before each computed node, in graph order: the time between two calls is
    // the earlier node's (its rounding and the release of dead values included).
    std::vector<ir::ValueId> computed;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (g.nodes[i].op != ir::Op::input) computed.push_back(static_cast<ir::ValueId>(i));
    std::vector<Clock::time_point> starts;
    const auto t0 = Clock::now();
    const auto out = ir::evaluate(g, inputs, [&] { starts.push_back(Clock::now()); });
    const auto t1 = Clock::now();
    const double sec = std::chrono::duration<double>(t1 - t0).count();
    std::printf("%s: %.3f s, %.2f G multiply-adds/s (%zu output bytes)\n", c.label.c_str(), sec,
                c.multiply_adds / sec * 1e-9, out.at(0).data.size());
    if (computed.size() < 2 || starts.size() != computed.size()) continue;
    std::map<std::string, double> by_op;
    for (size_t i = 0; i < starts.size(); ++i) {
      const auto end = i + 1 < starts.size() ? starts[i + 1] : t1;
      by_op[std::string(ir::to_string(g.node(computed[i]).op))] +=
          std::chrono::duration<double>(end - starts[i]).count();
    }
    for (const auto& [op, s_op] : by_op) std::printf("  %-10s %.3f s\n", op.c_str(), s_op);
  }
  return 0;
}
