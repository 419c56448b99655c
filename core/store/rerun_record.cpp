#include "store/rerun_record.hpp"

#include <filesystem>
#include <sstream>

#include "emmy/status.hpp"
#include "store/checkpoint.hpp"
#include "store/crc32.hpp"

namespace emmy::store {
namespace {

// The record travels as a checkpoint's state (atomic write, length and CRC checks for free):
// "emmy-rerun 1\n" then four length-prefixed fields.
constexpr const char* kHeader = "emmy-rerun 1\n";

void put_field(std::string& out, const std::string& field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

std::string get_field(const std::string& in, size_t& at) {
  size_t colon = in.find(':', at);
  if (colon == std::string::npos || colon == at || colon - at > 20) throw Error("bad field length");
  uint64_t n = 0;
  for (size_t i = at; i < colon; ++i) {
    if (in[i] < '0' || in[i] > '9') throw Error("bad field length");
    n = n * 10 + static_cast<uint64_t>(in[i] - '0');
  }
  if (n > in.size() - colon - 1) throw Error("a field runs past the end");
  at = colon + 1 + n;
  return in.substr(colon + 1, n);
}

}  // namespace

std::string checkpoint_digest(const std::string& prior_state,
                              const std::vector<emmy::PriorRow>& reservoir) {
  std::ostringstream rows;
  for (const auto& r : reservoir) {
    rows << r.features.op_class << '|' << r.features.dtype << '|' << r.time_us << '|'
         << static_cast<int>(r.regime);
    for (int64_t d : r.features.shape) rows << ',' << d;
    for (const auto& [k, v] : r.knobs) rows << ';' << k << '=' << v;
    rows << '\n';
  }
  std::ostringstream out;
  out << std::hex << crc32(prior_state) << '-' << crc32(rows.str()) << std::dec << '-'
      << prior_state.size() << '-' << reservoir.size();
  return out.str();
}

void write_rerun_record(const std::string& path, const RerunRecord& record) {
  std::string payload = kHeader;
  put_field(payload, record.identity);
  put_field(payload, record.end_digest);
  put_field(payload, record.start_state);
  put_field(payload, record.run_id);
  write_checkpoint(path, payload, {});
}

std::optional<RerunRecord> read_rerun_record(const std::string& path, std::string* warning) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  try {
    Checkpoint cp = read_checkpoint(path);
    const std::string& in = cp.prior_state;
    const std::string header = kHeader;
    if (in.compare(0, header.size(), header) != 0) throw Error("not a re-run record");
    size_t at = header.size();
    RerunRecord r;
    r.identity = get_field(in, at);
    r.end_digest = get_field(in, at);
    r.start_state = get_field(in, at);
    r.run_id = get_field(in, at);
    if (at != in.size()) throw Error("unexpected bytes after the record");
    return r;
  } catch (const std::exception& e) {
    if (warning)
      *warning =
          "ignoring " + path + " (" + e.what() + "): this run starts from the prior's checkpoint";
    return std::nullopt;
  }
}

}  // namespace emmy::store
