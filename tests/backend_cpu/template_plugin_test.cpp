// Template plugins on the cpu backend (issue 20): a kernel naming a template the backend does not
// have is refused, never built as the fallback; the real example plugin (examples/blas_sgemm,
// loaded through the plugin host as a run loads it) becomes a listed alternative of "matmul", its
// kernels build and match the reference interpreter, it refuses what it cannot compute, and an
// assembled program mixes its kernel with a built-in template's. The backend's refusals of
// templates it cannot take use small in-test templates (they are never built).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "cpu_harness.hpp"
#include "emitter.hpp"
#include "ir/interpreter.hpp"
#include "plugin_host/plugin_host.hpp"
#include "templates.hpp"

namespace emmy::cpu::testing {
namespace {

using ir::DType;

std::unique_ptr<CpuBackend> fresh_backend() {
  return std::make_unique<CpuBackend>(
      PluginOptions{{"cache_dir", fresh_cache_dir()}, {"worker", worker_executable()}});
}

// The example template as `emmy tune` gets it: discovered by its manifest, created by the host.
std::shared_ptr<KernelTemplate> blas_sgemm() {
  static PluginHost host;
  static bool found = (host.discover({EMMY_EXAMPLE_PLUGIN_DIR}), true);
  (void)found;
  return host.make_template("blas_sgemm");
}

std::unique_ptr<CpuBackend> backend_with_blas() {
  auto backend = fresh_backend();
  Status s = backend->add_template(blas_sgemm());
  EXPECT_TRUE(s.ok()) << s.message();
  return backend;
}

ir::Graph matmul_graph(int64_t m, int64_t k, int64_t n, DType t = DType::f32) {
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("a", {t, {m, k}});
  auto y = b.input("b", {t, {k, n}});
  b.output(b.op(ir::Op::matmul, {x, y}));
  return g;
}

std::string run_and_compare(CpuBackend& backend, const ir::Slice& slice, Artifact& artifact) {
  return build_and_check(backend, slice, Regime::rank, 11, artifact);
}

TEST(CpuTemplatePlugins, UnknownTemplateIsRefusedNamingItNeverBuiltAsTheFallback) {
  ir::Slice s = whole_graph_slice(matmul_graph(16, 16, 16), "acme_gemm", {});
  EXPECT_THROW(generate_source(s), KnobRefused);
  auto backend = fresh_backend();
  Artifact artifact;
  MeasureResult failure;
  ASSERT_TRUE(backend->build(s, Regime::rank, artifact, failure).ok());
  EXPECT_EQ(failure.failure, FailureKind::refused);
  EXPECT_NE(failure.message.find("no kernel template 'acme_gemm'"), std::string::npos)
      << failure.message;
  EXPECT_NE(failure.message.find("matmul"), std::string::npos)
      << "names the templates it has: " << failure.message;
  EXPECT_TRUE(artifact.handle.empty()) << "nothing may be built for an unknown template";
  // Without a template (tests, hand-made slices) and with "fallback" the fallback still builds.
  EXPECT_EQ(check_against_reference(matmul_graph(8, 8, 8), "fallback", {}), "");
}

TEST(CpuTemplatePlugins, PluginIsListedAsAnAlternativeOfItsTemplate) {
  auto backend = backend_with_blas();
  BackendCaps caps = backend->capabilities();
  ASSERT_EQ(caps.templates.count("blas_sgemm"), 1u);
  ASSERT_EQ(caps.templates.at("blas_sgemm").size(), 1u);
  EXPECT_EQ(caps.templates.at("blas_sgemm")[0].name, "threads");
  EXPECT_EQ(caps.alternatives.at("matmul"), std::vector<std::string>{"blas_sgemm"});
  // Its library joins the environment: rows never mix OpenBLAS builds.
  EXPECT_NE(backend->environment_fingerprint().find("|blas_sgemm OpenBLAS"), std::string::npos)
      << backend->environment_fingerprint();
  EXPECT_EQ(fresh_backend()->capabilities().alternatives.count("matmul"), 0u);
}

TEST(CpuTemplatePlugins, PluginKernelsMatchTheReference) {
  auto backend = backend_with_blas();
  Artifact artifact;
  ir::Slice mm = whole_graph_slice(matmul_graph(37, 29, 53), "blas_sgemm", {{"threads", 2}});
  EXPECT_EQ(run_and_compare(*backend, mm, artifact), "");
  EXPECT_NE(artifact.source.find("cblas_sgemm("), std::string::npos) << artifact.source;

  ir::Graph lin;  // linear with a bias over a 3-D input: bias rows, then beta = 1
  {
    ir::Builder b(lin);
    auto x = b.input("x", {DType::f32, {2, 5, 24}});
    auto w = b.input("w", {DType::f32, {40, 24}});
    auto bias = b.input("bias", {DType::f32, {40}});
    b.output(b.op(ir::Op::linear, {x, w, bias}));
  }
  EXPECT_EQ(run_and_compare(*backend, whole_graph_slice(lin, "blas_sgemm", {}), artifact), "");
  EXPECT_NE(artifact.source.find("CblasTrans"), std::string::npos) << artifact.source;

  ir::Graph bmm;
  {
    ir::Builder b(bmm);
    auto x = b.input("x", {DType::f32, {3, 7, 9}});
    auto y = b.input("y", {DType::f32, {3, 9, 11}});
    b.output(b.op(ir::Op::bmm, {x, y}));
  }
  EXPECT_EQ(run_and_compare(*backend, whole_graph_slice(bmm, "blas_sgemm", {}), artifact), "");
}

TEST(CpuTemplatePlugins, PluginRefusesWhatItCannotCompute) {
  auto backend = backend_with_blas();
  ir::Graph silu;  // an epilogue after the product
  {
    ir::Builder b(silu);
    auto x = b.input("a", {DType::f32, {8, 8}});
    auto y = b.input("b", {DType::f32, {8, 8}});
    b.output(b.op(ir::Op::silu, {b.op(ir::Op::matmul, {x, y})}));
  }
  struct Case {
    ir::Graph g;
    std::string why;
  };
  for (const Case& c :
       {Case{matmul_graph(8, 8, 8, DType::bf16), "not f32"}, Case{silu, "not a bare product"}}) {
    Artifact artifact;
    MeasureResult failure;
    ASSERT_TRUE(
        backend->build(whole_graph_slice(c.g, "blas_sgemm", {}), Regime::rank, artifact, failure)
            .ok());
    EXPECT_EQ(failure.failure, FailureKind::refused) << c.why;
    EXPECT_NE(failure.message.find("blas_sgemm: "), std::string::npos) << failure.message;
    EXPECT_NE(failure.message.find(c.why), std::string::npos) << failure.message;
  }
}

TEST(CpuTemplatePlugins, AssembledProgramMixesPluginAndBuiltInKernels) {
  // z = (a @ b) * 2 + 1 as two kernels: the product through the plugin, the rest pointwise.
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("a", {DType::f32, {24, 16}});
  auto y = b.input("b", {DType::f32, {16, 32}});
  auto p = b.op(ir::Op::matmul, {x, y});
  auto z = b.add(b.mul(p, b.constant(2.0)), b.constant(1.0));
  b.output(z);
  ir::Slice s = whole_graph_slice(g, "", {});
  ir::Kernel product, rest;
  for (ir::ValueId v : s.grouping.kernels[0].nodes) (v == p ? product : rest).nodes.push_back(v);
  product.templ = "blas_sgemm";
  rest.templ = "pointwise";
  s.grouping.kernels = {product, rest};

  PluginTemplates plugins{{"blas_sgemm", blas_sgemm()}};
  KernelSource program = generate_kernel(s, plugins);
  ASSERT_EQ(program.units.size(), 1u) << "the plugin's kernel is a unit of its own";
  EXPECT_EQ(program.units[0].rfind("#define emmy_kernel emmy_tk", 0), 0u) << program.units[0];
  EXPECT_NE(program.source.find("emmy_timed_kernels = 2"), std::string::npos);
  EXPECT_EQ(program.source.find("cblas"), std::string::npos) << "no BLAS code in the main unit";
  EXPECT_EQ(std::count(program.link_flags.begin(), program.link_flags.end(),
                       std::string(BLAS_SGEMM_LIBRARY)),
            1);

  auto backend = backend_with_blas();
  Artifact artifact;
  EXPECT_EQ(run_and_compare(*backend, s, artifact), "");
}

// A template that is never built: what the backend must refuse to take.
class Declared final : public KernelTemplate {
 public:
  Declared(std::string name, std::string backend, std::string of)
      : name_(std::move(name)), backend_(std::move(backend)), of_(std::move(of)) {}
  std::string name() const override { return name_; }
  std::string backend() const override { return backend_; }
  std::string alternative_to() const override { return of_; }
  std::vector<KnobSpec> knobs() const override { return {}; }
  Status generate(const ir::Graph&, const std::map<std::string, double>&, GeneratedKernel&,
                  std::string& refusal) noexcept override {
    refusal = "never built";
    return Status::Ok();
  }

 private:
  std::string name_, backend_, of_;
};

TEST(CpuTemplatePlugins, BackendRefusesTemplatesItCannotTake) {
  auto backend = backend_with_blas();
  struct Case {
    std::shared_ptr<KernelTemplate> t;
    std::string why;
  };
  for (const Case& c :
       {Case{std::make_shared<Declared>("gpu_gemm", "cuda", "matmul"), "for the cuda backend"},
        Case{std::make_shared<Declared>("matmul", "cpu", "matmul"),
             "already has a template named 'matmul'"},
        Case{std::make_shared<Declared>("blas_sgemm", "cpu", "matmul"),
             "already has a template named 'blas_sgemm'"},
        Case{std::make_shared<Declared>("odd", "cpu", "convolution"),
             "alternative to 'convolution'"},
        Case{std::make_shared<Declared>("odd", "cpu", "fallback"), "alternative to 'fallback'"}}) {
    Status s = backend->add_template(c.t);
    EXPECT_FALSE(s.ok()) << c.why;
    EXPECT_NE(s.message().find(c.why), std::string::npos) << s.message();
  }
  EXPECT_EQ(backend->capabilities().alternatives.at("matmul"),
            std::vector<std::string>{"blas_sgemm"});
}

}  // namespace
}  // namespace emmy::cpu::testing
