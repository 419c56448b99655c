#include "zip_reader.hpp"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

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

std::string ZipReader::read_at(uint64_t offset, uint64_t size, const std::string& what) const {
  if (offset > file_size_ || size > file_size_ - offset)
    throw Error("'" + path_ + "': " + what + " lies past the end of the file (" +
                std::to_string(file_size_) + " bytes): the archive is truncated or damaged");
  std::ifstream in(path_, std::ios::binary);
  std::string out(size, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(out.data(), static_cast<std::streamsize>(size));
  if (!in) throw Error("'" + path_ + "': reading " + what + " failed");
  return out;
}

ZipReader::ZipReader(const std::string& path) : path_(path) {
  std::error_code ec;
  file_size_ = std::filesystem::file_size(path, ec);
  if (ec || !std::ifstream(path, std::ios::binary)) throw Error("'" + path + "' cannot be opened");
  auto bad = [&](const std::string& why) {
    return Error("'" + path +
                 "' is not a readable .pt2 archive (a ZIP written by torch.export.save): " + why);
  };
  // The end-of-central-directory record: 22 bytes plus a comment of up to 64 KiB at the end.
  if (file_size_ < 22)
    throw bad("the file has " + std::to_string(file_size_) + " bytes, too few for a ZIP");
  uint64_t tail_offset = file_size_ > 22 + 65535 ? file_size_ - 22 - 65535 : 0;
  std::string tail = read_at(tail_offset, file_size_ - tail_offset, "the end of the archive");
  uint64_t at_tail = std::string::npos;
  for (uint64_t at = tail.size() - 22 + 1; at-- > 0;)
    if (u32(tail, at) == kEndOfDirectory) {
      at_tail = at;
      break;
    }
  if (at_tail == std::string::npos)
    throw bad("no end-of-central-directory record (truncated, or not a ZIP)");
  uint64_t end = tail_offset + at_tail;
  uint64_t count = u16(tail, at_tail + 10), dir_size = u32(tail, at_tail + 12),
           dir_offset = u32(tail, at_tail + 16);
  // ZIP64 (archives over 4 GiB or 65535 entries): the locator just before the record.
  if ((count == 0xFFFF || dir_offset == 0xFFFFFFFF || dir_size == 0xFFFFFFFF) && end >= 20) {
    std::string locator = read_at(end - 20, 20, "the ZIP64 locator");
    if (u32(locator, 0) == kEndLocator64) {
      std::string rec = read_at(u64(locator, 8), 56, "the ZIP64 end record");
      if (u32(rec, 0) != kEndOfDirectory64) throw bad("a broken ZIP64 record");
      count = u64(rec, 32);
      dir_size = u64(rec, 40);
      dir_offset = u64(rec, 48);
    }
  }
  if (dir_offset > file_size_ || dir_size > file_size_ - dir_offset)
    throw bad("the central directory lies past the end of the file (truncated)");
  const std::string dir = read_at(dir_offset, dir_size, "the central directory");
  uint64_t at = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (at + 46 > dir.size() || u32(dir, at) != kCentralHeader)
      throw bad("central directory entry " + std::to_string(i) + " is corrupt");
    Entry e;
    e.method = u16(dir, at + 10);
    e.crc = u32(dir, at + 16);
    e.compressed = u32(dir, at + 20);
    e.size = u32(dir, at + 24);
    uint16_t name_len = u16(dir, at + 28), extra_len = u16(dir, at + 30),
             comment_len = u16(dir, at + 32);
    e.local_offset = u32(dir, at + 42);
    if (at + 46 + name_len + extra_len + comment_len > dir.size())
      throw bad("central directory entry " + std::to_string(i) + " is truncated");
    std::string name = dir.substr(at + 46, name_len);
    // ZIP64 extra field: the 64-bit values, in order, of those stored as 0xFFFFFFFF.
    for (uint64_t x = at + 46 + name_len, xe = x + extra_len; x + 4 <= xe;) {
      uint16_t id = u16(dir, x), len = u16(dir, x + 2);
      if (id == 0x0001) {
        uint64_t p = x + 4, stop = std::min<uint64_t>(x + 4 + len, xe);
        if (e.size == 0xFFFFFFFF && p + 8 <= stop) e.size = u64(dir, p), p += 8;
        if (e.compressed == 0xFFFFFFFF && p + 8 <= stop) e.compressed = u64(dir, p), p += 8;
        if (e.local_offset == 0xFFFFFFFF && p + 8 <= stop) e.local_offset = u64(dir, p);
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
  std::string header = read_at(e.local_offset, 30, "the local header of '" + name + "'");
  if (u32(header, 0) != kLocalHeader)
    throw bad("has a corrupt local header (the archive is damaged or truncated)");
  uint64_t start = e.local_offset + 30 + u16(header, 26) + u16(header, 28);
  std::string stored = read_at(start, e.compressed, "entry '" + name + "'");
  std::string out;
  if (e.method == 0) {
    if (e.compressed != e.size) throw bad("is stored with two different sizes");
    out = std::move(stored);
  } else if (e.method == 8) {
    out.resize(e.size);
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw bad("cannot be inflated (zlib)");
    z.next_in = reinterpret_cast<Bytef*>(stored.data());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    int rc = Z_OK;
    uint64_t in_left = stored.size(), out_left = out.size();
    constexpr uint64_t kStep = 1u << 30;  // avail_in/out are 32-bit: feed large entries in steps
    while (rc == Z_OK) {
      if (z.avail_in == 0 && in_left > 0) {
        z.avail_in = static_cast<uInt>(std::min(in_left, kStep));
        in_left -= z.avail_in;
      }
      if (z.avail_out == 0 && out_left > 0) {
        z.avail_out = static_cast<uInt>(std::min(out_left, kStep));
        out_left -= z.avail_out;
      }
      rc = inflate(&z, Z_NO_FLUSH);
      if (rc == Z_BUF_ERROR && (in_left > 0 || out_left > 0)) rc = Z_OK;
    }
    uint64_t produced = z.total_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END || produced != e.size) throw bad("is corrupt (deflate stream)");
  } else {
    throw bad("uses ZIP compression method " + std::to_string(e.method) +
              " (only stored and deflate are read)");
  }
  uLong crc = crc32_z(0L, reinterpret_cast<const Bytef*>(out.data()), out.size());
  if (crc != e.crc) throw bad("fails its CRC-32 check (the archive is damaged)");
  return out;
}

}  // namespace emmy::pt2
