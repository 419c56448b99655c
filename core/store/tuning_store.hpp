// The tuning database (docs/DESIGN.md, The tuning database): one RocksDB database with the column
// families measurements, search_tree, kernels, runs and plans. Key layouts: store/keys.hpp; stored
// form (versioned, checksummed): store/record_codec.hpp.
//
// Rules this class keeps:
// - One writer process per database. open_writer() on a database another process (or another
//   TuningStore in this process) has open for writing throws DatabaseBusy.
// - Readers (open_reader: `emmy eval`) work while a writer runs and never disturb it: they are
//   RocksDB secondary instances whose own files live in a private temporary folder.
// - A measurement and its index entries are written in one WriteBatch, synced to the WAL, so a
//   SIGKILL at any moment loses at most the write in flight.
// - rank measurements go to `measurements`; deploy measurements go to `search_tree`, never to
//   `measurements`. Failures are stored like successes: lookup returns them too.
// - A record that fails its own checks on read (record_codec) is reported (warning sink +
//   corrupt_records()) with its key and skipped; it never throws or crashes.
// - Damage RocksDB finds (checksums verified on every read and, at open, over every table file;
//   a missing or cut file; a damaged log) throws DatabaseCorrupt: never fewer rows in silence.
// - After the first failed write (a full disk: DatabaseFull) or any corruption met, every later
//   write throws that same error without touching the files again, so a run stops with what it
//   had stored intact.
//
// Thread safety: all methods may be called from several threads at once.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "emmy/status.hpp"
#include "store/acked_writes.hpp"
#include "store/keys.hpp"
#include "store/records.hpp"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
class Status;
struct Options;
class WriteBatch;
}  // namespace rocksdb

namespace emmy::store {

// Another process (or another writer in this process) holds the database: `emmy tune` exits 3.
// True when `path` holds RocksDB's files (a MANIFEST, tables or a log): a database, whole or
// damaged (its CURRENT missing is damage, reported as DatabaseCorrupt, not a folder to refuse).
bool has_database_files(const std::string& path);

class DatabaseBusy : public emmy::Error {
  using emmy::Error::Error;
};
// No database at the path (open_reader only; a writer creates it): `emmy eval` exits 2.
class DatabaseMissing : public emmy::Error {
  using emmy::Error::Error;
};
// The database's files fail RocksDB's checks (a block checksum, a missing or cut file, a damaged
// log or MANIFEST): every command exits 4. The message names the path and says that its files
// were left as they are; nothing repairs or rewrites them.
class DatabaseCorrupt : public emmy::Error {
  using emmy::Error::Error;
};
// The device holding the database has no space left: every command exits 5. What was written
// before the failed write is kept (each write is one synced batch).
class DatabaseFull : public emmy::Error {
  using emmy::Error::Error;
};

// The column family names (docs/DESIGN.md, The tuning database).
inline constexpr const char* kMeasurementsCF = "measurements";
inline constexpr const char* kSearchTreeCF = "search_tree";
inline constexpr const char* kKernelsCF = "kernels";
inline constexpr const char* kRunsCF = "runs";
inline constexpr const char* kPlansCF = "plans";

class TuningStore {
 public:
  // Opens (creating if needed, with its parent folders) the database for writing.
  // Throws DatabaseBusy if it is in use by another writer, emmy::Error on other failures.
  static std::unique_ptr<TuningStore> open_writer(const std::string& path);
  // Opens an existing database for reading; works while a writer has it open.
  // Throws DatabaseMissing if there is none at `path`.
  static std::unique_ptr<TuningStore> open_reader(const std::string& path);

  ~TuningStore();
  TuningStore(const TuningStore&) = delete;
  TuningStore& operator=(const TuningStore&) = delete;

  const std::string& path() const { return path_; }
  bool is_reader() const { return reader_; }

  // Where corrupt-record warnings go (default: one line on stderr each).
  void set_warning_sink(std::function<void(const std::string&)> sink);
  // Every corrupt record met so far by this instance, in the order met.
  std::vector<CorruptRecord> corrupt_records() const;

  // ---- the tuner's cache ----

  // The stored measurement (success or failure) of this configuration in this regime, if any.
  std::optional<MeasurementRecord> lookup(const std::string& env, const std::string& structural_key,
                                          const std::string& config_key, emmy::Regime regime) const;
  // Writes the record (rank -> measurements, deploy -> search_tree) and its kernel-name and
  // structural-key index entries in one synced batch. Fills in config_key from templ + knobs
  // when empty. Throws emmy::Error on an invalid record or a write failure (and on a reader).
  void put_measurement(const MeasurementRecord& record);

  void put_kernel(const KernelRecord& record);
  void put_run(const RunRecord& record);
  void put_plan(const PlanRecord& record);

  std::optional<KernelRecord> kernel(const std::string& structural_key) const;
  std::optional<RunRecord> run(const std::string& run_id) const;
  std::optional<PlanRecord> plan(const std::string& env, const std::string& graph_key) const;

  // ---- listings for `emmy eval` (unordered; the report functions sort) ----

  // Rank and deploy measurements of the kernels whose name is `kernel` or whose structural key
  // starts with `kernel`, in every environment.
  std::vector<MeasurementRecord> variants(const std::string& kernel) const;
  // Every measurement (both tables), optionally only failures.
  std::vector<MeasurementRecord> all_measurements(bool failures_only = false) const;
  // Failing measurements; `kernel` filters as in variants() (empty: all kernels).
  std::vector<MeasurementRecord> failures(const std::string& kernel = "") const;
  std::vector<KernelRecord> kernels() const;
  std::vector<RunRecord> runs() const;
  std::vector<PlanRecord> plans() const;

  // ---- forgetting (writer only: `emmy eval failures --forget`) ----

  // Deletes the stored failures (both regimes) of `kernel` (filtered as in variants(); empty:
  // every kernel) whose kind is `kind` (nullopt: every kind), in one synced WriteBatch together
  // with the index entries of kernels that keep no measurement at all. Successful measurements
  // are never touched. Returns how many failure rows were deleted. Written for rows stored
  // before the machinery's own failures (a missing worker, an interrupt) stopped being recorded
  // as the candidate's.
  size_t forget_failures(const std::string& kernel = "",
                         std::optional<emmy::FailureKind> kind = std::nullopt);

  // Reader only: catch up with what the writer has written since the reader opened.
  void refresh();

 private:
  struct Handles;
  TuningStore(std::string path, bool reader);

  template <typename Record>
  std::optional<Record> get(rocksdb::ColumnFamilyHandle* cf, const std::string& key) const;
  template <typename Record>
  void scan(rocksdb::ColumnFamilyHandle* cf, const std::string& prefix,
            const std::function<void(Record&&)>& visit) const;
  std::vector<std::string> scan_keys(rocksdb::ColumnFamilyHandle* cf,
                                     const std::string& prefix) const;
  void report_corrupt(rocksdb::ColumnFamilyHandle* cf, const std::string& key,
                      const std::string& reason) const;
  void write_one(rocksdb::ColumnFamilyHandle* cf, const std::string& key, const std::string& value);
  void write_batch(rocksdb::WriteBatch& batch, const char* what);
  // Throws the classified error for a failed RocksDB call (and latches it for writes).
  [[noreturn]] void fail(const std::string& what, const rocksdb::Status& s) const;
  void throw_if_failed() const;
  rocksdb::Status check_whole(const std::string& info_log_file) const;
  rocksdb::Status check_whole_settled(const std::string& info_log_file) const;
  rocksdb::Status unlisted_tables(rocksdb::DB& db,
                                  const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
                                  const rocksdb::Options& options) const;
  // Damage when the database ends (at `last`) below the acknowledged writes recorded before it
  // opened.
  rocksdb::Status reaches_acked(uint64_t last, std::optional<uint64_t> acked) const;
  void require_writer(const char* what) const;

  std::string path_;
  bool reader_ = false;
  std::string secondary_dir_;  // reader's private folder, removed on close
  std::unique_ptr<Handles> h_;
  mutable std::mutex corrupt_mutex_;
  mutable std::vector<CorruptRecord> corrupt_;
  std::function<void(const std::string&)> warn_;
  mutable std::mutex failed_mutex_;
  mutable std::exception_ptr failed_;  // the first write failure or corruption met
  std::mutex acked_mutex_;
  std::unique_ptr<AckedWrites> acked_;  // writer only
};

}  // namespace emmy::store
