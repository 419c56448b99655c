#include "store/tuning_store.hpp"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/listener.h>
#include <rocksdb/metadata.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_reader.h>
#include <rocksdb/table_properties.h>
#include <rocksdb/write_batch.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "store/db_logger.hpp"
#include "store/kernel_names.hpp"
#include "store/record_codec.hpp"

namespace emmy::store {
namespace fs = std::filesystem;

namespace {

const std::vector<std::string>& our_column_families() {
  static const std::vector<std::string> names = {kMeasurementsCF, kSearchTreeCF, kKernelsCF,
                                                 kRunsCF, kPlansCF};
  return names;
}

bool starts_with(const rocksdb::Slice& s, const std::string& prefix) {
  return s.size() >= prefix.size() && std::memcmp(s.data(), prefix.data(), prefix.size()) == 0;
}

// Every column family the database has (a newer emmy may have added some: RocksDB insists on
// opening them all) plus ours.
std::vector<std::string> column_families_to_open(const rocksdb::DBOptions& options,
                                                 const std::string& path) {
  std::vector<std::string> names;
  if (!rocksdb::DB::ListColumnFamilies(options, path, &names).ok()) names.clear();
  std::set<std::string> seen(names.begin(), names.end());
  if (!seen.count(rocksdb::kDefaultColumnFamilyName))
    names.push_back(rocksdb::kDefaultColumnFamilyName);
  return names;
}

bool contains(const rocksdb::Status& s, const char* text) {
  return s.ToString().find(text) != std::string::npos;
}

bool is_no_space(const rocksdb::Status& s) {
  return s.IsNoSpace() || s.subcode() == rocksdb::Status::kNoSpace ||
         contains(s, "No space left on device");
}

// Damage to the files: a failed checksum, a record that does not parse, or a file the database
// lists that is gone (a deleted .sst is damage, not an empty table).
bool is_corruption(const rocksdb::Status& s) {
  return s.IsCorruption() || s.IsPathNotFound() || contains(s, "No such file or directory");
}

// RocksDB errors that happen away from a call (a flush or compaction failing) are kept here and
// turned into the next write's error, and RocksDB's automatic recovery from them is turned off:
// after a failure the run stops with what it stored rather than have the database resume (or
// retry writes into a full disk) behind its back.
class ErrorListener : public rocksdb::EventListener {
 public:
  void OnBackgroundError(rocksdb::BackgroundErrorReason, rocksdb::Status* error) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error && !error->ok() && first_.ok()) first_ = *error;
  }
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason, rocksdb::Status,
                            bool* auto_recovery) override {
    if (auto_recovery) *auto_recovery = false;
  }
  rocksdb::Status first() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_;
  }

 private:
  mutable std::mutex mutex_;
  rocksdb::Status first_;
};

// Every read verifies the checksums of the blocks it reads (RocksDB's default, kept on purpose).
rocksdb::ReadOptions checked_read() {
  rocksdb::ReadOptions r;
  r.verify_checksums = true;
  return r;
}

// The options both the writer and the readers open with.
rocksdb::Options checked_options(const std::string& info_log_file,
                                 const std::shared_ptr<ErrorListener>& listener) {
  rocksdb::Options options;
  // Check what RocksDB can at open (every table file the MANIFEST lists is there with its
  // recorded size) and fail calls on damage instead of working around it.
  options.paranoid_checks = true;
  options.skip_checking_sst_file_sizes_on_db_open = false;
  // The write-ahead log: every write is synced before it is acknowledged, so after a crash
  // only the write in flight (never acknowledged, never counted as stored) can be cut short at
  // the log's end. kTolerateCorruptedTailRecords drops exactly that torn tail and refuses every
  // other damage (a checksum mismatch anywhere, a bad record in the middle): the open fails as
  // corrupt. kPointInTimeRecovery (RocksDB's default) would instead stop replaying at the damage
  // and open with every later row silently gone (and the next flush would make that final);
  // kAbsoluteConsistency would refuse to open after an ordinary kill -9 that tore its last,
  // unacknowledged write.
  options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  options.info_log = make_info_log(info_log_file);
  options.listeners.push_back(listener);
  return options;
}

std::string acked_file(const std::string& path) {
  return path + "/EMMY-ACKED";
}

rocksdb::Status errno_status(int err) {
  if (err == ENOSPC || err == EDQUOT) return rocksdb::Status::NoSpace(std::strerror(err));
  return rocksdb::Status::IOError(std::strerror(err));
}

// Files only a RocksDB database leaves: a folder holding them is a database, whatever is gone.
// Whether a process holds the database's LOCK (RocksDB's writer takes an fcntl write lock on it).
bool writer_running(const std::string& path) {
  int fd = ::open((path + "/LOCK").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  bool held = ::fcntl(fd, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
  ::close(fd);
  return held;
}

bool is_lock_error(const rocksdb::Status& s) {
  if (!s.IsIOError()) return false;
  std::string text = s.ToString();
  std::transform(text.begin(), text.end(), text.begin(), ::tolower);
  return text.find("lock") != std::string::npos;
}

}  // namespace

bool has_database_files(const std::string& path) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("MANIFEST-", 0) == 0 || name.ends_with(".sst") || name.ends_with(".log"))
      return true;
  }
  return false;
}

struct TuningStore::Handles {
  std::shared_ptr<ErrorListener> listener = std::make_shared<ErrorListener>();
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> all;
  std::map<std::string, rocksdb::ColumnFamilyHandle*> by_name;

  rocksdb::ColumnFamilyHandle* cf(const char* name) const {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  }

  ~Handles() {
    if (!db) return;
    for (auto* h : all) db->DestroyColumnFamilyHandle(h);
    db->Close().PermitUncheckedError();
  }
};

TuningStore::TuningStore(std::string path, bool reader)
    : path_(std::move(path)), reader_(reader), h_(std::make_unique<Handles>()) {
  warn_ = [](const std::string& m) { std::cerr << "emmy: warning: " << m << "\n"; };
}

TuningStore::~TuningStore() {
  h_.reset();  // close before removing the reader's folder
  if (!secondary_dir_.empty()) {
    std::error_code ec;
    fs::remove_all(secondary_dir_, ec);
  }
}

// Whether the database at `path` is whole, checked through a read-only instance that changes
// no file (a writer's open would first replay its log into a new table and write a new
// MANIFEST, and delete the table files the MANIFEST does not list). At that open RocksDB
// finds every table file the MANIFEST lists and compares its size, and replays the log with
// the recovery mode above; then every block of every table is read against its checksum
// (tuning databases are megabytes: milliseconds), and the database must reach the writes
// acknowledged before (EMMY-ACKED, read before the open). Only when no writer holds the
// database: RocksDB's read-only instances are not meant to be opened beside a writer (and that
// writer checked the same at its own open).
rocksdb::Status TuningStore::check_whole(const std::string& info_log_file) const {
  if (writer_running(path_)) return rocksdb::Status::OK();
  const std::optional<uint64_t> acked = read_acked(acked_file(path_));
  rocksdb::Options options = checked_options(info_log_file, h_->listener);
  options.max_open_files = -1;  // open every table file now
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& n : column_families_to_open(options, path_))
    descriptors.emplace_back(n, rocksdb::ColumnFamilyOptions(options));
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(options), path_, descriptors, &handles, &raw);
  if (s.ok()) s = raw->VerifyChecksum();
  if (s.ok()) s = reaches_acked(raw->GetLatestSequenceNumber(), acked);
  if (s.ok()) s = unlisted_tables(*raw, handles, options);
  if (raw) {
    for (auto* h : handles) raw->DestroyColumnFamilyHandle(h);
    raw->Close().PermitUncheckedError();
    delete raw;
  }
  return s;
}

// A table file in the folder that the MANIFEST does not list is either left by a crash between
// writing a flush's table and recording it (its rows are still in the log, so the database has
// them all) or a table whose record the MANIFEST lost (a cut MANIFEST: its rows are gone from
// the database, and a writer's open would delete the file). Tell them apart by the rows.
rocksdb::Status TuningStore::unlisted_tables(
    rocksdb::DB& db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
    const rocksdb::Options& options) const {
  std::vector<rocksdb::LiveFileMetaData> live;
  db.GetLiveFilesMetaData(&live);
  std::set<std::string> listed;
  for (const auto& f : live) listed.insert(fs::path(f.name).filename().string());
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".sst") || listed.count(name)) continue;
    rocksdb::SstFileReader reader(options);
    rocksdb::Status s = reader.Open(entry.path().string());
    if (!s.ok()) continue;  // not a table a flush finished: nothing of it was ever listed
    auto props = reader.GetTableProperties();
    rocksdb::ColumnFamilyHandle* cf = nullptr;
    for (auto* h : handles)
      if (props && h->GetName() == props->column_family_name) cf = h;
    std::unique_ptr<rocksdb::Iterator> it(reader.NewIterator(checked_read()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      std::string value;
      rocksdb::Status got =
          cf ? db.Get(checked_read(), cf, it->key(), &value) : rocksdb::Status::NotFound();
      if (got.IsNotFound())
        return rocksdb::Status::Corruption("table file " + entry.path().string() +
                                           " is not listed in the MANIFEST but holds rows the "
                                           "database does not have: the MANIFEST lost records");
      if (!got.ok()) return got;
    }
  }
  return rocksdb::Status::OK();
}

// check_whole, again when it failed while a writer was starting: its open replays the log into a
// table and deletes the log, so a check at that moment can miss a file that is not missing. Once
// the writer holds the database check_whole leaves the check to it.
rocksdb::Status TuningStore::check_whole_settled(const std::string& info_log_file) const {
  rocksdb::Status s = check_whole(info_log_file);
  for (int attempt = 1; attempt < 3 && !s.ok() && !s.IsCorruption(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s = check_whole(info_log_file);
  }
  if (!s.ok() && writer_running(path_)) return rocksdb::Status::OK();
  return s;
}

rocksdb::Status TuningStore::reaches_acked(uint64_t last, std::optional<uint64_t> acked) const {
  if (!acked || last >= *acked) return rocksdb::Status::OK();
  return rocksdb::Status::Corruption("the database ends at write sequence " + std::to_string(last) +
                                     " but writes up to " + std::to_string(*acked) +
                                     " were acknowledged (" + acked_file(path_) +
                                     "): its log or MANIFEST lost acknowledged writes");
}

std::unique_ptr<TuningStore> TuningStore::open_writer(const std::string& path) {
  std::unique_ptr<TuningStore> store(new TuningStore(path, false));
  std::error_code ec;
  fs::create_directories(path, ec);  // for the info log; RocksDB would create it anyway

  // A damaged database is refused before RocksDB's open would touch its files.
  if (fs::exists(fs::path(path) / "CURRENT", ec)) {
    if (rocksdb::Status s = store->check_whole_settled(path + "/LOG"); !s.ok())
      store->fail("check", s);
  } else if (has_database_files(path)) {
    store->fail("open", rocksdb::Status::Corruption(
                            "its CURRENT file is missing, its other files are there"));
  }

  rocksdb::Options options = checked_options(path + "/LOG", store->h_->listener);
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  options.keep_log_file_num = 5;
  options.max_background_jobs = 2;

  std::vector<std::string> names = column_families_to_open(options, path);
  for (const auto& n : our_column_families())
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& n : names) descriptors.emplace_back(n, rocksdb::ColumnFamilyOptions(options));

  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(rocksdb::DBOptions(options), path, descriptors, &store->h_->all, &raw);
  if (!s.ok()) {
    if (is_lock_error(s))
      throw DatabaseBusy("database " + path +
                         " is in use by another `emmy tune` (lock held); wait for it or use --db");
    store->fail("open", s);
  }
  store->h_->db.reset(raw);
  for (auto* h : store->h_->all) store->h_->by_name[h->GetName()] = h;
  store->acked_ = std::make_unique<AckedWrites>(acked_file(path));
  if (int err = store->acked_->error())
    store->fail("creating " + acked_file(path), errno_status(err));
  return store;
}

std::unique_ptr<TuningStore> TuningStore::open_reader(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(fs::path(path) / "CURRENT", ec)) {
    if (has_database_files(path))
      throw DatabaseCorrupt("tuning database " + path +
                            " is corrupt (its CURRENT file is missing, its other files are "
                            "there); its files were left as they are, nothing was repaired or "
                            "deleted: keep a copy, then move it aside or pass another --db");
    throw DatabaseMissing("no tuning database at " + path + "; run emmy tune first");
  }
  std::unique_ptr<TuningStore> store(new TuningStore(path, true));

  // A secondary instance keeps its own (info log) files in a folder of its own, so reading
  // writes nothing into the database folder and takes no lock from the writer.
  std::string tmpl = (fs::temp_directory_path() / "emmy-eval-XXXXXX").string();
  if (!mkdtemp(tmpl.data()))
    throw emmy::Error("cannot create a temporary folder for reading " + path);
  store->secondary_dir_ = tmpl;

  // A secondary instance tolerates missing table files (it expects its writer to delete files
  // under it): without a writer, the read-only check finds them.
  if (rocksdb::Status s = store->check_whole_settled(tmpl + "/LOG.check"); !s.ok())
    store->fail("open for reading", s);

  rocksdb::Options options = checked_options(tmpl + "/LOG", store->h_->listener);
  options.max_open_files = -1;  // required by secondary instances
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& n : column_families_to_open(options, path))
    descriptors.emplace_back(n, rocksdb::ColumnFamilyOptions(options));

  rocksdb::Status s;
  // A writer flushing or rolling its log at the same moment can make one attempt miss a file.
  for (int attempt = 0; attempt < 3; ++attempt) {
    // Read before the open: a writer acknowledging more meanwhile only adds rows beyond what
    // this reader must see.
    const std::optional<uint64_t> acked = read_acked(acked_file(path));
    rocksdb::DB* raw = nullptr;
    auto listener = store->h_->listener;
    store->h_ = std::make_unique<Handles>();
    store->h_->listener = listener;
    s = rocksdb::DB::OpenAsSecondary(rocksdb::DBOptions(options), path, store->secondary_dir_,
                                     descriptors, &store->h_->all, &raw);
    if (s.ok()) {
      store->h_->db.reset(raw);
      s = raw->VerifyChecksum();
      if (s.ok()) s = store->reaches_acked(raw->GetLatestSequenceNumber(), acked);
      if (s.ok()) break;
    }
    if (!(s.IsIOError() || s.IsPathNotFound() || contains(s, "No such file") ||
          writer_running(path)))
      break;
  }
  if (!s.ok()) store->fail("open for reading", s);
  for (auto* h : store->h_->all) store->h_->by_name[h->GetName()] = h;
  return store;
}

void TuningStore::refresh() {
  if (!reader_) return;
  rocksdb::Status s = h_->db->TryCatchUpWithPrimary();
  if (!s.ok()) fail("catching up with the writer", s);
}

void TuningStore::set_warning_sink(std::function<void(const std::string&)> sink) {
  std::lock_guard<std::mutex> lock(corrupt_mutex_);
  warn_ = std::move(sink);
}

std::vector<CorruptRecord> TuningStore::corrupt_records() const {
  std::lock_guard<std::mutex> lock(corrupt_mutex_);
  return corrupt_;
}

void TuningStore::report_corrupt(rocksdb::ColumnFamilyHandle* cf, const std::string& key,
                                 const std::string& reason) const {
  CorruptRecord r{cf->GetName(), printable_key(key), reason};
  std::lock_guard<std::mutex> lock(corrupt_mutex_);
  if (warn_)
    warn_("corrupt record in " + path_ + " (" + r.column_family + ") at key '" + r.key +
          "': " + r.reason + "; skipped");
  corrupt_.push_back(std::move(r));
}

void TuningStore::require_writer(const char* what) const {
  if (reader_)
    throw emmy::Error(std::string("tuning database ") + path_ + " is open for reading only (" +
                      what + ")");
}

// ---- failures ----

void TuningStore::fail(const std::string& what, const rocksdb::Status& s) const {
  std::exception_ptr error;
  if (is_no_space(s)) {
    error = std::make_exception_ptr(
        DatabaseFull("no space left on the device of tuning database " + path_ + " (" + what +
                     ": " + s.ToString() +
                     "); everything stored before this write is kept: free space and run "
                     "again, the run goes on from there"));
  } else if (is_corruption(s)) {
    error = std::make_exception_ptr(DatabaseCorrupt(
        "tuning database " + path_ + " is corrupt (" + what + ": " + s.ToString() +
        "); its files were left as they are, nothing was repaired or deleted: keep a copy, then "
        "move it aside or pass another --db"));
  } else {
    error = std::make_exception_ptr(
        emmy::Error("tuning database " + path_ + ": " + what + " failed: " + s.ToString()));
  }
  {
    std::lock_guard<std::mutex> lock(failed_mutex_);
    if (!failed_) failed_ = error;
  }
  std::rethrow_exception(error);
}

void TuningStore::throw_if_failed() const {
  {
    std::lock_guard<std::mutex> lock(failed_mutex_);
    if (failed_) std::rethrow_exception(failed_);
  }
  rocksdb::Status background = h_->listener->first();
  if (!background.ok()) fail("background flush or compaction", background);
}

// ---- reading ----

template <typename Record>
std::optional<Record> TuningStore::get(rocksdb::ColumnFamilyHandle* cf,
                                       const std::string& key) const {
  if (!cf) return std::nullopt;
  std::string value;
  rocksdb::Status s = h_->db->Get(checked_read(), cf, key, &value);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) fail("read of key '" + printable_key(key) + "' in " + cf->GetName(), s);
  Record r;
  std::string why;
  if (!decode_record(value, r, why)) {
    report_corrupt(cf, key, why);
    return std::nullopt;
  }
  return r;
}

template <typename Record>
void TuningStore::scan(rocksdb::ColumnFamilyHandle* cf, const std::string& prefix,
                       const std::function<void(Record&&)>& visit) const {
  if (!cf) return;
  std::unique_ptr<rocksdb::Iterator> it(h_->db->NewIterator(checked_read(), cf));
  for (it->Seek(prefix); it->Valid() && starts_with(it->key(), prefix); it->Next()) {
    Record r;
    std::string why;
    if (decode_record(std::string_view(it->value().data(), it->value().size()), r, why))
      visit(std::move(r));
    else
      report_corrupt(cf, it->key().ToString(), why);
  }
  // An iterator stops early on damage: what it returned is only part, so it is an error.
  if (!it->status().ok()) fail("scan of " + cf->GetName(), it->status());
}

std::vector<std::string> TuningStore::scan_keys(rocksdb::ColumnFamilyHandle* cf,
                                                const std::string& prefix) const {
  std::vector<std::string> keys;
  if (!cf) return keys;
  std::unique_ptr<rocksdb::Iterator> it(h_->db->NewIterator(checked_read(), cf));
  for (it->Seek(prefix); it->Valid() && starts_with(it->key(), prefix); it->Next())
    keys.push_back(it->key().ToString());
  if (!it->status().ok()) fail("scan of " + cf->GetName(), it->status());
  return keys;
}

std::optional<MeasurementRecord> TuningStore::lookup(const std::string& env,
                                                     const std::string& structural_key,
                                                     const std::string& config_key,
                                                     emmy::Regime regime) const {
  bool deploy = regime == emmy::Regime::deploy;
  auto* cf = h_->cf(deploy ? kSearchTreeCF : kMeasurementsCF);
  std::string key = deploy ? deploy_key(env, structural_key, config_key)
                           : measurement_key(env, structural_key, config_key);
  auto r = get<MeasurementRecord>(cf, key);
  if (r && (r->env != env || r->structural_key != structural_key || r->config_key != config_key ||
            r->regime != regime)) {
    report_corrupt(cf, key, "record does not match its key");
    return std::nullopt;
  }
  return r;
}

std::optional<KernelRecord> TuningStore::kernel(const std::string& structural_key) const {
  return get<KernelRecord>(h_->cf(kKernelsCF), kernel_desc_key(structural_key));
}

std::optional<RunRecord> TuningStore::run(const std::string& run_id) const {
  return get<RunRecord>(h_->cf(kRunsCF), run_id);
}

std::optional<PlanRecord> TuningStore::plan(const std::string& env,
                                            const std::string& graph_key) const {
  return get<PlanRecord>(h_->cf(kPlansCF), plan_key(env, graph_key));
}

std::vector<MeasurementRecord> TuningStore::variants(const std::string& kernel) const {
  std::vector<MeasurementRecord> out;
  if (kernel.empty()) return out;
  // (env, structural key) pairs from the two indexes: the kernel names `kernel` means (as
  // trace and tune print them, spelled out, or a prefix: match_kernel_names), structural-key
  // prefix.
  std::set<std::pair<std::string, std::string>> kernels_found;
  auto* index = h_->cf(kKernelsCF);
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> by_name;
  for (const auto& key : scan_keys(index, key_prefix({"name"}))) {
    auto parts = split_key(key);
    if (parts.size() == 4) by_name[parts[1]].emplace_back(parts[2], parts[3]);
  }
  std::vector<std::string> names;
  for (const auto& entry : by_name) names.push_back(entry.first);
  for (const auto& name : match_kernel_names(kernel, names))
    kernels_found.insert(by_name[name].begin(), by_name[name].end());
  for (const auto& key : scan_keys(index, key_prefix({"skey"}) + kernel)) {
    auto parts = split_key(key);
    if (parts.size() == 3) kernels_found.emplace(parts[2], parts[1]);
  }
  auto collect = [&out](MeasurementRecord&& r) { out.push_back(std::move(r)); };
  for (const auto& [env, skey] : kernels_found) {
    scan<MeasurementRecord>(h_->cf(kMeasurementsCF), key_prefix({env, skey}), collect);
    scan<MeasurementRecord>(h_->cf(kSearchTreeCF), key_prefix({env, "deploy", skey}), collect);
  }
  return out;
}

std::vector<MeasurementRecord> TuningStore::all_measurements(bool failures_only) const {
  std::vector<MeasurementRecord> out;
  auto collect = [&](MeasurementRecord&& r) {
    if (!failures_only || !r.ok()) out.push_back(std::move(r));
  };
  scan<MeasurementRecord>(h_->cf(kMeasurementsCF), "", collect);
  // search_tree also holds node statistics: visit only its deploy-measurement keys.
  auto* tree = h_->cf(kSearchTreeCF);
  for (const auto& key : scan_keys(tree, "")) {
    auto parts = split_key(key);
    if (parts.size() < 2 || parts[1] != "deploy") continue;
    if (auto r = get<MeasurementRecord>(tree, key)) collect(std::move(*r));
  }
  return out;
}

std::vector<MeasurementRecord> TuningStore::failures(const std::string& kernel) const {
  if (kernel.empty()) return all_measurements(true);
  std::vector<MeasurementRecord> out = variants(kernel);
  out.erase(std::remove_if(out.begin(), out.end(), [](const auto& r) { return r.ok(); }),
            out.end());
  return out;
}

std::vector<KernelRecord> TuningStore::kernels() const {
  std::vector<KernelRecord> out;
  scan<KernelRecord>(h_->cf(kKernelsCF), key_prefix({"desc"}),
                     [&out](KernelRecord&& r) { out.push_back(std::move(r)); });
  return out;
}

std::vector<RunRecord> TuningStore::runs() const {
  std::vector<RunRecord> out;
  scan<RunRecord>(h_->cf(kRunsCF), "", [&out](RunRecord&& r) { out.push_back(std::move(r)); });
  return out;
}

std::vector<PlanRecord> TuningStore::plans() const {
  std::vector<PlanRecord> out;
  scan<PlanRecord>(h_->cf(kPlansCF), "", [&out](PlanRecord&& r) { out.push_back(std::move(r)); });
  return out;
}

// ---- writing ----

namespace {

rocksdb::WriteOptions synced() {
  rocksdb::WriteOptions w;
  w.sync = true;  // a measurement costs seconds; an fsync per record is cheap insurance
  return w;
}

}  // namespace

void TuningStore::write_one(rocksdb::ColumnFamilyHandle* cf, const std::string& key,
                            const std::string& value) {
  rocksdb::WriteBatch batch;
  rocksdb::Status s = batch.Put(cf, key, value);
  if (!s.ok()) throw emmy::Error("tuning database: cannot batch a write: " + s.ToString());
  write_batch(batch, "write");
}

// Every write goes through here: none after the first failure (a full disk, damage met), so a
// failed write is never followed by one that RocksDB would make on a half-written log.
void TuningStore::write_batch(rocksdb::WriteBatch& batch, const char* what) {
  throw_if_failed();
  rocksdb::Status s = h_->db->Write(synced(), &batch);
  if (!s.ok()) fail(what, s);
  std::lock_guard<std::mutex> lock(acked_mutex_);
  if (int err = acked_->record(h_->db->GetLatestSequenceNumber()))
    fail(std::string("recording the ") + what + " in " + acked_file(path_), errno_status(err));
}

void TuningStore::put_measurement(const MeasurementRecord& in) {
  require_writer("put_measurement");
  MeasurementRecord r = in;
  if (r.config_key.empty()) r.config_key = config_key(r.templ, r.knobs);
  check_key_part("environment fingerprint", r.env);
  check_key_part("structural key", r.structural_key);
  check_key_part("kernel name", r.kernel_name);
  check_key_part("config key", r.config_key);

  bool deploy = r.regime == emmy::Regime::deploy;
  auto* cf = h_->cf(deploy ? kSearchTreeCF : kMeasurementsCF);
  auto* index = h_->cf(kKernelsCF);
  rocksdb::WriteBatch batch;
  auto put = [&batch](rocksdb::ColumnFamilyHandle* c, const std::string& k, const std::string& v) {
    rocksdb::Status s = batch.Put(c, k, v);
    if (!s.ok()) throw emmy::Error("tuning database: cannot batch a write: " + s.ToString());
  };
  put(cf,
      deploy ? deploy_key(r.env, r.structural_key, r.config_key)
             : measurement_key(r.env, r.structural_key, r.config_key),
      encode_record(r));
  put(index, name_index_key(r.kernel_name, r.env, r.structural_key), "");
  put(index, skey_index_key(r.structural_key, r.env), "");
  write_batch(batch, "write");
}

size_t TuningStore::forget_failures(const std::string& kernel,
                                    std::optional<emmy::FailureKind> kind) {
  require_writer("forget_failures");
  auto* measurements = h_->cf(kMeasurementsCF);
  auto* tree = h_->cf(kSearchTreeCF);
  auto* index = h_->cf(kKernelsCF);
  rocksdb::WriteBatch batch;
  auto del = [&batch](rocksdb::ColumnFamilyHandle* c, const std::string& k) {
    rocksdb::Status s = batch.Delete(c, k);
    if (!s.ok()) throw emmy::Error("tuning database: cannot batch a delete: " + s.ToString());
  };
  std::set<std::string> deleted;
  // (env, structural key) -> the kernel names its rows were indexed under.
  std::map<std::pair<std::string, std::string>, std::set<std::string>> touched;
  for (const MeasurementRecord& r : failures(kernel)) {
    if (kind && r.failure != *kind) continue;
    const bool deploy = r.regime == emmy::Regime::deploy;
    std::string key = deploy ? deploy_key(r.env, r.structural_key, r.config_key)
                             : measurement_key(r.env, r.structural_key, r.config_key);
    if (!deleted.insert(key).second) continue;
    del(deploy ? tree : measurements, key);
    touched[{r.env, r.structural_key}].insert(r.kernel_name);
  }
  // The index entries name a kernel per environment: they go only with its last row, so
  // `eval variants` keeps finding the kernels that still have successes.
  for (const auto& [kernel_env, names] : touched) {
    const auto& [env, skey] = kernel_env;
    bool keeps_rows = false;
    for (const auto& k : scan_keys(measurements, key_prefix({env, skey})))
      keeps_rows = keeps_rows || !deleted.count(k);
    for (const auto& k : scan_keys(tree, key_prefix({env, "deploy", skey})))
      keeps_rows = keeps_rows || !deleted.count(k);
    if (keeps_rows) continue;
    for (const auto& name : names) del(index, name_index_key(name, env, skey));
    del(index, skey_index_key(skey, env));
  }
  if (deleted.empty()) return 0;
  write_batch(batch, "delete");
  return deleted.size();
}

void TuningStore::put_kernel(const KernelRecord& r) {
  require_writer("put_kernel");
  check_key_part("structural key", r.structural_key);
  write_one(h_->cf(kKernelsCF), kernel_desc_key(r.structural_key), encode_record(r));
}

void TuningStore::put_run(const RunRecord& r) {
  require_writer("put_run");
  check_key_part("run id", r.run_id);
  write_one(h_->cf(kRunsCF), r.run_id, encode_record(r));
}

void TuningStore::put_plan(const PlanRecord& r) {
  require_writer("put_plan");
  check_key_part("environment fingerprint", r.env);
  check_key_part("graph key", r.graph_key);
  write_one(h_->cf(kPlansCF), plan_key(r.env, r.graph_key), encode_record(r));
}

}  // namespace emmy::store
