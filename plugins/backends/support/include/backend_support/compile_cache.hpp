// The on-disk cache of built kernels both backends keep (plugins/backends/support): one folder,
// one entry per content hash of everything that makes the build (source, flags, compiler), so a
// repeated build is a lookup. Entries are written under a private temporary name and renamed into
// place, so concurrent builds of one key (threads or processes) never expose a partial file. The
// cpu backend stores <key>.so with its <key>.cpp; the cuda backend <key>.cubin with its <key>.cu.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace emmy::backend_support {

// The two content hashes in use: each backend's cache keys were made with its own, and keeping
// them keeps every cache written before valid. Both are two 64-bit FNV-1a hashes; the second
// offsets each byte and, for cuda, folds its state after every byte.
struct HashScheme {
  unsigned char second_offset;
  bool second_folds;
};
inline constexpr HashScheme kCpuHash{0x9e, false};
inline constexpr HashScheme kCudaHash{0x5b, true};

// 32 hex digits.
std::string content_hash(std::string_view text, HashScheme scheme);

class CompileCache {
 public:
  // Nothing is created yet (create() does).
  explicit CompileCache(std::string dir) : dir_(std::move(dir)) {}

  const std::string& dir() const { return dir_; }
  // Creates the folder if missing; false (and `error`) when it cannot.
  bool create(std::string& error) const;
  // <dir>/<key><suffix>, e.g. suffix ".so".
  std::filesystem::path entry(const std::string& key, const std::string& suffix) const;
  // Whether the entry is there and not empty (a finished build).
  bool has(const std::string& key, const std::string& suffix) const;
  // <dir>/<key>.<pid>-<thread><suffix>: a build's private name for an entry it writes (a
  // compiler's output), renamed into place when finished. Those of processes that died are
  // remove_stale_temporaries()'s.
  std::filesystem::path temporary(const std::string& key, const std::string& suffix) const;
  // Writes `bytes` to `path` (inside the cache) whole: to a private temporary name, then renamed.
  // Throws emmy::Error, its text starting with `who`, when it cannot be written.
  static void write_whole(const std::filesystem::path& path, const std::string& bytes,
                          const std::string& who);
  // Removes temporary() files of processes that no longer exist (a build killed midway).
  void remove_stale_temporaries() const;

 private:
  std::string dir_;
};

}  // namespace emmy::backend_support
