// The `pt2` frontend: programs saved by torch.export.save (.pt2), read without PyTorch or Python:
// a ZIP reader, the JSON of the serialized ExportedProgram and the archive's weight metadata.
// Nothing from the file is executed; the pickled sample inputs are never opened.
//
// Request options:
//   input-shape  shapes of the user inputs, "1x128x64:f32,..." (needed where the program has
//                dynamic dimensions; otherwise optional and checked against the program)
#include <filesystem>

#include "archive.hpp"
#include "emmy/plugin.hpp"
#include "input_spec.hpp"
#include "program_converter.hpp"
#include "request_options.hpp"

namespace emmy::pt2 {

class Pt2Frontend final : public Frontend {
 public:
  explicit Pt2Frontend(const PluginOptions&) {}

  std::string name() const override { return "pt2"; }

  bool accepts(const FrontendRequest& r) const noexcept override {
    try {
      return r.code.empty() && std::filesystem::path(r.source).extension() == ".pt2";
    } catch (...) {
      return false;
    }
  }

  Status load(const FrontendRequest& r, ir::Graph& graph) noexcept override {
    return guard([&] {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(r.source, ec))
        throw Error("'" + r.source + "' does not exist");
      frontends::refuse_request_options(
          r, {"layer", "batch", "seq", "dtype", "config", "embedding", "attention"},
          "a .pt2 file (it is for model ids)");
      frontends::refuse_request_options(r, {"trust"}, "a .pt2 file (nothing in it is run)");
      Archive archive(r.source);
      ConvertOptions options;
      auto spec = r.options.find("input-shape");
      if (spec != r.options.end() && !spec->second.empty()) {
        try {
          options.input_types = frontends::parse_input_spec(spec->second);
        } catch (const Error& e) {
          throw Error(std::string("--input-shape: ") + e.what());
        }
      }
      ir::Graph built;
      built.name = std::filesystem::path(r.source).stem().string();
      try {
        convert_program(archive.program(), options, built);
      } catch (const Error& e) {
        throw Error("'" + r.source + "' (PyTorch " + archive.torch_version() + "): " + e.what());
      }
      graph = std::move(built);  // the caller sees a complete graph or none
    });
  }
};

}  // namespace emmy::pt2

EMMY_PLUGIN(emmy::pt2::Pt2Frontend)
