#include "backend_support/compile_cache.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "emmy/status.hpp"

namespace emmy::backend_support {

namespace fs = std::filesystem;

std::string content_hash(std::string_view text, HashScheme scheme) {
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  for (unsigned char c : text) {
    h1 = (h1 ^ c) * 0x100000001b3ull;
    h2 = (h2 ^ (c + scheme.second_offset)) * 0x100000001b3ull;
    if (scheme.second_folds) h2 ^= h2 >> 29;
  }
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h1),
                static_cast<unsigned long long>(h2));
  return buf;
}

bool CompileCache::create(std::string& error) const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) error = ec.message();
  return !ec;
}

fs::path CompileCache::entry(const std::string& key, const std::string& suffix) const {
  return fs::path(dir_) / (key + suffix);
}

bool CompileCache::has(const std::string& key, const std::string& suffix) const {
  std::error_code ec;
  const fs::path p = entry(key, suffix);
  return fs::exists(p, ec) && fs::file_size(p, ec) > 0 && !ec;
}

fs::path CompileCache::temporary(const std::string& key, const std::string& suffix) const {
  std::ostringstream tag;
  tag << ::getpid() << "-" << std::this_thread::get_id();
  return fs::path(dir_) / (key + "." + tag.str() + suffix);
}

void CompileCache::write_whole(const fs::path& path, const std::string& bytes,
                               const std::string& who) {
  static std::atomic<unsigned> counter{0};
  std::ostringstream tmp_name;
  tmp_name << path.string() << ".tmp." << ::getpid() << "." << std::this_thread::get_id() << "."
           << counter++;
  {
    std::ofstream f(tmp_name.str(), std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) throw Error(who + ": cannot write " + tmp_name.str());
  }
  fs::rename(tmp_name.str(), path);
}

// A temporary() name is <key>.<pid>-<thread><ext>; a live process's are its builds in progress.
void CompileCache::remove_stale_temporaries() const {
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string ext = it->path().extension().string();
    if (ext != ".cpp" && ext != ".so") continue;
    const size_t dot = name.find('.'), dash = name.find('-', dot == std::string::npos ? 0 : dot);
    if (dot == std::string::npos || dash == std::string::npos || dash == dot + 1) continue;
    const std::string pid_text = name.substr(dot + 1, dash - dot - 1);
    if (pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9)
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) {
      std::error_code rm;
      fs::remove(it->path(), rm);
    }
  }
}

}  // namespace emmy::backend_support
