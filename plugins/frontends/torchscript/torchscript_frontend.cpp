// The `torchscript` frontend: inline PyTorch expressions (--code) and TorchScript files (.pt)
// through LibTorch's TorchScript compiler and loader. Nothing from the source is executed: an
// expression is compiled, never run, and a file carrying code that loading would run
// (__setstate__) is refused unless the user says it is trusted (load_hooks.hpp).
//
// Request options:
//   input-shape  shapes of a .pt file's inputs, "1x128x64:f32,1x128:i64" (default: the file's
//                extra file "emmy_input_shapes", same format or JSON [{"shape": [..], "dtype":
//                ".."}])
//   method       the module method to convert (default forward)
//   trust        "1": the .pt file is trusted, its load-time code may run (--trust)
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/jit.h>
#include <torch/script.h>

#include <filesystem>

#include "code_source.hpp"
#include "emmy/plugin.hpp"
#include "graph_converter.hpp"
#include "input_spec.hpp"
#include "load_hooks.hpp"
#include "request_options.hpp"

namespace emmy::ts {

namespace {

constexpr const char* kShapesExtraFile = "emmy_input_shapes";

std::string option(const FrontendRequest& r, const std::string& key) {
  auto it = r.options.find(key);
  return it == r.options.end() ? "" : it->second;
}

bool is_torchscript_path(const std::string& source) {
  std::string ext = std::filesystem::path(source).extension().string();
  return ext == ".pt" || ext == ".pth" || ext == ".ts" || ext == ".torchscript";
}

void load_code(const std::string& code, ir::Graph& out) {
  // Before LibTorch's parser sees it: its recursion has no depth limit of its own.
  check_code_bounds(code);
  std::string source = code_to_torchscript(code);
  std::shared_ptr<torch::jit::CompilationUnit> unit;
  try {
    unit = torch::jit::compile(source);
  } catch (const std::exception& e) {
    throw Error("--code: TorchScript cannot compile the expression (after rewriting it to\n" +
                source + "):\n" + e.what());
  }
  auto graph = torch::jit::toGraphFunction(unit->get_function("forward")).graph()->copy();
  torch::jit::Inline(*graph);
  ConvertOptions options;
  out.name = "code";
  convert_graph(*graph, options, out);
}

void load_file(const std::string& path, const FrontendRequest& r, ir::Graph& out) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error("TorchScript file '" + path + "' does not exist");
  frontends::refuse_request_options(
      r, {"layer", "batch", "seq", "dtype", "config", "embedding", "attention"},
      "a TorchScript file (it is for model ids)");
  refuse_load_hooks(path, option(r, "trust") == "1");
  torch::jit::ExtraFilesMap extra{{kShapesExtraFile, ""}};
  torch::jit::Module module;
  try {
    module = torch::jit::load(path, torch::Device(torch::kCPU), extra);
  } catch (const std::exception& e) {
    throw Error("'" + path + "' is not a TorchScript file LibTorch can load: " + e.what());
  }
  module.eval();
  std::string method = option(r, "method").empty() ? "forward" : option(r, "method");
  auto found = module.find_method(method);
  if (!found) throw Error("'" + path + "' has no method '" + method + "'");

  std::string spec = option(r, "input-shape");
  std::string spec_origin = "--input-shape";
  if (spec.empty()) {
    spec = extra[kShapesExtraFile];
    spec_origin = "the extra file " + std::string(kShapesExtraFile) + " of '" + path + "'";
  }
  if (spec.empty())
    throw Error("'" + path +
                "' does not say its input shapes: pass --input-shape (e.g. 1x128x64:f32,1x128:i64) "
                "or save it with _extra_files={'" +
                std::string(kShapesExtraFile) + "': '1x128x64:f32'}");
  ConvertOptions options;
  try {
    options.input_types = frontends::parse_input_spec(spec);
  } catch (const Error& e) {
    throw Error(spec_origin + ": " + e.what());
  }
  options.self = module;

  auto graph = found->graph()->copy();
  torch::jit::Inline(*graph);
  out.name = std::filesystem::path(path).stem().string();
  convert_graph(*graph, options, out);
}

}  // namespace

class TorchScriptFrontend final : public Frontend {
 public:
  explicit TorchScriptFrontend(const PluginOptions&) {}

  std::string name() const override { return "torchscript"; }

  bool accepts(const FrontendRequest& r) const noexcept override {
    try {
      return !r.code.empty() || is_torchscript_path(r.source);
    } catch (...) {
      return false;
    }
  }

  Status load(const FrontendRequest& r, ir::Graph& graph) noexcept override {
    return guard([&] {
      ir::Graph built;
      if (!r.code.empty())
        load_code(r.code, built);
      else
        load_file(r.source, r, built);
      graph = std::move(built);  // the caller sees a complete graph or none
    });
  }
};

}  // namespace emmy::ts

EMMY_PLUGIN(emmy::ts::TorchScriptFrontend)
