// Backends: generate source for a slice and a configuration, build it for a regime, and measure
// it on a device (docs/DESIGN.md, Backends and measurement).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "emmy/ir.hpp"
#include "emmy/status.hpp"

namespace emmy {

class KernelTemplate;  // emmy/kernel_template.hpp

enum class Regime : unsigned char { rank, deploy };
inline const char* to_string(Regime r) {
  return r == Regime::rank ? "rank" : "deploy";
}

// A knob the backend supports for a kernel template, with the values it accepts.
// The first value is the untuned default.
struct KnobSpec {
  std::string name;  // e.g. "tile_m"
  std::vector<double> values;
};

// A rule between knobs of one template (a conditional domain): the combinations of the values
// of `knobs` the template takes, as a table (one value per knob in each row). A configuration
// whose values of `knobs` are no row of `allowed` is refused by the template whatever the kernel,
// so the search never goes there: the lowering passes offer each knob fork only the values some
// row still allows beside the knobs already decided (emmy/knob_constraints.hpp, which also builds
// a table from a predicate). Refusals that depend on the kernel (its dtype, its strides) stay
// the backend's FailureKind::refused.
struct KnobConstraint {
  std::vector<std::string> knobs;
  std::vector<std::vector<double>> allowed;
  std::string reason;  // in words, e.g. "wgmma=1 needs warps a multiple of 4 per 64 rows"
};

// What a backend can build: for each kernel template, the knobs and their option sets.
// Lowering passes read this to declare their forks, in the order the knobs are listed: decisive
// knobs (the code path, the tile shape) first, so the search settles them before the fine ones.
struct BackendCaps {
  std::string backend;                                     // "cpu", "cuda"
  std::map<std::string, std::vector<KnobSpec>> templates;  // template name -> knobs
  // How many measurements the backend runs at once (one per GPU, or per CPU worker process).
  // measure() must then be safe to call from that many threads; the tuner tunes that many
  // distinct kernels side by side, each device taking one kernel at a time.
  int devices = 1;
  // Kernels in flight per device: while a device measures one kernel (never two at once), the
  // others are generated, built and checked on the host. 1 = strictly one kernel per device.
  int kernels_per_device = 1;
  // Other implementations of the kernels a template takes (e.g. "matmul" -> {"cublaslt"}: a
  // vendor library computing the same products). Each alternative is listed in `templates` with
  // its own knobs. The lowering pass of the template then asks the fork "<templ>.template"
  // (options: the template itself first, the untuned default, then each alternative) and only
  // the chosen one's knob forks. An alternative refuses (FailureKind::refused) a kernel it
  // cannot compute, so the search drops it at no cost in patience.
  std::map<std::string, std::vector<std::string>> alternatives = {};
  // Per template: the combinations of its knobs it refuses whatever the kernel (KnobConstraint).
  // The untuned default (each knob's first value) must satisfy them.
  std::map<std::string, std::vector<KnobConstraint>> constraints = {};
};

// A built candidate. `handle` is backend-defined (a path to a shared object or cubin).
struct Artifact {
  std::string handle;
  std::string source;  // the generated source (a library step: its plan line), for failure reports
};

// Host buffers for one kernel invocation, in the order of the slice's boundary.
struct Buffers {
  std::vector<std::vector<unsigned char>> tensors;
};

// refused: the template cannot take this knob combination for this kernel (nothing was built);
// the search drops it without spending patience on it.
enum class FailureKind : unsigned char {
  none,
  build_error,
  runtime_fault,
  timeout,
  wrong_result,
  refused
};
inline const char* to_string(FailureKind f) {
  switch (f) {
    case FailureKind::none:
      return "ok";
    case FailureKind::build_error:
      return "build_error";
    case FailureKind::runtime_fault:
      return "runtime_fault";
    case FailureKind::timeout:
      return "timeout";
    case FailureKind::wrong_result:
      return "wrong_result";
    case FailureKind::refused:
      return "refused";
  }
  return "?";
}

struct MeasureRequest {
  Buffers inputs;  // one per slice input (graph `input` nodes, in order)
  int warmup = 3;
  int samples = 15;
  double timeout_s = 20;  // per invocation of the worker
  // A program of several kernels (the assembled graph) is timed, by default, the way its kernels
  // were measured alone: each kernel after a cache flush of its own and timed on its own, a sample
  // adding up the kernels' equally ranked times (emmy/timing.hpp), so the validation gap compares
  // like with like. end_to_end times it as a framework runs it instead: one flush before each
  // sample, then every kernel back to back, one clock around them all (what a comparison with
  // PyTorch's whole-layer time needs; neighbouring kernels then share what stays in cache).
  bool end_to_end = false;
};

// One configuration of a template's knobs with what the library behind it says it runs there:
// `knobs` the template's (whole), `facts` numbers the prior may learn from where the knobs alone
// say little (cuBLASLt's `algo` is an index into a heuristic's list; its facts are the tile,
// split-K, cluster and waves of the algorithm at that index for this product). A fact is named
// "<template>.<fact>" (cublaslt.tile_m): the search merges it into the prior's questions and rows
// like a knob (core/search/knob_facts.hpp), and a prior tells by the prefix that a fact of the
// kernel's template it was not given is not known yet rather than absent (the mlp prior then
// shows it undecided, as it learnt it with a part of a row's inputs hidden).
struct KnobFacts {
  std::map<std::string, double> knobs;
  std::map<std::string, double> facts;
};

struct MeasureResult {
  FailureKind failure = FailureKind::none;
  std::string message;  // the failure's message (compiler output, signal, ...)
  double median_us = 0;
  std::vector<double> samples_us;
  Buffers outputs;  // one per slice output (graph outputs, in order)
  // Optional, from a measurement that succeeded: configurations of the measured kernel's
  // template (its own among them) described by the library it calls, so the search can tell
  // untried ones apart before it measures them. Empty where the backend or template has none.
  std::vector<KnobFacts> variants;
};

// Whose failure is it? The tuning database records facts about candidates; a failure row is
// served to every later run, so only the candidate's own failures may become one:
//  - The candidate's failure: Status Ok with MeasureResult.failure set. build(): the generated
//    source does not compile (build_error) or the template refuses the knobs (refused).
//    measure(): the kernel crashed its worker by a signal it raised itself (SIGSEGV, SIGBUS,
//    SIGFPE, SIGILL, SIGABRT, a CUDA illegal address or launch failure: runtime_fault), did not
//    finish within request.timeout_s (timeout). A wrong result is found by the caller.
//  - The machinery's failure: a non-ok Status. The worker binary is missing or cannot start,
//    exits on its own or is killed from outside (SIGKILL, SIGINT, SIGTERM), the device or driver
//    cannot be opened, the compiler cannot start or is killed, the disk is full, a request is
//    malformed. Nothing is stored; the tuner calls once more (the backend must then start a
//    fresh worker) and stops the run if that fails too.
// A backend that cannot measure at all on this machine (no driver, no device) refuses to be
// created: its plugin's constructor throws a message containing kUnavailableOnThisMachine and
// naming what is missing, so a run stops (or, choosing by itself, takes another backend) before
// its search, and the conformance suite tells it from a broken plugin.
inline constexpr const char* kUnavailableOnThisMachine = "unavailable on this machine";

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual BackendCaps capabilities() const = 0;
  // Backend, device name, driver/toolkit or compiler version: prefixes every measurement key.
  virtual std::string environment_fingerprint() const = 0;
  // Generates and builds. A compile error is not a Status error: it returns Ok with
  // result.failure = build_error and the compiler's message, so it becomes a failure row. A
  // non-ok Status is the machinery's failure (see above) and is never stored.
  // A slice of one kernel is a candidate. A slice of several kernels (Slice::grouping holds them,
  // each with its template and knobs) is one program, built and measured as a whole by this one
  // backend: the assembled graph at the end of a run, or a kernel carried with its producer. Its
  // kernels may name any template this backend builds, its template plugins' included, each
  // generated as it was tuned; a kernel naming a template the backend does not have is refused
  // (FailureKind::refused), never built as another one.
  virtual Status build(const ir::Slice& slice, Regime regime, Artifact& artifact,
                       MeasureResult& failure) noexcept = 0;
  // Runs the artifact on the request's inputs in an isolated worker; fills timings and outputs,
  // or result.failure for the candidate's own failure; a non-ok Status for the machinery's.
  virtual Status measure(const ir::Slice& slice, const Artifact& artifact,
                         const MeasureRequest& request, MeasureResult& result) noexcept = 0;
  // Takes a template plugin extending this backend (emmy/kernel_template.hpp), before the first
  // capabilities() or build(); the host calls it for every template plugin whose manifest names
  // this backend. From then on capabilities() lists it (templates, alternatives, constraints) and
  // build() generates its kernels through it. An error names why the backend cannot take it
  // (another backend's, a name it already has, an alternative to a template it lacks, a backend
  // that runs no template plugins: the default); the host then stops with that message.
  virtual Status add_template(std::shared_ptr<KernelTemplate> templ) noexcept {
    (void)templ;
    return Status::Error("the " + name() + " backend takes no template plugins");
  }
};

}  // namespace emmy
