#include "store/acked_writes.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "store/crc32.hpp"

namespace emmy::store {
namespace {

constexpr uint32_t kMagic = 0x454d4b41;  // "AKME"
constexpr size_t kSlot = 16;

void encode(uint64_t sequence, unsigned char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(sequence >> (8 * i));
  uint32_t crc = crc32(std::string_view(reinterpret_cast<const char*>(out), 8));
  for (int i = 0; i < 4; ++i) out[8 + i] = static_cast<unsigned char>(crc >> (8 * i));
  for (int i = 0; i < 4; ++i) out[12 + i] = static_cast<unsigned char>(kMagic >> (8 * i));
}

std::optional<uint64_t> decode(const unsigned char* in) {
  uint64_t sequence = 0;
  uint32_t crc = 0, magic = 0;
  for (int i = 0; i < 8; ++i) sequence |= static_cast<uint64_t>(in[i]) << (8 * i);
  for (int i = 0; i < 4; ++i) crc |= static_cast<uint32_t>(in[8 + i]) << (8 * i);
  for (int i = 0; i < 4; ++i) magic |= static_cast<uint32_t>(in[12 + i]) << (8 * i);
  if (magic != kMagic || crc != crc32(std::string_view(reinterpret_cast<const char*>(in), 8)))
    return std::nullopt;
  return sequence;
}

bool read_slots(int fd, unsigned char (&slots)[2 * kSlot]) {
  size_t done = 0;
  while (done < sizeof slots) {
    ssize_t n = ::pread(fd, slots + done, sizeof slots - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool write_all(int fd, const unsigned char* bytes, size_t size, off_t at) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pwrite(fd, bytes + done, size - done, at + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::optional<uint64_t> read_acked(const std::string& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  unsigned char slots[2 * kSlot];
  bool whole = read_slots(fd, slots);
  ::close(fd);
  if (!whole) return std::nullopt;
  std::optional<uint64_t> a = decode(slots), b = decode(slots + kSlot);
  if (a && b) return std::max(*a, *b);
  return a ? a : b;
}

AckedWrites::AckedWrites(const std::string& file) {
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    error_ = errno;
    return;
  }
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && st.st_size < static_cast<off_t>(2 * kSlot)) {
    unsigned char empty[2 * kSlot] = {};
    if (!write_all(fd_, empty, sizeof empty, 0) || ::fdatasync(fd_) != 0) {
      error_ = errno ? errno : EIO;
      ::close(fd_);
      fd_ = -1;
      return;
    }
  }
  // Continue in the slot after the newer one, so the newest value is never overwritten first.
  unsigned char slots[2 * kSlot];
  if (read_slots(fd_, slots)) {
    std::optional<uint64_t> a = decode(slots), b = decode(slots + kSlot);
    next_slot_ = (a && (!b || *a >= *b)) ? 1 : 0;
    highest_ = std::max(a.value_or(0), b.value_or(0));
  }
}

AckedWrites::~AckedWrites() {
  if (fd_ >= 0) ::close(fd_);
}

int AckedWrites::record(uint64_t sequence) {
  if (fd_ < 0) return error_ ? error_ : EBADF;
  // Writes from several threads may read the sequence number out of order: never go back.
  highest_ = std::max(highest_, sequence);
  unsigned char slot[kSlot];
  encode(highest_, slot);
  if (!write_all(fd_, slot, kSlot, static_cast<off_t>(next_slot_ * kSlot)) || ::fdatasync(fd_) != 0)
    return errno ? errno : EIO;
  next_slot_ ^= 1u;
  return 0;
}

}  // namespace emmy::store
