#include "compiler.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "emmy/status.hpp"

extern char** environ;

namespace emmy::cpu {

namespace fs = std::filesystem;

int run_capture(const std::vector<std::string>& argv, std::string& output) {
  // The output goes to a private file (no pipe to drain while waiting; thread-safe). mkostemp
  // creates it with a name nobody can predict, exclusively (a link planted in the shared temp
  // folder is never followed), close-on-exec (concurrent spawns do not inherit it); it is
  // unlinked at once, so nothing is left behind even when the process is killed.
  std::string name = (fs::temp_directory_path() / "emmy-cpu-XXXXXX").string();
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) {
    output = "could not create a temporary file in " + fs::temp_directory_path().string() + ": " +
             std::strerror(errno);
    return -1;
  }
  ::unlink(name.c_str());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, 1);
  posix_spawn_file_actions_adddup2(&actions, fd, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    ::close(fd);
    output = "could not start " + argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  output.clear();
  char buf[65536];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buf, size_t(n));
    at += n;
  }
  ::close(fd);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  output += "\n[killed by signal " + std::to_string(WTERMSIG(status)) + "]";
  return -1;
}

Compiler::Compiler(std::string cache_dir, std::string compiler)
    : cache_(std::move(cache_dir)), compiler_(std::move(compiler)) {
  if (compiler_.empty()) compiler_ = "c++";
  std::string error;
  if (!cache_.create(error))
    throw Error("cpu backend: cannot create cache directory " + cache_.dir() + ": " + error);
  // A build writes <key>.<pid>-<thread>.cpp/.so and renames them into place; a process killed
  // meanwhile leaves them behind.
  cache_.remove_stale_temporaries();
}

std::vector<std::string> Compiler::regime_flags(Regime regime) {
  // The rank build is for ordering configurations the way deploy builds would order them. It was
  // -O1 without -march=native, which runs the matmul microkernel on SSE registers: the 256x256
  // matmul's default configuration took 7 ms there against 0.4 ms at deploy, and the orders of
  // the two regimes were unrelated, so the search steered by the wrong times. -O2 with the
  // host's vector width builds within 10-15 % of -O1's time (0.97 s against 0.85 s for the
  // largest generated kernel, 1.42 s at -O3) and times within a few % of deploy.
  if (regime == Regime::rank) return {"-O2", "-march=native"};
  return {"-O3", "-march=native"};
}

std::vector<std::string> Compiler::flags(Regime regime) {
  // gnu++17: FMA contraction allowed (ISO mode forbids it); -fno-math-errno: sqrt and friends
  // inline and vectorize.
  std::vector<std::string> f = {"-std=gnu++17", "-shared",         "-fPIC",
                                "-fopenmp",     "-fno-math-errno", "-w"};
  for (auto& flag : regime_flags(regime)) f.push_back(std::move(flag));
  return f;
}

std::string Compiler::version_line() const {
  std::string out;
  run_capture({compiler_, "--version"}, out);
  auto nl = out.find('\n');
  return nl == std::string::npos ? out : out.substr(0, nl);
}

CompileResult Compiler::compile(const std::string& source, Regime regime) const {
  return compile(KernelSource{source, {}, {}, {}}, regime);
}

CompileResult Compiler::compile(const KernelSource& kernel, Regime regime) const {
  const std::string& source = kernel.source;
  CompileResult r;
  std::vector<std::string> fl = flags(regime);
  fl.insert(fl.end(), kernel.compile_flags.begin(), kernel.compile_flags.end());
  std::string key_text = compiler_ + "\n";
  for (const auto& f : fl) key_text += f + " ";
  // Without plugins' units and link flags the key text is what it always was: cached builds of
  // the built-in templates stay valid.
  for (const auto& f : kernel.link_flags) key_text += "link " + f + " ";
  key_text += "\n" + source;
  for (const auto& u : kernel.units) key_text += "\n// unit\n" + u;
  const std::string key = backend_support::content_hash(key_text, backend_support::kCpuHash);
  const fs::path so = cache_.entry(key, ".so");
  r.library = so.string();
  std::error_code ec;
  if (cache_.has(key, ".so")) {
    r.ok = true;
    r.cached = true;
    return r;
  }
  const fs::path src = cache_.entry(key, ".cpp");
  const fs::path tmp_src = cache_.temporary(key, ".cpp");
  const fs::path tmp_so = cache_.temporary(key, ".so");
  // Further units beside the main one, under the same temporary tag (removed with it when stale).
  std::vector<fs::path> tmp_units, units;
  for (size_t i = 0; i < kernel.units.size(); ++i) {
    const std::string suffix = ".u" + std::to_string(i + 1) + ".cpp";
    tmp_units.push_back(cache_.temporary(key, suffix));
    units.push_back(cache_.entry(key, suffix));
  }
  auto write = [](const fs::path& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    if (!out) throw Error("cpu backend: cannot write " + path.string());
  };
  write(tmp_src, source);
  for (size_t i = 0; i < units.size(); ++i) write(tmp_units[i], kernel.units[i]);
  std::vector<std::string> argv = {compiler_};
  argv.insert(argv.end(), fl.begin(), fl.end());
  argv.push_back(tmp_src.string());
  for (const fs::path& u : tmp_units) argv.push_back(u.string());
  argv.insert(argv.end(), {"-o", tmp_so.string()});
  argv.insert(argv.end(), kernel.link_flags.begin(), kernel.link_flags.end());
  int rc = run_capture(argv, r.log);
  // The units are kept beside the source for a failure report, under their final names.
  for (size_t i = 0; i < units.size(); ++i) fs::rename(tmp_units[i], units[i], ec);
  // The compiler not starting, killed by a signal (Ctrl-C, kill) or out of disk says nothing about
  // the source: an error (the machinery's failure), never a build_error row.
  const bool no_space = r.log.find("No space left on device") != std::string::npos;
  // gcc's driver survives a compiler pass killed from outside and reports it as an internal
  // error ("Killed signal terminated program cc1plus"); a pass crashing on the source itself
  // ("Segmentation fault signal ...") stays the candidate's build_error.
  bool killed = false;
  for (const char* s :
       {"Killed signal terminated", "Interrupt signal terminated", "Terminated signal terminated"})
    killed = killed || r.log.find(s) != std::string::npos;
  if (rc < 0 || no_space || killed) {
    fs::remove(tmp_so, ec);
    fs::remove(tmp_src, ec);
    throw Error("cpu backend: the compiler " + compiler_ + " did not finish: " +
                (no_space        ? std::string("no space left on device in ") + cache_.dir()
                 : r.log.empty() ? std::string("killed by a signal")
                                 : r.log.substr(0, 2000)));
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
  if (ec)
    throw Error("cpu backend: cannot move " + tmp_so.string() + " into the cache: " + ec.message());
  r.ok = true;
  return r;
}

}  // namespace emmy::cpu
