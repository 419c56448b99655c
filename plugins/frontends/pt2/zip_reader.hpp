// A read-only ZIP reader for torch.export archives: the central directory, stored entries (what
// torch.export.save writes) and deflated ones (an archive repacked by a zip tool), through zlib;
// ZIP64 for archives over 4 GiB. Only the entries asked for are read from the file (a model's
// weights stay on disk while its program is converted). Nothing in the archive is executed or
// unpickled; entries are only read as bytes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace emmy::pt2 {

class ZipReader {
 public:
  // Reads the whole file and its central directory. Throws emmy::Error naming the file and what
  // is wrong (missing, not a ZIP, truncated, an entry pointing past the end).
  explicit ZipReader(const std::string& path);

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  // The entry's bytes, inflated when deflated. Throws emmy::Error for a missing or corrupt entry.
  std::string read(const std::string& name) const;

 private:
  struct Entry {
    uint16_t method = 0;
    uint64_t compressed = 0, size = 0, local_offset = 0;
    uint32_t crc = 0;
  };
  // `size` bytes at `offset` of the file; throws naming `what` when the file is shorter.
  std::string read_at(uint64_t offset, uint64_t size, const std::string& what) const;

  std::string path_;
  uint64_t file_size_ = 0;
  std::map<std::string, Entry> entries_;
};

}  // namespace emmy::pt2
