#include "zip_reader.hpp"

#include <zlib.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "emmy/status.hpp"

namespace emmy::pt2 {

namespace {

uint16_t u16(const std::string& d, uint64_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(d[at]) | static_cast<uint8_t>(d[at + 1]) << 8);
}
uint32_t u32(const std::string& d, uint64_t at) {
  return u16(d, at) | static_cast<uint32_t>(u16(d, at + 2)) << 16;
}
uint64_t u64(const std::string& d, uint64_t at) {
  return u32(d, at) | static_cast<uint64_t>(u32(d, at + 4)) << 32;
}

constexpr uint32_t kEndOfDirectory = 0x06054b50, kEndOfDirectory64 = 0x06064b50,
                   kEndLocator64 = 0x07064b50, kCentralHeader = 0x02014b50,
                   kLocalHeader = 0x04034b50;

}  // namespace

ZipReader::ZipReader(const std::string& path) : path_(path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("'" + path + "' cannot be opened");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  data_ = buffer.str();
  auto bad = [&](const std::string& why) {
    return Error("'" + path +
                 "' is not a readable .pt2 archive (a ZIP written by torch.export.save): " + why);
  };
  // The end-of-central-directory record: 22 bytes plus a comment of up to 64 KiB at the end.
  if (data_.size() < 22)
    throw bad("the file has " + std::to_string(data_.size()) + " bytes, too few for a ZIP");
  uint64_t end = std::string::npos;
  uint64_t lowest = data_.size() > 22 + 65535 ? data_.size() - 22 - 65535 : 0;
  for (uint64_t at = data_.size() - 22 + 1; at-- > lowest;)
    if (u32(data_, at) == kEndOfDirectory) {
      end = at;
      break;
    }
  if (end == std::string::npos)
    throw bad("no end-of-central-directory record (truncated, or not a ZIP)");
  uint64_t count = u16(data_, end + 10), dir_size = u32(data_, end + 12),
           dir_offset = u32(data_, end + 16);
  // ZIP64 (archives over 4 GiB or 65535 entries): the locator just before the record.
  if ((count == 0xFFFF || dir_offset == 0xFFFFFFFF || dir_size == 0xFFFFFFFF) && end >= 20 &&
      u32(data_, end - 20) == kEndLocator64) {
    uint64_t rec = u64(data_, end - 20 + 8);
    if (rec + 56 > data_.size() || u32(data_, rec) != kEndOfDirectory64)
      throw bad("a broken ZIP64 record");
    count = u64(data_, rec + 32);
    dir_size = u64(data_, rec + 40);
    dir_offset = u64(data_, rec + 48);
  }
  if (dir_offset + dir_size > data_.size())
    throw bad("the central directory lies past the end of the file (truncated)");
  uint64_t at = dir_offset;
  for (uint64_t i = 0; i < count; ++i) {
    if (at + 46 > data_.size() || u32(data_, at) != kCentralHeader)
      throw bad("central directory entry " + std::to_string(i) + " is corrupt");
    Entry e;
    e.method = u16(data_, at + 10);
    e.crc = u32(data_, at + 16);
    e.compressed = u32(data_, at + 20);
    e.size = u32(data_, at + 24);
    uint16_t name_len = u16(data_, at + 28), extra_len = u16(data_, at + 30),
             comment_len = u16(data_, at + 32);
    e.local_offset = u32(data_, at + 42);
    if (at + 46 + name_len + extra_len + comment_len > data_.size())
      throw bad("central directory entry " + std::to_string(i) + " is truncated");
    std::string name = data_.substr(at + 46, name_len);
    // ZIP64 extra field: the 64-bit values, in order, of those stored as 0xFFFFFFFF.
    for (uint64_t x = at + 46 + name_len, xe = x + extra_len; x + 4 <= xe;) {
      uint16_t id = u16(data_, x), len = u16(data_, x + 2);
      if (id == 0x0001) {
        uint64_t p = x + 4;
        if (e.size == 0xFFFFFFFF && p + 8 <= x + 4 + len) e.size = u64(data_, p), p += 8;
        if (e.compressed == 0xFFFFFFFF && p + 8 <= x + 4 + len)
          e.compressed = u64(data_, p), p += 8;
        if (e.local_offset == 0xFFFFFFFF && p + 8 <= x + 4 + len) e.local_offset = u64(data_, p);
      }
      x += 4 + len;
    }
    entries_[name] = e;
    at += 46 + name_len + extra_len + comment_len;
  }
}

std::vector<std::string> ZipReader::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

std::string ZipReader::read(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw Error("'" + path_ + "' has no entry '" + name + "'");
  const Entry& e = it->second;
  auto bad = [&](const std::string& why) {
    return Error("'" + path_ + "': entry '" + name + "' " + why);
  };
  if (e.local_offset + 30 > data_.size() || u32(data_, e.local_offset) != kLocalHeader)
    throw bad("has a corrupt local header (the archive is damaged or truncated)");
  uint64_t start =
      e.local_offset + 30 + u16(data_, e.local_offset + 26) + u16(data_, e.local_offset + 28);
  if (start + e.compressed > data_.size())
    throw bad("lies past the end of the file (truncated archive)");
  std::string out;
  if (e.method == 0) {
    if (e.compressed != e.size) throw bad("is stored with two different sizes");
    out = data_.substr(start, e.size);
  } else if (e.method == 8) {
    out.resize(e.size);
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw bad("cannot be inflated (zlib)");
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data_.data() + start));
    z.avail_in = static_cast<uInt>(e.compressed);
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    int rc = inflate(&z, Z_FINISH);
    inflateEnd(&z);
    if (rc != Z_STREAM_END || z.total_out != e.size) throw bad("is corrupt (deflate stream)");
  } else {
    throw bad("uses ZIP compression method " + std::to_string(e.method) +
              " (only stored and deflate are read)");
  }
  uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(out.data()), static_cast<uInt>(out.size()));
  if (crc != e.crc) throw bad("fails its CRC-32 check (the archive is damaged)");
  return out;
}

}  // namespace emmy::pt2
