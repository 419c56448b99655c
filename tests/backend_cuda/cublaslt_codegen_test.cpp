// The cublaslt template without a GPU (CI): the cuBLASLt call planned for each form it takes
// (transposes, leading dimensions, batch strides, epilogues, in cuBLASLt's column-major terms),
// refusals for what it cannot take, the plan's text and wire round trips, an assembled program
// mixing it with a generated kernel, and how the backend offers it.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include "codegen_harness.hpp"
#include "cublaslt_graphs.hpp"
#include "cublaslt_library.hpp"
#include "cublaslt_plugin_harness.hpp"
#include "cublaslt_template.hpp"
#include "cuda_backend.hpp"
#include "emmy/cuda_step.h"
#include "expr.hpp"
#include "module.hpp"
#include "plugin_host/plugin_host.hpp"
#include "templates.hpp"

namespace emmy::cuda {
namespace {

using test::Case;

GemmCall plan(const Case& c) {
  return plan_cublaslt(c.graph, test::cublaslt_knob_values(c.knobs));
}

CudaBackend& offline_backend() {
  static CudaBackend b(test::offline_test_options("emmy-cuda-cublaslt-codegen"));
  static CudaBackend& with = test::with_cublaslt(b);
  return with;
}

TEST(CublasLtPlan, LinearReadsTheWeightTransposedInPlace) {
  // D^T (200 x 128, column-major) = W (read transposed from [200, 96]) x X^T.
  GemmCall g = plan(test::cublaslt_linear_bf16());
  EXPECT_EQ(g.dtype, GemmCall::kBf16);
  EXPECT_EQ(g.m, 200);
  EXPECT_EQ(g.n, 128);
  EXPECT_EQ(g.k, 96);
  EXPECT_EQ(g.batch, 1);
  EXPECT_TRUE(g.trans_a);
  EXPECT_EQ(g.a.buffer, 1);  // w
  EXPECT_EQ(g.a.ld, 96);
  EXPECT_FALSE(g.trans_b);
  EXPECT_EQ(g.b.buffer, 0);  // x
  EXPECT_EQ(g.b.ld, 96);
  EXPECT_EQ(g.d.buffer, 2);  // the output follows the two inputs
  EXPECT_EQ(g.d.ld, 200);
  EXPECT_EQ(g.c.buffer, -1);
  EXPECT_EQ(g.epilogue, GemmCall::kEpilogueNone);
  EXPECT_EQ(g.algo, 0);
  EXPECT_EQ(g.workspace, 32ll << 20);  // the untuned default: 32 MiB
}

TEST(CublasLtPlan, MatmulWithRowMajorBNeedsNoTranspose) {
  GemmCall g = plan(test::cublaslt_matmul_f32_row_major_b());
  EXPECT_EQ(g.dtype, GemmCall::kF32);
  EXPECT_EQ(g.m, 112);
  EXPECT_EQ(g.n, 96);
  EXPECT_EQ(g.k, 80);
  EXPECT_FALSE(g.trans_a);
  EXPECT_EQ(g.a.buffer, 1);
  EXPECT_EQ(g.a.ld, 112);
  EXPECT_FALSE(g.trans_b);
  EXPECT_EQ(g.b.ld, 80);
  EXPECT_EQ(g.d.ld, 112);
}

TEST(CublasLtPlan, ATransposedViewOfBIsReadTransposed) {
  GemmCall g = plan(test::cublaslt_matmul_f32_transposed_b());
  EXPECT_EQ(g.m, 72);
  EXPECT_EQ(g.n, 64);
  EXPECT_EQ(g.k, 48);
  EXPECT_TRUE(g.trans_a);
  EXPECT_EQ(g.a.ld, 48);
  EXPECT_FALSE(g.trans_b);
}

TEST(CublasLtPlan, ABroadcastBBecomesOneTallerProduct) {
  GemmCall g = plan(test::cublaslt_matmul_f16_broadcast());
  EXPECT_EQ(g.dtype, GemmCall::kF16);
  EXPECT_EQ(g.batch, 1);
  EXPECT_EQ(g.n, 200);  // 2 x 100 rows
  EXPECT_EQ(g.m, 72);
  EXPECT_EQ(g.k, 256);
}

TEST(CublasLtPlan, BmmCarriesBatchStrides) {
  GemmCall g = plan(test::cublaslt_bmm_bf16());
  EXPECT_EQ(g.batch, 4);
  EXPECT_EQ(g.m, 47);
  EXPECT_EQ(g.n, 33);
  EXPECT_EQ(g.k, 64);
  EXPECT_EQ(g.a.batch_stride, 64 * 47);
  EXPECT_EQ(g.b.batch_stride, 33 * 64);
  EXPECT_EQ(g.d.batch_stride, 33 * 47);

  GemmCall t = plan(test::cublaslt_bmm_f32_transposed_b());
  EXPECT_EQ(t.batch, 4);
  EXPECT_TRUE(t.trans_a);  // k.transpose(1, 2): K contiguous
  EXPECT_EQ(t.a.ld, 64);
  EXPECT_EQ(t.a.batch_stride, 47 * 64);
}

TEST(CublasLtPlan, EpiloguesResidualAndBias) {
  // add(r, linear) then a view: C = r with beta = 1, D written in place of the view.
  GemmCall r = plan(test::cublaslt_linear_bf16_residual());
  EXPECT_EQ(r.c.buffer, 2);  // x, w, r
  EXPECT_EQ(r.c.ld, 96);
  EXPECT_EQ(r.d.buffer, 3);
  EXPECT_EQ(r.epilogue, GemmCall::kEpilogueNone);

  GemmCall b = plan(test::cublaslt_linear_f16_bias());
  EXPECT_EQ(b.epilogue, GemmCall::kEpilogueBias);
  EXPECT_EQ(b.bias, 2);
  EXPECT_EQ(b.c.buffer, -1);

  GemmCall a = plan(test::cublaslt_linear_f32_add_bias());
  EXPECT_EQ(a.epilogue, GemmCall::kEpilogueBias);
  EXPECT_EQ(a.bias, 2);
  EXPECT_EQ(a.m, 40);

  GemmCall q = plan(test::cublaslt_qwen_down_residual_bf16());
  EXPECT_EQ(q.m, 1024);
  EXPECT_EQ(q.n, 512);
  EXPECT_EQ(q.k, 3072);
  EXPECT_EQ(q.c.buffer, 2);
}

TEST(CublasLtPlan, GeluEpiloguesWithBiasResidualOrAlone) {
  GemmCall b = plan(test::cublaslt_linear_bf16_bias_gelu());
  EXPECT_EQ(b.epilogue, GemmCall::kEpilogueGeluBias);
  EXPECT_EQ(b.bias, 2);
  EXPECT_EQ(b.c.buffer, -1);

  GemmCall r = plan(test::cublaslt_linear_f16_residual_gelu());
  EXPECT_EQ(r.epilogue, GemmCall::kEpilogueGelu);
  EXPECT_EQ(r.c.buffer, 2);  // x, w, r: C = r, GELU applied after it
  EXPECT_EQ(r.bias, -1);
  EXPECT_EQ(r.n, 48);  // both batches as one taller product

  GemmCall f = plan(test::cublaslt_matmul_f32_gelu());
  EXPECT_EQ(f.epilogue, GemmCall::kEpilogueGelu);
  EXPECT_EQ(f.dtype, GemmCall::kF32);

  // The plan line carries the epilogue by name and reads back the same.
  const std::string text = render_gemm(b);
  EXPECT_NE(text.find("epilogue=gelu_bias"), std::string::npos) << text;
  EXPECT_EQ(parse_gemm(text, 4).epilogue, GemmCall::kEpilogueGeluBias);
}

TEST(CublasLtPlan, KnobsReachTheCall) {
  Case c = test::cublaslt_linear_bf16();
  c.knobs = {{"algo", 5}, {"workspace", 0}};
  GemmCall g = plan(c);
  EXPECT_EQ(g.algo, 5);
  EXPECT_EQ(g.workspace, 0);
}

TEST(CublasLtPlan, RefusesWhatCublasLtCannotTake) {
  for (const Case& c : test::cublaslt_refused_cases()) {
    try {
      plan(c);
      ADD_FAILURE() << c.name << " was planned";
    } catch (const KnobRefused& e) {
      EXPECT_EQ(std::string(e.what()).rfind("cublaslt: ", 0), 0u) << c.name << ": " << e.what();
    }
    // Through the backend: a refused candidate (no patience spent), never a fallback kernel.
    MeasureResult res = test::build_offline(offline_backend(), test::slice_of(c));
    EXPECT_EQ(res.failure, FailureKind::refused) << c.name << ": " << res.message;
  }
}

TEST(CublasLtPlan, TheModuleIsAPlanWithoutKernels) {
  for (const Case& c : test::cublaslt_cases()) {
    std::string used;
    std::string source = generate_source(test::slice_of(c), &used, test::cublaslt_plugins());
    EXPECT_EQ(used, "cublaslt") << c.name;
    Plan p = parse_plan(source);
    ASSERT_EQ(p.launches.size(), 1u) << c.name;
    ASSERT_TRUE(p.launches[0].is_library());
    EXPECT_FALSE(p.has_kernels());
    // The step names the plugin's library and its functions; its plan, read back into the
    // module's buffer numbers, is the planned call, every field.
    const LibraryStep& step = *p.launches[0].step;
    EXPECT_EQ(step.library, test::cublaslt_plugin_library());
    EXPECT_EQ(step.prefix, "emmy_cublaslt_step");
    GemmCall want = plan(c), got = module_gemm(step);
    EXPECT_EQ(render_gemm(got), render_gemm(want)) << c.name;
    // The plan line survives its text form.
    EXPECT_EQ(render_plan(parse_plan(render_plan(p))), render_plan(p)) << c.name;
    EXPECT_EQ(got.trans_a, want.trans_a);
    EXPECT_EQ(got.c.ld, want.c.ld);
    EXPECT_EQ(got.bias, want.bias);
    // Built without NVRTC: nothing to compile, the handle says so.
    Artifact art;
    MeasureResult failure;
    ASSERT_TRUE(offline_backend().build(test::slice_of(c), Regime::rank, art, failure).ok());
    EXPECT_EQ(failure.failure, FailureKind::none) << c.name << ": " << failure.message;
    EXPECT_EQ(art.handle, CudaBackend::kLibraryOnlyHandle);
  }
}

TEST(CublasLtPlan, AViewWithTwoStridesInADimIsPackedFirst) {
  Case c = test::cublaslt_o_proj_packed_residual_bf16();
  // In place it cannot be read: refused by the plan alone.
  EXPECT_THROW(plan(c), KnobRefused);
  // The module copies it contiguous first, then calls cuBLASLt on the copy.
  std::string used;
  std::string source = generate_source(test::slice_of(c), &used, test::cublaslt_plugins());
  EXPECT_EQ(used, "cublaslt");
  Plan p = parse_plan(source);
  ASSERT_EQ(p.launches.size(), 2u);
  EXPECT_FALSE(p.launches[0].is_library());
  EXPECT_EQ(p.launches[0].kernel, "emmy_pack0");
  ASSERT_TRUE(p.launches[1].is_library());
  const GemmCall g = module_gemm(*p.launches[1].step);
  ASSERT_EQ(p.scratch_bytes.size(), 1u);
  EXPECT_EQ(p.scratch_bytes[0], 16 * 128 * 2);
  EXPECT_EQ(g.b.buffer, 4);  // attn, w, r, the output, then the scratch copy
  EXPECT_EQ(g.b.ld, 128);
  EXPECT_FALSE(g.trans_b);
  EXPECT_EQ(g.c.buffer, 2);
  EXPECT_EQ(g.k, 128);
  EXPECT_EQ(g.n, 16);
  EXPECT_EQ(g.m, 64);
  MeasureResult res = test::build_offline(offline_backend(), test::slice_of(c));
  EXPECT_EQ(res.failure, FailureKind::none) << res.message;
}

TEST(CublasLtPlan, MalformedPlansAreRejected) {
  // The step's plan line: its structure is the backend's business (parse_plan) ...
  const std::string gemm =
      "dtype=bf16 ta=T tb=N m=8 n=8 k=8 batch=1 a=1,8,0 b=0,8,0 c=-1,0,0 d=2,8,0 "
      "bias=-1 epilogue=none algo=0 workspace=0";
  const std::string good =
      "//@emmy step 0 /x/libemmy_cublaslt.so emmy_cublaslt_step 3 4 0 5 : " + gemm + "\n";
  Plan p = parse_plan(good);
  ASSERT_EQ(p.launches.size(), 1u);
  ASSERT_TRUE(p.launches[0].is_library());
  EXPECT_EQ(p.launches[0].step->library, "/x/libemmy_cublaslt.so");
  EXPECT_EQ(p.launches[0].step->buffers, (std::vector<int64_t>{4, 0, 5}));
  EXPECT_EQ(p.launches[0].step->plan, gemm);
  EXPECT_EQ(module_gemm(*p.launches[0].step).d.buffer, 5);
  for (const std::string& bad :
       {std::string("//@emmy step 0 /x/lib.so emmy_cublaslt_step 3 4 0 : " + gemm +
                    "\n"),  // 2 of 3 buffers
        std::string("//@emmy step 0 /x/lib.so emmy_cublaslt_step 3 4 0 5 " + gemm +
                    "\n"),  // no ':'
        std::string("//@emmy step -1 /x/lib.so emmy_cublaslt_step 3 4 0 5 : " + gemm + "\n"),
        std::string("//@emmy step 0 /x/lib.so 9prefix 3 4 0 5 : " + gemm + "\n"),
        std::string("//@emmy step 0 /x/lib.so emmy_cublaslt_step 3 4 -1 5 : " + gemm + "\n"),
        std::string("//@emmy step 0 /x/lib.so emmy_cublaslt_step 3 4 0 5 : \n")})
    EXPECT_THROW(parse_plan(bad), Error) << bad;
  // ... its plan the library's (parse_gemm, in the step's prepare), every field checked.
  EXPECT_NO_THROW(parse_gemm(gemm, 3));
  EXPECT_THROW(parse_gemm(gemm, 2), std::invalid_argument);  // d names buffer 2
  for (const std::string& bad :
       {std::string("dtype=f64 ta=T tb=N m=8 n=8 k=8 batch=1 a=1,8,0 b=0,8,0 c=-1,0,0 d=2,8,0 "
                    "bias=-1 epilogue=none algo=0 workspace=0"),
        std::string("dtype=bf16 ta=X tb=N m=8 n=8 k=8 batch=1 a=1,8,0 b=0,8,0 c=-1,0,0 d=2,8,0 "
                    "bias=-1 epilogue=none algo=0 workspace=0"),
        std::string("dtype=bf16 ta=T tb=N m=8 n=8 k=8 batch=1 a=1,4,0 b=0,8,0 c=-1,0,0 d=2,8,0 "
                    "bias=-1 epilogue=none algo=0 workspace=0"),
        std::string("dtype=bf16 ta=T tb=N m=8 n=8 k=8 batch=1 a=1,8,0 b=0,8,0 c=-1,0,0 d=2,8,0 "
                    "bias=-1 epilogue=none algo=0"),
        std::string("dtype=bf16 ta=T tb=N m=8 n=8 k=8 batch=1 a=1,8,0 b=0,8,0 c=-1,0,0 d=2,8,0 "
                    "bias=-1 epilogue=bias algo=0 workspace=0"),
        std::string("dtype=bf16 ta=T tb=N m=8 n=8 k=8 batch=1 a=1,8,0 b=0,8,0 c=-1,0,0 d=2,8,0 "
                    "bias=-1 epilogue=gelu_bias algo=0 workspace=0"),
        std::string("dtype=bf16 ta=T tb=N m=8 n=8 k=8 batch=1 a=1,8,0 b=0,8,0 c=-1,0,0 d=2,8,0 "
                    "bias=-1 epilogue=relu algo=0 workspace=0"),
        std::string("dtype=bf16 ta=T tb=N m=8 n=8 k=8 batch=1 a=1,8,0 b=0,8,0 c=-1,0,0 d=2,8,0 "
                    "bias=-1 epilogue=none algo=0 workspace=0 extra=1")})
    EXPECT_THROW(parse_gemm(bad, 3), std::invalid_argument) << bad;
}

TEST(CublasLtWire, TheLibraryStepSurvivesTheWire) {
  GemmCall g = plan(test::cublaslt_bmm_f32_transposed_b());
  g.c = {3, 47, 33 * 47};
  g.bias = 2;
  g.epilogue = GemmCall::kEpilogueBias;
  g.algo = 6;
  g.workspace = 1 << 20;
  LibraryStep step{"/x/libemmy_cublaslt.so", "emmy_cublaslt_step", render_gemm(g), {7, 0, 9, 4, 8}};
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  wire::Writer o;
  o.put(wire::kLaunchStep);
  wire::put_step(o, step);
  o.put(int64_t(4));
  ASSERT_TRUE(o.send(fds[0]));
  wire::Reader in{fds[1]};
  EXPECT_EQ(in.get<uint32_t>(), wire::kLaunchStep);
  LibraryStep r = wire::get_step(in);
  EXPECT_EQ(in.get<int64_t>(), 4);
  ASSERT_TRUE(in.ok);
  ::close(fds[0]);
  ::close(fds[1]);
  EXPECT_EQ(r.library, step.library);
  EXPECT_EQ(r.prefix, step.prefix);
  EXPECT_EQ(r.buffers, step.buffers);
  // Every field of the call as sent: compared through its text form, which names each one.
  EXPECT_EQ(render_gemm(parse_gemm(r.plan, 5)), render_gemm(g));
  EXPECT_EQ(parse_gemm(r.plan, 5).c.batch_stride, 33 * 47);
  EXPECT_THROW(parse_gemm(r.plan, 3), std::invalid_argument);  // C names buffer 3
}

// The plugin's shared library exports the step's functions (emmy/cuda_step.h) the worker
// resolves, and its prepare refuses a malformed plan with a message, before touching the library
// or a device (what it does with a good one needs a GPU: cublaslt_gpu_test).
TEST(CublasLtStep, ThePluginExportsTheStepFunctions) {
  const std::string path = EMMY_BUILD_DIR "/lib/emmy/plugins/libemmy_cublaslt.so";
  void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << path << ": " << ::dlerror();
  auto abi =
      reinterpret_cast<EmmyCudaStepAbiVersionFn>(::dlsym(lib, "emmy_cublaslt_step_abi_version"));
  auto prepare =
      reinterpret_cast<EmmyCudaStepPrepareFn>(::dlsym(lib, "emmy_cublaslt_step_prepare"));
  ASSERT_NE(abi, nullptr);
  ASSERT_NE(prepare, nullptr);
  EXPECT_NE(::dlsym(lib, "emmy_cublaslt_step_workspace_bytes"), nullptr);
  EXPECT_NE(::dlsym(lib, "emmy_cublaslt_step_run"), nullptr);
  EXPECT_NE(::dlsym(lib, "emmy_cublaslt_step_release"), nullptr);
  // The optional one: what cuBLASLt algorithm a step runs (cublaslt_describe_gpu_test).
  EXPECT_NE(::dlsym(lib, "emmy_cublaslt_step_describe"), nullptr);
  // Nothing else leaks out of the plugin but its entry point.
  EXPECT_NE(::dlsym(lib, "emmy_plugin_info"), nullptr);
  EXPECT_EQ(::dlsym(lib, "_ZN4emmy4cuda14cublaslt_knobsEv"),
            nullptr);  // emmy::cuda::cublaslt_knobs()
  EXPECT_EQ(abi(), EMMY_CUDA_STEP_ABI_VERSION);
  int status = EMMY_CUDA_STEP_OK;
  char message[256] = "";
  const std::string plan =
      "dtype=bf16 ta=T tb=N m=8 n=8 k=8 batch=1 a=1,8,0 b=0,8,0 c=-1,0,0 d=2,8,0 "
      "bias=-1 epilogue=none algo=0 workspace=0";
  EXPECT_EQ(prepare(plan.data(), plan.size(), 2, &status, message, sizeof message),
            nullptr);  // d is buffer 2
  EXPECT_EQ(status, EMMY_CUDA_STEP_FAILED);
  EXPECT_NE(std::string(message).find("D names no buffer"), std::string::npos) << message;
  const std::string broken = "dtype=bf16 nonsense";
  EXPECT_EQ(prepare(broken.data(), broken.size(), 3, &status, message, 8), nullptr);
  EXPECT_EQ(status, EMMY_CUDA_STEP_FAILED);
  EXPECT_EQ(std::string(message).size(), 7u);  // cut to the room given, NUL-terminated
}

TEST(CublasLtProgram, MixesTheLibraryStepWithAGeneratedKernel) {
  ir::Slice s = test::cublaslt_with_pointwise_program();
  std::string source = generate_source(s, nullptr, test::cublaslt_plugins());
  Plan p = parse_plan(source);
  ASSERT_GE(p.launches.size(), 2u);
  // The product first (the pointwise kernel reads it), into the program's buffer of y: the
  // graph's second output (inputs x, w, then outputs z, y).
  ASSERT_TRUE(p.launches[0].is_library());
  const GemmCall g = module_gemm(*p.launches[0].step);
  EXPECT_EQ(g.b.buffer, 0);
  EXPECT_EQ(g.a.buffer, 1);
  EXPECT_EQ(g.d.buffer, 3);
  EXPECT_EQ(p.launches[0].group, 0);
  EXPECT_FALSE(p.launches[1].is_library());
  EXPECT_EQ(p.launches[1].group, 1);
  EXPECT_TRUE(p.has_kernels());
  MeasureResult res = test::build_offline(offline_backend(), s);
  EXPECT_EQ(res.failure, FailureKind::none) << res.message;
}

TEST(CublasLtBackend, OfferedBesideTheMatmulOnlyAsAPlugin) {
  // Built in no more: a backend without the plugin offers no alternative and names no library.
  CudaBackend bare(test::offline_test_options("emmy-cuda-cublaslt-bare"));
  EXPECT_EQ(bare.capabilities().templates.count("cublaslt"), 0u);
  EXPECT_TRUE(bare.capabilities().alternatives.empty());
  EXPECT_EQ(bare.environment_fingerprint().find("cublasLt"), std::string::npos);
  std::string why;
  EXPECT_FALSE(bare.offers_cublaslt(&why));
  // And a kernel naming it is refused there, never built as something else.
  MeasureResult refused = test::build_offline(bare, test::slice_of(test::cublaslt_linear_bf16()));
  EXPECT_EQ(refused.failure, FailureKind::refused) << refused.message;

  // The plugin's own description: the knobs and the manifest's EXTENDS / alternative.
  auto plugin = test::cublaslt_template();
  EXPECT_EQ(plugin->name(), "cublaslt");
  EXPECT_EQ(plugin->backend(), "cuda");
  EXPECT_EQ(plugin->alternative_to(), "matmul");
  // algo 0 (the heuristic's first) and a workspace are the untuned default.
  ASSERT_EQ(plugin->knobs().size(), 2u);
  EXPECT_EQ(plugin->knobs().at(0).name, "algo");
  EXPECT_EQ(plugin->knobs().at(0).values.at(0), 0);
  EXPECT_EQ(plugin->knobs().at(1).name, "workspace");
  EXPECT_EQ(plugin->knobs().at(1).values.at(0), 32);

  // cublaslt=0: taken (the host attaches it whatever the option) but not offered.
  PluginOptions off = test::offline_test_options("emmy-cuda-cublaslt-off");
  off["cublaslt"] = "0";
  CudaBackend without(off);
  ASSERT_TRUE(without.add_template(test::cublaslt_template()).ok());
  BackendCaps caps = without.capabilities();
  EXPECT_EQ(caps.templates.count("cublaslt"), 0u);
  EXPECT_TRUE(caps.alternatives.empty());
  EXPECT_EQ(without.environment_fingerprint().find("cublasLt"), std::string::npos);
  EXPECT_FALSE(without.offers_cublaslt(&why));
  EXPECT_EQ(why, "the backend option cublaslt=0");
  refused = test::build_offline(without, test::slice_of(test::cublaslt_linear_bf16()));
  EXPECT_EQ(refused.failure, FailureKind::refused) << refused.message;

  PluginOptions bad = off;
  bad["cublaslt"] = "yes";
  EXPECT_THROW(CudaBackend{bad}, Error);

  const CublasLtLibrary& lib = cublaslt_library();
  if (!lib.present) GTEST_SKIP() << "libcublasLt does not load here: " << lib.why;
  EXPECT_EQ(lib.version.rfind("13.", 0), 0u) << lib.version;
  EXPECT_EQ(plugin->fingerprint(), "cublasLt " + lib.version);
  BackendCaps with = offline_backend().capabilities();
  EXPECT_EQ(with.templates.count("cublaslt"), 1u);
  EXPECT_EQ(with.alternatives.at("matmul"), std::vector<std::string>{"cublaslt"});
  EXPECT_EQ(with.templates.at("cublaslt").at(0).name, "algo");
  // The fingerprint ends as it did when cuBLASLt was built in, so stored rows keep matching.
  const std::string fp = offline_backend().environment_fingerprint();
  EXPECT_EQ(fp.substr(fp.size() - std::string("|cublasLt " + lib.version).size()),
            "|cublasLt " + lib.version)
      << fp;
  EXPECT_EQ(fp.substr(0, fp.size() - std::string("|cublasLt " + lib.version).size()),
            bare.environment_fingerprint());
}

// A stand-in template plugin, to see what the backend refuses.
class OtherTemplate : public KernelTemplate {
 public:
  OtherTemplate(std::string name, std::string backend, std::string of)
      : name_(std::move(name)), backend_(std::move(backend)), of_(std::move(of)) {}
  std::string name() const override { return name_; }
  std::string backend() const override { return backend_; }
  std::string alternative_to() const override { return of_; }
  std::vector<KnobSpec> knobs() const override { return {{"x", {1}}}; }
  Status generate(const ir::Graph&, const std::map<std::string, double>&, GeneratedKernel&,
                  std::string& refusal) noexcept override {
    refusal = "never";
    return Status::Ok();
  }

 private:
  std::string name_, backend_, of_;
};

TEST(CublasLtBackend, TakesCudaTemplatePluginsAndRefusesOthers) {
  CudaBackend b(test::offline_test_options("emmy-cuda-cublaslt-refuses"));
  // Any cuda template is taken (its library steps go through emmy/cuda_step.h) and offered.
  Status s = b.add_template(std::make_shared<OtherTemplate>("cutlass", "cuda", "matmul"));
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(b.capabilities().templates.count("cutlass"), 1u);
  EXPECT_EQ(b.capabilities().alternatives.at("matmul"), std::vector<std::string>{"cutlass"});
  // What it refuses is a refused candidate under its name.
  Case c = test::cublaslt_linear_bf16();
  ir::Slice other = test::slice_of(c);
  other.grouping.kernels.back().templ = "cutlass";
  other.grouping.kernels.back().knobs = {};
  MeasureResult refused = test::build_offline(b, other);
  EXPECT_EQ(refused.failure, FailureKind::refused);
  EXPECT_NE(refused.message.find("cutlass: never"), std::string::npos) << refused.message;
  s = b.add_template(std::make_shared<OtherTemplate>("cutlass", "cuda", "matmul"));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("already has a template named 'cutlass'"), std::string::npos)
      << s.message();
  s = b.add_template(std::make_shared<OtherTemplate>("matmul", "cuda", "matmul"));
  EXPECT_FALSE(s.ok());
  s = b.add_template(std::make_shared<OtherTemplate>("cublaslt", "cpu", "matmul"));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("for the cpu backend, not cuda"), std::string::npos) << s.message();
  s = b.add_template(std::make_shared<OtherTemplate>("cublaslt", "cuda", "fallback"));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("alternative to 'fallback'"), std::string::npos) << s.message();
  EXPECT_FALSE(b.add_template(nullptr).ok());
  ASSERT_TRUE(b.add_template(test::cublaslt_template()).ok());
  s = b.add_template(test::cublaslt_template());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("already has a template named 'cublaslt'"), std::string::npos)
      << s.message();
}

TEST(CublasLtBackend, APluginRefusalIsARefusedCandidateNamingIt) {
  // What the plugin refuses reaches the search as before: "cublaslt: <why>".
  Case c = test::cublaslt_refused_cases().at(0);
  try {
    generate_source(test::slice_of(c), nullptr, test::cublaslt_plugins());
    ADD_FAILURE() << c.name << " was generated";
  } catch (const KnobRefused& e) {
    EXPECT_EQ(std::string(e.what()).rfind("cublaslt: ", 0), 0u) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("cublaslt: cublaslt: ", 0), std::string::npos)
        << e.what();
  }
  // A knob value outside its declared set is the caller's error, not a candidate.
  Case bad = test::cublaslt_linear_bf16();
  bad.knobs["algo"] = 99;
  EXPECT_THROW(generate_source(test::slice_of(bad), nullptr, test::cublaslt_plugins()), Error);
}

}  // namespace
}  // namespace emmy::cuda

namespace emmy::cuda {
namespace {

// The conformance suite checks a backend's knobs against its manifest only where the backend can
// be created (a GPU); here the backend offline, with the cublaslt plugin: every knob a template
// offers is declared by the manifests (the backend's or the template plugin's KNOBS) and by the
// lowering pass that asks its forks (the persistent attention knob once was not).
TEST(CudaManifests, EveryKnobTheBackendOffersIsDeclared) {
  PluginHost host;
  host.discover({EMMY_PLUGIN_DIR});
  auto knobs_of = [&](const std::string& name) {
    std::set<std::string> out;
    for (const PluginRecord& r : host.records())
      if (r.name == name)
        for (const ManifestKnob& k : r.knobs) out.insert(k.name);
    EXPECT_FALSE(out.empty()) << "no manifest (or no KNOBS) for " << name;
    return out;
  };
  std::set<std::string> declared = knobs_of("cuda");
  for (const std::string& k : knobs_of("cublaslt")) declared.insert(k);
  const BackendCaps caps = offline_backend().capabilities();
  ASSERT_EQ(caps.templates.count("cublaslt"), 1u);
  for (const auto& [templ, knobs] : caps.templates) {
    if (knobs.empty()) continue;
    const std::string pass = "lower_" + (templ == "cublaslt" ? std::string("matmul") : templ);
    const std::set<std::string> asked = knobs_of(pass);
    for (const KnobSpec& k : knobs) {
      EXPECT_TRUE(declared.count(k.name))
          << templ << " offers '" << k.name << "', no manifest declares it";
      EXPECT_TRUE(asked.count(k.name))
          << templ << " offers '" << k.name << "', " << pass << " does not declare it";
    }
  }
}

}  // namespace
}  // namespace emmy::cuda
