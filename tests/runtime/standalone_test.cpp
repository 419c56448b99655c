// libemmy_runtime stands alone: an application compiled against its public headers only (no
// core/, sdk/ or third-party include path) links and runs, and the library needs neither RocksDB
// nor the plugin SDK nor any of the tuner's libraries.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

namespace {

namespace fs = std::filesystem;

std::string run(const std::string& command, int& status) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen((command + " 2>&1").c_str(), "r"), pclose);
  if (!pipe) return "popen failed";
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), pipe.get())) out += buf.data();
  status = pclose(pipe.release());
  return out;
}

TEST(RuntimeStandalone, AnApplicationBuildsAgainstThePublicHeaderAlone) {
  const fs::path dir =
      fs::temp_directory_path() / ("emmy-runtime-app-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "app.cpp") << R"(#include <emmy/runtime.hpp>
#include <cstdio>
int main(int argc, char** argv) {
  try {
    emmy::runtime::Model::load(argv[1]);
  } catch (const emmy::runtime::Error& e) {
    std::printf("refused: %s\n", e.what());
    return 0;
  }
  return 1;
}
)";
  int status = 0;
  const std::string lib_dir = std::string(EMMY_BUILD_DIR) + "/lib";
  const std::string build =
      run("c++ -std=c++20 -I " + std::string(EMMY_SOURCE_DIR) + "/runtime/include " +
              (dir / "app.cpp").string() + " -o " + (dir / "app").string() + " -L " + lib_dir +
              " -lemmy_runtime -Wl,-rpath," + lib_dir,
          status);
  ASSERT_EQ(status, 0) << build;
  const std::string ran =
      run((dir / "app").string() + " " + (dir / "missing.emmy").string(), status);
  EXPECT_EQ(status, 0) << ran;
  EXPECT_NE(ran.find("refused: "), std::string::npos) << ran;
  EXPECT_NE(ran.find("no such file"), std::string::npos) << ran;

  const std::string needed = run("readelf -d " + lib_dir + "/libemmy_runtime.so", status);
  ASSERT_EQ(status, 0) << needed;
  for (const char* tuner_part : {"rocksdb", "emmy_sdk", "emmy_core", "boost", "torch"})
    EXPECT_EQ(needed.find(tuner_part), std::string::npos) << "libemmy_runtime needs " << tuner_part;
  fs::remove_all(dir);
}

}  // namespace
