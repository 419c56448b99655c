// The export library (templates.hpp, generate_export): what `emmy export` ships for the cpu
// backend. The same per-kernel generation as the assembled program the tune validated
// (assembled.cpp), but each kernel an entry point of its own and no buffer of its own, so the
// runtime (runtime/) allocates the buffers and launches the kernels in the plan's order.
#include <algorithm>
#include <map>

#include "emitter.hpp"
#include "emmy/status.hpp"
#include "templates.hpp"

namespace emmy::cpu {

std::string export_symbol(size_t index) {
  return "emmy_export_k" + std::to_string(index);
}

KernelSource generate_export(const ir::Slice& slice, const PluginTemplates& plugins) {
  const ir::Graph& g = slice.graph;
  KernelSource library;
  std::string units;
  // Each distinct kernel source is compiled once (assembled.cpp says why: a model's layers share
  // their kernels); a repeat's symbol calls the first one's function.
  std::map<std::string, std::string> first_of_source;
  for (size_t n = 0; n < slice.grouping.kernels.size(); ++n) {
    const ir::Kernel& kernel = slice.grouping.kernels[n];
    ir::Slice part = ir::make_slice(g, kernel);
    KernelSource own = generate_kernel(part, plugins);
    const std::string symbol = export_symbol(n);
    std::string& first = first_of_source[own.source];
    if (!first.empty()) {
      units += "extern \"C\" void " + first +
               "(const void* const* inputs, void* const* outputs);\nextern \"C\" void " + symbol +
               "(const void* const* inputs, void* const* outputs) {\n  " + first +
               "(inputs, outputs);\n}\n";
      continue;
    }
    first = symbol;
    if (plugins.count(kernel.templ) != 0) {
      // A template plugin's unit stays its own (its includes and statics), entry renamed.
      library.units.push_back("#define emmy_kernel " + symbol + "\n" + own.source);
    } else {
      units += kernel_as_namespace(own.source, n) + "extern \"C\" void " + symbol +
               "(const void* const* inputs, void* const* outputs) {\n  emmy_k" + std::to_string(n) +
               "::emmy_kernel(inputs, outputs);\n}\n";
    }
    for (const std::string& f : own.compile_flags)
      if (std::find(library.compile_flags.begin(), library.compile_flags.end(), f) ==
          library.compile_flags.end())
        library.compile_flags.push_back(f);
    for (const std::string& f : own.link_flags)
      if (std::find(library.link_flags.begin(), library.link_flags.end(), f) ==
          library.link_flags.end())
        library.link_flags.push_back(f);
  }
  library.source = kernel_prelude() + units + "extern \"C\" const int emmy_export_kernels = " +
                   std::to_string(slice.grouping.kernels.size()) + ";\n";
  return library;
}

}  // namespace emmy::cpu
