// Crashes inside a backend or a template plugin (issue 20, item 6): the host wraps every backend
// and template plugin it creates (plugin_host/guarded.hpp), so a fatal signal inside one prints
// the plugin, its library and what it was doing, and exits with kExitPluginCrash. Death tests:
// the real cpu backend building a kernel through a template plugin that segfaults in generate()
// (the template is named, not the backend that called it), and a backend that segfaults in build().
#include "plugin_host/guarded.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "emmy/backend.hpp"
#include "emmy/ir.hpp"
#include "plugin_host/plugin_activity.hpp"
#include "plugin_host/plugin_host.hpp"

namespace emmy {
namespace {

ir::Slice matmul_slice(const std::string& templ) {
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("a", {ir::DType::f32, {16, 16}});
  auto y = b.input("b", {ir::DType::f32, {16, 16}});
  auto z = b.op(ir::Op::matmul, {x, y});
  b.output(z);
  ir::Kernel k;
  k.nodes = {z};
  k.templ = templ;
  return ir::make_slice(g, k);
}

// What `emmy tune` does around a build: the handler installed, then the backend's build.
void build_with_the_crash_handler(Backend& backend, const ir::Slice& slice) {
  install_plugin_crash_handler();
  Artifact artifact;
  MeasureResult failure;
  (void)backend.build(slice, Regime::rank, artifact, failure);
}

std::string scratch_cache() {
  auto dir =
      std::filesystem::temp_directory_path() / ("emmy-guarded-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

TEST(GuardedDeathTest, ATemplatePluginCrashingInsideItsBackendsBuildIsNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  PluginHost host;
  host.discover({EMMY_PLUGIN_DIR, EMMY_CRASH_GENERATE_DIR});
  const std::string cache = scratch_cache();
  std::shared_ptr<Backend> backend = host.make_backend("cpu", {{"cache_dir", cache}});
  ASSERT_EQ(backend->capabilities().alternatives.at("matmul"),
            std::vector<std::string>{"crash_generate"});
  const ir::Slice slice = matmul_slice("crash_generate");
  EXPECT_EXIT(
      build_with_the_crash_handler(*backend, slice), ::testing::ExitedWithCode(kExitPluginCrash),
      "crashed inside template plugin 'crash_generate' \\(libemmy_crash_generate.so\\) while "
      "generating a kernel of graph .*SIGSEGV");
  // Outside the handler's reach (no crash), the same backend builds its own template.
  Artifact artifact;
  MeasureResult failure;
  ASSERT_TRUE(backend->build(matmul_slice("matmul"), Regime::rank, artifact, failure).ok());
  EXPECT_EQ(failure.failure, FailureKind::none) << failure.message;
  backend.reset();
  std::filesystem::remove_all(cache);
}

// A backend whose build() dereferences a null pointer.
class CrashingBackend final : public Backend {
 public:
  std::string name() const override { return "crashing"; }
  BackendCaps capabilities() const override { return {}; }
  std::string environment_fingerprint() const override { return "crashing"; }
  Status build(const ir::Slice&, Regime, Artifact&, MeasureResult&) noexcept override {
    volatile int* nowhere = nullptr;
    *nowhere = 1;  // SIGSEGV, on purpose
    return Status::Ok();
  }
  Status measure(const ir::Slice&, const Artifact&, const MeasureRequest&,
                 MeasureResult&) noexcept override {
    return Status::Ok();
  }
};

TEST(GuardedDeathTest, ABackendCrashingInBuildIsNamedWithTheKernelsTemplate) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  PluginRecord record;
  record.name = "crashing";
  record.library = "libemmy_crashing.so";
  std::shared_ptr<Backend> backend = guarded(std::make_shared<CrashingBackend>(), record);
  EXPECT_EQ(backend->name(), "crashing");  // calls pass through unchanged
  const ir::Slice slice = matmul_slice("matmul");
  EXPECT_EXIT(
      build_with_the_crash_handler(*backend, slice), ::testing::ExitedWithCode(kExitPluginCrash),
      "crashed inside backend plugin 'crashing' \\(libemmy_crashing.so\\) while building a kernel "
      "of template 'matmul'");
}

}  // namespace
}  // namespace emmy
