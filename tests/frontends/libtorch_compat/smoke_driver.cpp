// Loads a frontend plugin and prints the graph it builds for one source (or --code with '@'):
//   smoke_driver PLUGIN.so SOURCE|@EXPR [key=value ...]
// Used by check.sh to try the torchscript frontend against another LibTorch (the GPU machine's
// PyTorch 2.x) without CMake, flatc or GoogleTest.
#include <dlfcn.h>

#include <cstdio>
#include <string>

#define EMMY_PLUGIN_NAME "smoke_driver"
#define EMMY_PLUGIN_VERSION "0"
#include "emmy/plugin.hpp"

int main(int argc, char** argv) {
  if (argc < 3)
    return std::fprintf(stderr, "usage: %s PLUGIN.so SOURCE|@EXPR [key=value ...]\n", argv[0]), 1;
  void* h = dlopen(argv[1], RTLD_NOW);
  if (!h) return std::fprintf(stderr, "%s\n", dlerror()), 1;
  auto info = reinterpret_cast<EmmyPluginInfoFn>(dlsym(h, EMMY_PLUGIN_ENTRY_SYMBOL))();
  char error[512] = {0};
  auto* frontend = static_cast<emmy::Frontend*>(info->create("", nullptr, error, sizeof error));
  if (!frontend) return std::fprintf(stderr, "create: %s\n", error), 1;
  emmy::FrontendRequest r;
  if (argv[2][0] == '@')
    r.code = argv[2] + 1;
  else
    r.source = argv[2];
  for (int i = 3; i < argc; ++i) {
    std::string kv = argv[i];
    auto eq = kv.find('=');
    if (eq != std::string::npos) r.options[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  emmy::ir::Graph g;
  emmy::Status s = frontend->load(r, g);
  if (!s.ok()) return std::printf("ERROR: %s\n", s.message().c_str()), 2;
  std::printf("%s\n", emmy::ir::print(g).c_str());
  info->destroy(frontend);
  return 0;
}
