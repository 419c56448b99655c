// How far the tuning database's acknowledged writes reach (<db>/EMMY-ACKED).
//
// RocksDB cannot tell a log cut short by a crash during its last write (that write was never
// acknowledged: dropping it loses nothing) from a log that lost acknowledged writes (a
// truncated file, a bad copy): kTolerateCorruptedTailRecords drops both in silence. So after
// every synced write the writer records the database's sequence number here, and an open that
// finds the database ending below it reports the database as corrupt instead of opening it
// with rows missing.
//
// Layout: two 16-byte slots (sequence u64, CRC-32 of it u32, magic u32) written in turn, each
// followed by fdatasync, so a write torn by a crash spoils one slot and the other still holds
// the value before it. The file is created at its full size once; updates never allocate, so
// they work on a full disk.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace emmy::store {

// The highest sequence number recorded in `file`; nullopt when there is none (no file yet: a
// database written by an emmy before this file existed, or a new one).
std::optional<uint64_t> read_acked(const std::string& file);

class AckedWrites {
 public:
  // Opens `file` for writing, creating it (both slots empty) when missing; error() says
  // whether that worked.
  explicit AckedWrites(const std::string& file);
  ~AckedWrites();
  AckedWrites(const AckedWrites&) = delete;
  AckedWrites& operator=(const AckedWrites&) = delete;

  // The errno of a failed open (0: open).
  int error() const { return error_; }
  // Records `sequence` (or a higher one recorded before) durably. Returns the errno of a
  // failure (0 on success). Not thread-safe: the store calls it under its write lock.
  int record(uint64_t sequence);

 private:
  int fd_ = -1;
  int error_ = 0;
  uint64_t highest_ = 0;
  unsigned next_slot_ = 0;
};

}  // namespace emmy::store
