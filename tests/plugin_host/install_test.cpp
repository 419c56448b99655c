// The SDK as a plugin author gets it: `cmake --install` of this build into a temporary prefix,
// a copy of examples/hello_pass configured and built against that prefix alone, then the
// installed emmy lists it (ok) and loads it (--check). Also checks what the install holds and
// that the example's compile saw no Boost, RocksDB or FlatBuffers header. Where OpenBLAS is
// found, the template example examples/blas_sgemm is built the same way and checked by the
// installed emmy against the installed cpu backend (issue 20: a template from the SDK alone).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "run_command.hpp"
#include "test_support.hpp"

namespace emmy {
namespace {

using test::shell_quote;
using test::fs::path;
using ::testing::HasSubstr;

std::string slurp(const path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Install, OutOfTreeExampleBuildsAgainstTheInstalledSdkAndLoads) {
  test::ScratchDir scratch;
  const path prefix = scratch.path() / "prefix";
  const std::string cmake = shell_quote(EMMY_CMAKE);

  // 1. Install.
  auto install = test::run_command(cmake + " --install " + shell_quote(EMMY_BUILD_DIR) +
                                   " --prefix " + shell_quote(prefix.string()));
  ASSERT_EQ(install.exit_code, 0) << install.output;
  const path lib = prefix / EMMY_INSTALL_LIBDIR;
  for (const path& p :
       {prefix / "bin" / "emmy", lib / "libemmy_sdk.so", prefix / "include" / "emmy" / "plugin.hpp",
        prefix / "include" / "emmy" / "ir.hpp", prefix / "share" / "emmy" / "manifest.fbs",
        prefix / "share" / "doc" / "emmy" / "PLUGINS.md",
        lib / "cmake" / "EmmySDK" / "EmmySDKConfig.cmake",
        lib / "cmake" / "EmmySDK" / "EmmySDKConfigVersion.cmake",
        lib / "cmake" / "EmmySDK" / "EmmySDKTargets.cmake",
        lib / "cmake" / "EmmySDK" / "EmmyAddPlugin.cmake",
        prefix / "include" / "emmy" / "kernel_template.hpp",
        // libemmy_runtime (issue 22): library, headers, plan schema, package.
        lib / "libemmy_runtime.so", prefix / "include" / "emmy" / "runtime.hpp",
        prefix / "include" / "emmy" / "runtime_plan.hpp", prefix / "share" / "emmy" / "plan.fbs",
        lib / "cmake" / "EmmyRuntime" / "EmmyRuntimeConfig.cmake",
        prefix / "share" / "doc" / "emmy" / "PLUGINS.md"})
    EXPECT_TRUE(test::fs::exists(p)) << p << " not installed";
  // The in-tree copy of the example is not installed (it would clash with the one built below).
  EXPECT_FALSE(test::fs::exists(lib / "emmy" / "plugins" / "hello_pass.emmy-manifest"));
  EXPECT_FALSE(test::fs::exists(lib / "emmy" / "plugins" / "blas_sgemm.emmy-manifest"));
  // Only Emmy's own headers, and a package that names no third-party target.
  for (const auto& entry : test::fs::directory_iterator(prefix / "include"))
    EXPECT_EQ(entry.path().filename(), "emmy") << "unexpected header folder " << entry.path();
  for (const auto& entry : test::fs::directory_iterator(lib / "cmake" / "EmmySDK")) {
    if (entry.path().filename().string().rfind("EmmySDKTargets", 0) != 0) continue;
    const std::string text = slurp(entry.path());
    for (const char* dep : {"Boost", "RocksDB", "flatbuffers", "find_dependency"})
      EXPECT_THAT(text, ::testing::Not(HasSubstr(dep))) << entry.path();
  }

  // 2. A copy of the example, configured against the prefix only.
  const path source = scratch.path() / "hello_pass";
  const path build = scratch.path() / "hello-build";
  test::fs::copy(path(EMMY_SOURCE_DIR) / "examples" / "hello_pass", source,
                 test::fs::copy_options::recursive);
  auto configure = test::run_command(
      cmake + " -S " + shell_quote(source.string()) + " -B " + shell_quote(build.string()) +
      " -G " + shell_quote(EMMY_GENERATOR) + " -DCMAKE_MAKE_PROGRAM=" +
      shell_quote(EMMY_MAKE_PROGRAM) + " -DCMAKE_CXX_COMPILER=" + shell_quote(EMMY_CXX_COMPILER) +
      " -DCMAKE_BUILD_TYPE=Release" + " -DCMAKE_PREFIX_PATH=" + shell_quote(prefix.string()) +
      " -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON");
  ASSERT_EQ(configure.exit_code, 0) << configure.output;
  EXPECT_THAT(slurp(build / "CMakeCache.txt"),
              HasSubstr("EmmySDK_DIR:PATH=" + (lib / "cmake" / "EmmySDK").string()));
  auto compile = test::run_command(cmake + " --build " + shell_quote(build.string()));
  ASSERT_EQ(compile.exit_code, 0) << compile.output;
  ASSERT_TRUE(test::fs::exists(build / "hello_pass.emmy-manifest"));
  ASSERT_TRUE(test::fs::exists(build / "libemmy_hello_pass.so"));

  // Compiled from the prefix's headers, never the source tree's, and no third-party header.
  const std::string commands = slurp(build / "compile_commands.json");
  EXPECT_THAT(commands, HasSubstr((prefix / "include").string()));
  EXPECT_THAT(commands, ::testing::Not(HasSubstr(std::string(EMMY_SOURCE_DIR) + "/sdk")));
  if (std::string(EMMY_GENERATOR) == "Ninja") {
    auto deps = test::run_command(shell_quote(EMMY_MAKE_PROGRAM) + " -C " +
                                  shell_quote(build.string()) + " -t deps");
    ASSERT_EQ(deps.exit_code, 0) << deps.output;
    EXPECT_THAT(deps.output, HasSubstr((prefix / "include" / "emmy" / "plugin.hpp").string()));
    for (const char* third_party : {"/boost/", "/rocksdb/", "/flatbuffers/"})
      EXPECT_THAT(deps.output, ::testing::Not(HasSubstr(third_party)));
  }

  // 3. The installed emmy lists and loads it. EMMY_PLUGIN_PATH is cleared so only the flag counts.
  const std::string emmy =
      "env -u EMMY_PLUGIN_PATH " + shell_quote((prefix / "bin" / "emmy").string());
  const std::string flag = " --plugin-path " + shell_quote(build.string());
  auto listing = test::run_command(emmy + " plugins --json" + flag);
  ASSERT_EQ(listing.exit_code, 0) << listing.output;
  const std::string example_manifest = (build / "hello_pass.emmy-manifest").string();
  std::string example_status = "not listed";
  const nlohmann::json doc = nlohmann::json::parse(listing.output);
  for (const auto& p : doc.at("plugins"))
    if (p.at("manifest").get<std::string>() == example_manifest)
      example_status = p.at("name").get<std::string>() + ": " + p.at("status").get<std::string>();
  EXPECT_EQ(example_status, "hello_pass: ok") << example_manifest << "\n" << listing.output;
  auto table = test::run_command(emmy + " plugins" + flag);
  EXPECT_THAT(
      table.output,
      ::testing::ContainsRegex(
          "hello_pass +pass +0\\.1\\.0 +ok +hello\\.unroll_hint \\(in_place\\) +hello_unroll"));
  auto check = test::run_command(emmy + " plugins --check hello_pass" + flag);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_THAT(check.output, HasSubstr("hello_pass: ok"));

#ifdef EMMY_HAVE_OPENBLAS
  // 4. The template example, the same way: configured against the prefix alone, then checked by
  // the installed emmy, which creates the installed cpu backend with it and sees it listed.
  const path tsource = scratch.path() / "blas_sgemm";
  const path tbuild = scratch.path() / "sgemm-build";
  test::fs::copy(path(EMMY_SOURCE_DIR) / "examples" / "blas_sgemm", tsource,
                 test::fs::copy_options::recursive);
  auto tconfigure = test::run_command(
      cmake + " -S " + shell_quote(tsource.string()) + " -B " + shell_quote(tbuild.string()) +
      " -G " + shell_quote(EMMY_GENERATOR) + " -DCMAKE_MAKE_PROGRAM=" +
      shell_quote(EMMY_MAKE_PROGRAM) + " -DCMAKE_CXX_COMPILER=" + shell_quote(EMMY_CXX_COMPILER) +
      " -DCMAKE_BUILD_TYPE=Release" + " -DCMAKE_PREFIX_PATH=" + shell_quote(prefix.string()) +
      " -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF");
  ASSERT_EQ(tconfigure.exit_code, 0) << tconfigure.output;
  auto tcompile = test::run_command(cmake + " --build " + shell_quote(tbuild.string()));
  ASSERT_EQ(tcompile.exit_code, 0) << tcompile.output;
  const std::string tflag = " --plugin-path " + shell_quote(tbuild.string());
  auto tlisting = test::run_command(emmy + " plugins --kind template" + tflag);
  EXPECT_THAT(tlisting.output, ::testing::ContainsRegex("blas_sgemm +template +0\\.1\\.0 +ok"));
  EXPECT_THAT(tlisting.output, HasSubstr("extends the cpu backend"));
  auto tcheck = test::run_command(emmy + " plugins --check blas_sgemm" + tflag);
  EXPECT_EQ(tcheck.exit_code, 0) << tcheck.output;
  EXPECT_THAT(tcheck.output, HasSubstr("blas_sgemm: ok (template 0.1.0"));
  EXPECT_THAT(tcheck.output, HasSubstr("extends cpu as an alternative to matmul"));
#endif

  // The build tree's emmy has its own in-tree hello_pass first: the copy shows as a duplicate,
  // naming both manifests, and the rest of the listing is unaffected.
  auto in_tree =
      test::run_command("env -u EMMY_PLUGIN_PATH " + shell_quote(EMMY_BIN) + " plugins" + flag);
  EXPECT_EQ(in_tree.exit_code, 0) << in_tree.output;
  EXPECT_THAT(in_tree.output, HasSubstr("duplicate name 'hello_pass'"));
}

}  // namespace
}  // namespace emmy
