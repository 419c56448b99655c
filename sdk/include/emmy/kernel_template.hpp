// Kernel templates as plugins (docs/PLUGINS.md, "Kernel templates"): a plugin of kind `template`
// adds one implementation of a kernel template's kernels (an *alternative*, e.g. a BLAS call for
// "matmul" kernels) to an existing backend. Its manifest names the backend it extends
// (emmy_add_plugin(... KIND template EXTENDS cpu)); the host creates every template plugin
// extending the backend it creates and hands it over (Backend::add_template). The backend then
// lists it in its capabilities (templates, alternatives, constraints), so the lowering pass of
// the template it is an alternative to asks "<templ>.template" and, when it is chosen, its knob
// forks; the tune measures it with the same worker, timing, reference check and database as the
// backend's own templates, and keeps it for a kernel only where it is faster.
//
// One interface for every backend; what a generated kernel *is* depends on the backend
// (GeneratedKernel says which fields each backend reads). A backend refuses a template it cannot
// run (add_template returns an error naming why) and a kernel naming a template it does not know.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/ir.hpp"
#include "emmy/status.hpp"

namespace emmy {

// What a template generates for one kernel, per backend.
//
// cpu: `source` is a complete C++ translation unit (compiled as gnu++17 with -fPIC -fopenmp,
//   -O2 -march=native at rank and -O3 -march=native at deploy) defining
//     extern "C" void emmy_kernel(const void* const* inputs, void* const* outputs);
//   the contract of the built-in templates: inputs[i] is the kernel graph's i-th input
//   (Graph::inputs() order), outputs[o] its o-th output (Graph::outputs order), each a dense
//   row-major tensor of its TensorType, 64-byte aligned; outputs never alias inputs. The call
//   returns when every output is written; it may run threads (OpenMP, a library's pool) on the
//   cores of the worker process it runs in, and is called many times (warm-up, samples, the
//   reference check), so it must not depend on state from an earlier call. `compile_flags` go
//   before the source on the compiler's command line (-I, -D), `link_flags` after it (-l, -L, a
//   library's path). In an assembled multi-kernel program the unit stays a translation unit of
//   its own (its emmy_kernel renamed by a #define placed before it), linked with the other
//   kernels' code and every kernel's link flags, so nothing in it can clash with them.
// cuda: `source` is a module as the backend's own templates write it (docs/PLUGINS.md, "Kernel
//   templates"): CUDA C++ kernels taking `void* const* emmy_buf` (the kernel's inputs, outputs,
//   then scratch buffers) and the plan as `//@emmy` comment lines (scratch, launch, and library
//   steps: "//@emmy step ...", calls into a library that emmy-cuda-worker makes through the C
//   functions of emmy/cuda_step.h, normally exported by the plugin itself); the backend rejects
//   a module whose plan it cannot read, and compile_flags / link_flags.
struct GeneratedKernel {
  std::string source;
  std::vector<std::string> compile_flags;
  std::vector<std::string> link_flags;
};

class KernelTemplate {
 public:
  virtual ~KernelTemplate() = default;
  // The template's name, as kernels and the database record it (Kernel::templ); the plugin's name.
  virtual std::string name() const = 0;
  // The backend it extends ("cpu", "cuda"); the same as its manifest's EXTENDS.
  virtual std::string backend() const = 0;
  // The backend template whose kernels it can compute ("matmul"): the lowering pass of that
  // template offers this one at its "<templ>.template" fork.
  virtual std::string alternative_to() const = 0;
  // Its knobs, decisive first; each knob's first value is the untuned default.
  virtual std::vector<KnobSpec> knobs() const = 0;
  // Knob combinations it refuses whatever the kernel (emmy/knob_constraints.hpp builds them).
  virtual std::vector<KnobConstraint> constraints() const { return {}; }
  // What its results depend on besides the backend (the library and its version, "openblas
  // 0.3.21"); appended to the backend's environment fingerprint, so a measurement is never
  // reused with another library. "" when nothing.
  virtual std::string fingerprint() const { return ""; }
  // Generates `kernel` (one kernel cut out of the graph: its inputs, constants, nodes and outputs)
  // with `knobs` (every knob of knobs(), defaults filled in). A kernel the template cannot compute
  // (a dtype, a layout, an epilogue it does not take) is refused: Ok with `refusal` saying why in
  // words, `out` ignored; the search drops the candidate at no cost. A non-ok Status is a failure
  // of the machinery (never stored); a thrown exception must not escape (use emmy::guard).
  virtual Status generate(const ir::Graph& kernel, const std::map<std::string, double>& knobs,
                          GeneratedKernel& out, std::string& refusal) noexcept = 0;
};

}  // namespace emmy
