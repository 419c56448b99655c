// The RocksDB info log of the tuning database (the LOG file beside its data).
//
// RocksDB's own file logger is not usable on a full disk: after one failed append, its next
// append trips an assertion in RocksDB (WritableFileWriter, "sync_without_flush_called_") and
// aborts the whole process before the failed write can even be reported. This logger writes
// with plain write(2) and stops writing at the first error, so a full disk costs diagnostic
// lines, never the run.
#pragma once

#include <memory>
#include <string>

namespace rocksdb {
class Logger;
}

namespace emmy::store {

// A logger appending to `file` (created if missing; an existing one over 1 MiB is first moved
// to `file`.old). When the file cannot be opened the logger drops every line.
std::shared_ptr<rocksdb::Logger> make_info_log(const std::string& file);

}  // namespace emmy::store
