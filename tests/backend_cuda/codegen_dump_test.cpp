// TEMPORARY (issue 23 refactor): writes the module generated for many configurations of every
// cuda template into $EMMY_CODEGEN_DUMP, so that a refactor of the generators can be checked
// byte for byte (diff -r of two dumps). Does nothing without the variable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "attention_graphs.hpp"
#include "cuda_graphs.hpp"
#include "expr.hpp"
#include "matmul_layout_graphs.hpp"
#include "perf_graphs.hpp"
#include "templates.hpp"

namespace emmy::cuda::test {
namespace {

namespace fs = std::filesystem;
using Knobs = std::map<std::string, double>;

struct Graph {
  std::string name;
  ir::Graph graph;
  std::vector<std::string> templates;
};

std::vector<Graph> graphs() {
  using ir::DType;
  std::vector<Graph> out;
  for (const Case& c : all_cases()) out.push_back({c.name, c.graph, {c.templ, "fallback"}});
  for (const Case& c : attention_cases()) out.push_back({c.name, c.graph, {"attention"}});
  out.push_back({"qwen3_attention_s512_b2", qwen3_attention(512, 2).graph, {"attention"}});
  out.push_back({"transposed_scores", transposed_scores_bf16().graph, {"attention"}});
  const std::vector<std::string> pw = {"pointwise", "fallback"};
  const std::vector<std::string> red = {"reduction", "fallback"};
  const std::vector<std::string> mm = {"matmul"};
  out.push_back({"silu_bias_f32", perf::silu_bias(512, 1000, DType::f32), pw});
  out.push_back({"silu_bias_bf16", perf::silu_bias(8192, 1024, DType::bf16), pw});
  out.push_back({"silu_bias_f16", perf::silu_bias(77, 96, DType::f16), pw});
  out.push_back({"residual_add", perf::residual_add(8192, 1024), pw});
  out.push_back({"silu_mul", perf::silu_mul(100, 3072), pw});
  out.push_back({"silu_mul_sliced", perf::silu_mul_sliced(100, 3072, 8), pw});
  out.push_back({"rotate_half_f32", perf::rotate_half(64, 128, DType::f32), pw});
  out.push_back({"rmsnorm", perf::rmsnorm(8192, 1024), red});
  out.push_back({"rmsnorm_odd", perf::rmsnorm(33, 1000), red});
  out.push_back({"qk_norm_rope", perf::qk_norm_rope(128, 16, 128, 4096, 0), red});
  out.push_back({"softmax_f32", perf::softmax(100, 77, DType::f32), red});
  out.push_back({"softmax_bf16", perf::softmax(512, 4096, DType::bf16), red});
  out.push_back({"linear", perf::linear(512, 1024, 3072, false), mm});
  out.push_back({"linear_epilogue", perf::linear(100, 1000, 3000, true), mm});
  out.push_back({"linear_odd_n", perf::linear(128, 256, 1001, false), mm});
  out.push_back({"matmul_kn", perf::matmul(256, 512, 384), mm});
  out.push_back({"layout_matmul_kn", layout::matmul_kn({2}, {1}, 128, 256, 192), mm});
  out.push_back({"layout_bmm", layout::bmm(4, 128, 64, 96), mm});
  out.push_back({"layout_transposed_b", layout::matmul_transposed_b(256, 128, 512), mm});
  out.push_back({"layout_bmm_transposed_b", layout::bmm_transposed_b(4, 128, 64, 128), mm});
  out.push_back({"layout_o_proj", layout::o_proj(16, 128, 128, 1024), mm});
  out.push_back({"layout_o_proj_sliced", layout::o_proj_sliced(16, 128, 128, 1024), mm});
  return out;
}

// The defaults, each knob's values alone, then every combination of the declared values.
std::vector<Knobs> configurations(const std::string& templ) {
  const BackendCaps caps = cuda_capabilities();
  const std::vector<KnobSpec>& specs = caps.templates.at(templ);
  std::vector<Knobs> out{{}};
  for (const KnobSpec& s : specs)
    for (double v : s.values) out.push_back({{s.name, v}});
  std::vector<Knobs> all{{}};
  for (const KnobSpec& s : specs) {
    std::vector<Knobs> next;
    for (const Knobs& k : all)
      for (double v : s.values) {
        Knobs more = k;
        more[s.name] = v;
        next.push_back(more);
      }
    all = std::move(next);
  }
  if (!specs.empty()) out.insert(out.end(), all.begin(), all.end());
  return out;
}

TEST(CodegenDump, EveryTemplate) {
  const char* dir = std::getenv("EMMY_CODEGEN_DUMP");
  if (!dir) GTEST_SKIP() << "EMMY_CODEGEN_DUMP not set";
  fs::create_directories(dir);
  size_t count = 0, generated = 0;
  for (const Graph& gr : graphs()) {
    for (const std::string& templ : gr.templates) {
      std::ofstream out(fs::path(dir) / (gr.name + "." + templ + ".txt"));
      for (const Knobs& k : configurations(templ)) {
        out << "=== " << templ << " " << perf::describe(k) << "\n";
        try {
          std::string used;
          const std::string src = generate_source(perf::one_kernel(gr.graph, templ, k), &used);
          out << "used " << used << "\n" << src << "\n";
          ++generated;
        } catch (const KnobRefused& e) {
          out << "KnobRefused: " << e.what() << "\n";
        } catch (const Unsupported& e) {
          out << "Unsupported: " << e.what() << "\n";
        } catch (const std::exception& e) {
          out << "exception: " << e.what() << "\n";
        }
        ++count;
      }
    }
  }
  // The two-kernel programs (generate_program) too.
  {
    std::ofstream out(fs::path(dir) / "programs.txt");
    out << generate_source(two_kernel_program()) << "\n";
    count += 1;
  }
  std::cout << count << " configurations dumped, " << generated << " of them generated\n";
  EXPECT_GT(count, 0u);
}

}  // namespace
}  // namespace emmy::cuda::test
