// cuBLASLt for the cublaslt plugin's step (cublaslt_runner.hpp): the library's entry points
// resolved by dlsym, one handle per worker process (the worker keeps the plugin loaded), and
// descriptors per step.
#include "cublaslt_runner.hpp"

#include <cublasLt.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "cublaslt_enums.hpp"  // generated from the toolkit's cublasLt.h (CMakeLists.txt)

namespace emmy::cuda {

namespace {

// The entry points the worker uses, typed from the header it was built against.
struct Api {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtGetStatusString) status_string = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  decltype(&cublasLtMatmulAlgoConfigGetAttribute) algo_get = nullptr;
  cublasLtHandle_t handle = nullptr;
  std::string error;  // why the library cannot be used
};

// Loaded once per process; never unloaded.
Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> names = {"libcublasLt.so.13", "libcublasLt.so"};
#ifdef EMMY_CUDA_LIBRARY_DIR
    names.push_back(std::string(EMMY_CUDA_LIBRARY_DIR) + "/libcublasLt.so.13");
#endif
    void* lib = nullptr;
    std::string why;
    for (const std::string& n : names) {
      lib = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
      if (why.empty()) {
        const char* e = ::dlerror();
        why = e ? e : n + " does not load";
      }
    }
    if (!lib) {
      a.error = "cublaslt unavailable: " + why;
      return;
    }
    bool ok = true;
    auto bind = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
      if (!fn && ok) {
        ok = false;
        a.error = std::string("cublaslt unavailable: the library has no ") + name;
      }
    };
    bind(a.create, "cublasLtCreate");
    bind(a.destroy, "cublasLtDestroy");
    bind(a.status_string, "cublasLtGetStatusString");
    bind(a.desc_create, "cublasLtMatmulDescCreate");
    bind(a.desc_destroy, "cublasLtMatmulDescDestroy");
    bind(a.desc_set, "cublasLtMatmulDescSetAttribute");
    bind(a.layout_create, "cublasLtMatrixLayoutCreate");
    bind(a.layout_destroy, "cublasLtMatrixLayoutDestroy");
    bind(a.layout_set, "cublasLtMatrixLayoutSetAttribute");
    bind(a.pref_create, "cublasLtMatmulPreferenceCreate");
    bind(a.pref_destroy, "cublasLtMatmulPreferenceDestroy");
    bind(a.pref_set, "cublasLtMatmulPreferenceSetAttribute");
    bind(a.heuristic, "cublasLtMatmulAlgoGetHeuristic");
    bind(a.matmul, "cublasLtMatmul");
    bind(a.algo_get, "cublasLtMatmulAlgoConfigGetAttribute");
    if (!ok) return;
    // The handle binds to the current context (the worker's primary context, made current first).
    cublasStatus_t s = a.create(&a.handle);
    if (s != CUBLAS_STATUS_SUCCESS) {
      a.error = std::string("cublaslt unavailable: cublasLtCreate: ") + a.status_string(s);
      a.handle = nullptr;
    }
  });
  return a;
}

void check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw std::runtime_error(std::string("cublaslt: ") + what + ": " + api().status_string(s));
}

cudaDataType_t data_type(uint32_t t) {
  return t == GemmCall::kBf16 ? CUDA_R_16BF : t == GemmCall::kF16 ? CUDA_R_16F : CUDA_R_32F;
}

// Enough of the heuristic's list for every algo knob value (0..7), and some to spare.
constexpr int kHeuristicCount = 16;
// The algo knob's values (the template's KNOBS algo=0..7): the variants a step reports.
constexpr int kAlgoKnobValues = 8;

// An attribute of an algorithm's configuration, in the width the header gives it; false when the
// library cannot read it.
template <class T>
bool algo_attribute(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr,
                    T& value) {
  size_t written = 0;
  return api().algo_get(&algo, attr, &value, sizeof value, &written) == CUBLAS_STATUS_SUCCESS &&
         written == sizeof value;
}

// The shape an enum value names (lt_enums, generated from cublasLt.h), or null for id 0
// (UNDEFINED / AUTO) and ids this build does not know.
template <size_t N>
const lt_enums::Shape* enum_shape(const lt_enums::Shape (&table)[N], uint32_t id) {
  if (id == 0) return nullptr;
  for (const lt_enums::Shape& s : table)
    if (s.id == id) return &s;
  return nullptr;
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

}  // namespace

struct CublasLtStep::Impl {
  GemmCall call;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  uint64_t workspace = 0;
  float waves = 0;  // the heuristic's estimate for the chosen algorithm (1: the GPU full once)
  // The heuristic's list as the algo knob can index it (at most kAlgoKnobValues): variants().
  std::vector<cublasLtMatmulHeuristicResult_t> listed;

  ~Impl() {
    Api& x = api();
    if (desc) x.desc_destroy(desc);
    for (cublasLtMatrixLayout_t l : {a, b, c, d})
      if (l) x.layout_destroy(l);
  }
};

CublasLtStep::CublasLtStep(const GemmCall& g) : impl_(std::make_unique<Impl>()) {
  Api& x = api();
  if (!x.handle) throw std::runtime_error(x.error);
  std::string problem = gemm_problem(g, INT64_MAX);
  if (!problem.empty()) throw std::runtime_error(problem);
  Impl& s = *impl_;  // destroyed with impl_ whatever happens below
  s.call = g;
  const cudaDataType_t type = data_type(g.dtype);
  // f32 accumulation for every type; for f32 operands that is exact f32 (not TF32, which is
  // CUBLAS_COMPUTE_32F_FAST_TF32), as the interpreter computes.
  check(x.desc_create(&s.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                          tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(x.desc_set(s.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
  check(x.desc_set(s.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
  if (g.epilogue != GemmCall::kEpilogueNone) {
    const cublasLtEpilogue_t e = g.epilogue == GemmCall::kEpilogueBias ? CUBLASLT_EPILOGUE_BIAS
                                 : g.epilogue == GemmCall::kEpilogueGelu
                                     ? CUBLASLT_EPILOGUE_GELU
                                     : CUBLASLT_EPILOGUE_GELU_BIAS;
    check(x.desc_set(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e), "epilogue");
  }
  auto layout = [&](cublasLtMatrixLayout_t& l, int64_t rows, int64_t cols,
                    const GemmCall::Matrix& m) {
    check(x.layout_create(&l, type, uint64_t(rows), uint64_t(cols), m.ld),
          "cublasLtMatrixLayoutCreate");
    if (g.batch > 1) {
      const int32_t count = int32_t(g.batch);
      const int64_t stride = m.batch_stride;
      check(x.layout_set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
            "batch count");
      check(x.layout_set(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
            "batch stride");
    }
  };
  layout(s.a, g.a_rows(), g.a_cols(), g.a);
  layout(s.b, g.b_rows(), g.b_cols(), g.b);
  layout(s.d, g.m, g.n, g.d);
  layout(s.c, g.m, g.n, g.c.buffer >= 0 ? g.c : g.d);

  cublasLtMatmulPreference_t pref = nullptr;
  check(x.pref_create(&pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t max_ws = uint64_t(g.workspace);
  cublasStatus_t st =
      x.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws);
  cublasLtMatmulHeuristicResult_t results[kHeuristicCount] = {};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = x.heuristic(x.handle, s.desc, s.a, s.b, s.c, s.d, pref, kHeuristicCount, results, &found);
  x.pref_destroy(pref);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED)
    throw LibraryRefused("cublaslt: no algorithm for this product (" +
                         std::string(gemm_dtype_name(g.dtype)) + " m=" + std::to_string(g.m) +
                         " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) + ")");
  check(st, "cublasLtMatmulAlgoGetHeuristic");
  if (g.algo >= found || results[g.algo].state != CUBLAS_STATUS_SUCCESS)
    throw LibraryRefused("cublaslt: the heuristic offers " + std::to_string(found) +
                         " algorithms for this product (workspace " +
                         std::to_string(g.workspace >> 20) +
                         " MiB); algo=" + std::to_string(g.algo) + " is past them");
  s.listed.assign(results, results + std::min(found, kAlgoKnobValues));
  s.algo = results[g.algo].algo;
  s.workspace = results[g.algo].workspaceSize;
  s.waves = results[g.algo].wavesCount;
}

CublasLtStep::~CublasLtStep() = default;

uint64_t CublasLtStep::workspace_bytes() const {
  return impl_->workspace;
}

std::string CublasLtStep::describe() const {
  const cublasLtMatmulAlgo_t& algo = impl_->algo;
  // Each attribute in the width the header gives it; one the library cannot read is left out.
  auto attribute = [&](cublasLtMatmulAlgoConfigAttributes_t attr, auto zero, const char* name) {
    auto value = zero;
    if (!algo_attribute(algo, attr, value)) return std::string();
    return std::string(" ") + name + "=" + std::to_string(value);
  };
  std::string text =
      "waves=" + std::to_string(impl_->waves) + " workspace=" + std::to_string(impl_->workspace);
  text += attribute(CUBLASLT_ALGO_CONFIG_ID, int32_t(0), "id");
  text += attribute(CUBLASLT_ALGO_CONFIG_TILE_ID, uint32_t(0), "tile");
  text += attribute(CUBLASLT_ALGO_CONFIG_STAGES_ID, uint32_t(0), "stages");
  text += attribute(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, int32_t(0), "splitk");
  text += attribute(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, uint32_t(0), "reduction");
  text += attribute(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, uint32_t(0), "swizzle");
  text += attribute(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, uint32_t(0), "custom");
  text += attribute(CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, uint16_t(0), "inner");
  text += attribute(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, uint16_t(0), "cluster");
  return text;
}

std::string CublasLtStep::variants() const {
  const Impl& s = *impl_;
  std::string text;
  for (size_t i = 0; i < s.listed.size(); ++i) {
    const cublasLtMatmulHeuristicResult_t& r = s.listed[i];
    if (r.state != CUBLAS_STATUS_SUCCESS) continue;  // no algorithm at this index
    std::string line =
        "algo=" + std::to_string(i) + " workspace=" + std::to_string(s.call.workspace >> 20) + " |";
    auto fact = [&](const char* name, double v) {
      line += std::string(" ") + name + "=" + number(v);
    };
    // cuBLASLt computes Emmy's row-major D[M,N] as its column-major D^T (its m = Emmy's N, its
    // n = Emmy's M: cublaslt_template.cpp), so a tile CUBLASLT_MATMUL_TILE_<a>x<b> covers b rows
    // of Emmy's M and a columns of its N; likewise a cluster <a>x<b>x1 of CTAs. The facts are in
    // Emmy's orientation: cublaslt.tile_m = b, cublaslt.tile_n = a.
    uint32_t tile = 0;
    if (algo_attribute(r.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, tile))
      if (const lt_enums::Shape* t = enum_shape(lt_enums::kTiles, tile)) {
        fact("cublaslt.tile_m", t->b);
        fact("cublaslt.tile_n", t->a);
      }
    fact("cublaslt.waves", r.wavesCount);
    int32_t splitk = 0;
    if (algo_attribute(r.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, splitk))
      fact("cublaslt.splitk", splitk);
    uint16_t cluster = 0;  // 0: AUTO, left out
    if (algo_attribute(r.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, cluster))
      if (const lt_enums::Shape* c = enum_shape(lt_enums::kClusters, cluster)) {
        fact("cublaslt.cluster_m", c->b);
        fact("cublaslt.cluster_n", c->a);
      }
    // CUBLASLT_MATMUL_STAGES_<width>x<depth>: the depth, 0 where it is <width>xAUTO (the kernel
    // picks it); UNDEFINED is left out.
    uint32_t stages = 0;
    if (algo_attribute(r.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, stages))
      if (const lt_enums::Shape* st = enum_shape(lt_enums::kStages, stages))
        fact("cublaslt.stages", st->b);
    if (!text.empty()) text += "\n";
    text += line;
  }
  return text;
}

void CublasLtStep::run(const uint64_t* buffers, uint64_t workspace, void* stream) {
  Api& x = api();
  Impl& s = *impl_;
  const GemmCall& g = s.call;
  auto ptr = [&](int64_t i) { return reinterpret_cast<void*>(buffers[size_t(i)]); };
  // The bias pointer is an attribute of the descriptor, set on every run: the buffers are the
  // request's, known only now (a host-side call, so it is fine inside a stream capture).
  if (g.bias >= 0) {
    const void* bias = ptr(g.bias);
    check(x.desc_set(s.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
          "bias pointer");
  }
  const float alpha = 1.0f, beta = g.c.buffer >= 0 ? 1.0f : 0.0f;
  void* d = ptr(g.d.buffer);
  const void* c = g.c.buffer >= 0 ? ptr(g.c.buffer) : d;
  check(x.matmul(x.handle, s.desc, &alpha, ptr(g.a.buffer), s.a, ptr(g.b.buffer), s.b, &beta, c,
                 s.c, d, s.d, &s.algo, s.workspace ? reinterpret_cast<void*>(workspace) : nullptr,
                 s.workspace, static_cast<cudaStream_t>(stream)),
        "cublasLtMatmul");
}

}  // namespace emmy::cuda
