#include "compiler.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "emmy/status.hpp"

extern char** environ;

namespace emmy::cpu {

namespace fs = std::filesystem;

std::string content_hash(const std::string& text) {
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  for (unsigned char c : text) {
    h1 = (h1 ^ c) * 0x100000001b3ull;
    h2 = (h2 ^ (c + 0x9e)) * 0x100000001b3ull;
  }
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h1),
                static_cast<unsigned long long>(h2));
  return buf;
}

int run_capture(const std::vector<std::string>& argv, std::string& output) {
  static std::atomic<unsigned> counter{0};
  // The output goes to a private file (no pipe to drain while waiting; thread-safe).
  fs::path log = fs::temp_directory_path() /
                 ("emmy-cpu-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".log");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    output = "could not start " + argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  output = ss.str();
  std::error_code ec;
  fs::remove(log, ec);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  output += "\n[killed by signal " + std::to_string(WTERMSIG(status)) + "]";
  return -1;
}

Compiler::Compiler(std::string cache_dir, std::string compiler)
    : cache_dir_(std::move(cache_dir)), compiler_(std::move(compiler)) {
  if (compiler_.empty()) {
    const char* cxx = std::getenv("CXX");
    compiler_ = cxx && *cxx ? cxx : "c++";
  }
  std::error_code ec;
  fs::create_directories(cache_dir_, ec);
  if (ec) throw Error("cpu backend: cannot create cache directory " + cache_dir_ + ": " + ec.message());
}

std::vector<std::string> Compiler::flags(Regime regime) {
  // gnu++17: FMA contraction allowed (ISO mode forbids it); -fno-math-errno: sqrt and friends
  // inline and vectorize.
  std::vector<std::string> f = {"-std=gnu++17", "-shared", "-fPIC", "-fopenmp", "-fno-math-errno", "-w"};
  if (regime == Regime::rank) {
    f.push_back("-O1");
  } else {
    f.push_back("-O3");
    f.push_back("-march=native");
  }
  return f;
}

std::string Compiler::version_line() const {
  std::string out;
  run_capture({compiler_, "--version"}, out);
  auto nl = out.find('\n');
  return nl == std::string::npos ? out : out.substr(0, nl);
}

CompileResult Compiler::compile(const std::string& source, Regime regime) const {
  CompileResult r;
  std::vector<std::string> fl = flags(regime);
  std::string key_text = compiler_ + "\n";
  for (const auto& f : fl) key_text += f + " ";
  key_text += "\n" + source;
  const std::string key = content_hash(key_text);
  const fs::path so = fs::path(cache_dir_) / (key + ".so");
  r.library = so.string();
  std::error_code ec;
  if (fs::exists(so, ec)) {
    r.ok = true;
    r.cached = true;
    return r;
  }
  std::ostringstream tag;
  tag << ::getpid() << "-" << std::this_thread::get_id();
  const fs::path src = fs::path(cache_dir_) / (key + ".cpp");
  const fs::path tmp_src = fs::path(cache_dir_) / (key + "." + tag.str() + ".cpp");
  const fs::path tmp_so = fs::path(cache_dir_) / (key + "." + tag.str() + ".so");
  {
    std::ofstream out(tmp_src);
    out << source;
    if (!out) throw Error("cpu backend: cannot write " + tmp_src.string());
  }
  std::vector<std::string> argv = {compiler_};
  argv.insert(argv.end(), fl.begin(), fl.end());
  argv.insert(argv.end(), {tmp_src.string(), "-o", tmp_so.string()});
  int rc = run_capture(argv, r.log);
  // The compiler not starting, killed by a signal (Ctrl-C, kill) or out of disk says nothing about
  // the source: an error (the machinery's failure), never a build_error row.
  const bool no_space = r.log.find("No space left on device") != std::string::npos;
  // gcc's driver survives a compiler pass killed from outside and reports it as an internal
  // error ("Killed signal terminated program cc1plus"); a pass crashing on the source itself
  // ("Segmentation fault signal ...") stays the candidate's build_error.
  bool killed = false;
  for (const char* s : {"Killed signal terminated", "Interrupt signal terminated",
                        "Terminated signal terminated"})
    killed = killed || r.log.find(s) != std::string::npos;
  if (rc < 0 || no_space || killed) {
    fs::remove(tmp_so, ec);
    fs::remove(tmp_src, ec);
    throw Error("cpu backend: the compiler " + compiler_ + " did not finish: " +
                (no_space ? std::string("no space left on device in ") + cache_dir_
                 : r.log.empty() ? std::string("killed by a signal") : r.log.substr(0, 2000)));
  }
  if (rc != 0) {
    fs::remove(tmp_so, ec);
    fs::rename(tmp_src, src, ec);  // kept for the failure report
    if (r.log.empty()) r.log = "compiler exited with status " + std::to_string(rc);
    r.ok = false;
    return r;
  }
  fs::rename(tmp_src, src, ec);
  fs::rename(tmp_so, so, ec);
  if (ec) throw Error("cpu backend: cannot move " + tmp_so.string() + " into the cache: " + ec.message());
  r.ok = true;
  return r;
}

}  // namespace emmy::cpu
