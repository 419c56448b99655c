// hello_pass: the smallest real lowering-style pass. For every kernel that lowering has given a
// template, it asks the search one in-place question, "hello.unroll_hint", and records the answer
// as the knob "hello_unroll". It only sets a knob: it never changes which kernels exist or what
// they compute, so it declares itself in-place and the driver's structure check holds.
//
// No template of the shipped backends reads "hello_unroll", so `emmy tune --passes +hello_pass`
// is refused before the search (every answer would build the same code and be measured again);
// `emmy trace --passes +hello_pass` shows its fork. A knob reaches code only when the kernel's
// template reads it (docs/PLUGINS.md, Knobs).
#include <cstdlib>
#include <emmy/plugin.hpp>
#include <string>
#include <vector>

namespace {

// "1,2,4,8" -> {1, 2, 4, 8}; throws emmy::Error naming the bad entry.
std::vector<double> parse_factors(const std::string& text) {
  std::vector<double> factors;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    char* rest = nullptr;
    const double value = std::strtod(item.c_str(), &rest);
    if (item.empty() || *rest != '\0' || value < 1 || value != static_cast<long>(value))
      throw emmy::Error("hello_pass: option factors='" + text + "': '" + item +
                        "' is not a whole number >= 1");
    factors.push_back(value);
    pos = end + 1;
  }
  return factors;
}

class HelloPass final : public emmy::Pass {
 public:
  // The host fills in every option's default from the manifest (OPTIONS factors=1,2,4,8), so
  // the default is written once, there.
  explicit HelloPass(const emmy::PluginOptions& options)
      : factors_(parse_factors(options.at("factors"))) {}

  // The name emmy_add_plugin() also wrote into the manifest.
  std::string name() const override { return EMMY_PLUGIN_NAME; }
  bool in_place() const override { return true; }

  emmy::Status run(emmy::ir::Program& program, emmy::PassContext& ctx) noexcept override {
    return emmy::guard([&] {
      for (auto& kernel : program.grouping.kernels) {
        if (kernel.templ.empty()) continue;  // not lowered yet: nothing to hint
        emmy::ForkSite site;
        site.name = "hello.unroll_hint";
        site.kind = emmy::ForkKind::in_place;
        for (double f : factors_)
          site.options.push_back(
              {"hello_unroll=" + std::to_string(static_cast<long>(f)), {{"hello_unroll", f}}});
        const size_t pick = ctx.resolver.choose(site);
        kernel.knobs["hello_unroll"] = factors_.at(pick);
      }
    });
  }

 private:
  std::vector<double> factors_;
};

}  // namespace

EMMY_PLUGIN(HelloPass)
