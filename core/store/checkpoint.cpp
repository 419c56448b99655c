#include "store/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "store/crc32.hpp"

namespace emmy::store {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr char kMagic[8] = {'E', 'M', 'M', 'Y', 'C', 'K', 'P', 'T'};
constexpr size_t kHeaderSize = 8 + 4 + 4 + 8 + 8;

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

uint64_t get_le(const std::string& in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return v;
}

json number(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}
double get_number(const json& j) {
  return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>();
}

std::string rows_to_json(const std::vector<emmy::PriorRow>& rows) {
  json out = json::array();
  for (const auto& r : rows) {
    json knobs = json::object();
    for (const auto& [k, v] : r.knobs) knobs[k] = number(v);
    out.push_back({{"op_class", r.features.op_class},
                   {"shape", r.features.shape},
                   {"dtype", r.features.dtype},
                   {"flops", number(r.features.flops)},
                   {"bytes", number(r.features.bytes)},
                   {"knobs", knobs},
                   {"time_us", number(r.time_us)},
                   {"regime", emmy::to_string(r.regime)}});
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<emmy::PriorRow> rows_from_json(const std::string& text) {
  json in = json::parse(text);
  std::vector<emmy::PriorRow> rows;
  for (const auto& j : in) {
    emmy::PriorRow r;
    r.features.op_class = j.at("op_class").get<std::string>();
    r.features.shape = j.at("shape").get<std::vector<int64_t>>();
    r.features.dtype = j.at("dtype").get<std::string>();
    r.features.flops = get_number(j.at("flops"));
    r.features.bytes = get_number(j.at("bytes"));
    for (const auto& [k, v] : j.at("knobs").items()) r.knobs[k] = get_number(v);
    r.time_us = get_number(j.at("time_us"));
    std::string regime = j.at("regime").get<std::string>();
    if (regime != "rank" && regime != "deploy")
      throw std::runtime_error("unknown regime '" + regime + "'");
    r.regime = regime == "deploy" ? emmy::Regime::deploy : emmy::Regime::rank;
    rows.push_back(std::move(r));
  }
  return rows;
}

[[noreturn]] void io_error(const std::string& what, const std::string& path) {
  throw emmy::Error("checkpoint " + path + ": " + what + ": " + std::strerror(errno));
}

// Durability needs fsync on the file and on its folder; iostreams offer neither.
void write_all_and_sync(const std::string& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error("cannot create", path);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int saved = errno;
      ::close(fd);
      errno = saved;
      io_error("cannot write", path);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    io_error("cannot fsync", path);
  }
  if (::close(fd) != 0) io_error("cannot close", path);
}

void sync_folder(const fs::path& folder) {
  int fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) io_error("cannot open folder", folder.string());
  ::fsync(fd);  // best effort: some file systems refuse fsync on a folder
  ::close(fd);
}

}  // namespace

void write_checkpoint(const std::string& path, const std::string& prior_state,
                      const std::vector<emmy::PriorRow>& reservoir) {
  std::string rows = rows_to_json(reservoir);
  std::string out(kMagic, sizeof kMagic);
  put_le(out, kCheckpointVersion, 4);
  uint32_t c = crc32(prior_state);
  c = crc32(rows, c);
  put_le(out, c, 4);
  put_le(out, prior_state.size(), 8);
  put_le(out, rows.size(), 8);
  out += prior_state;
  out += rows;

  fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  std::string temp = path + ".tmp-" + std::to_string(::getpid());
  write_all_and_sync(temp, out);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(temp.c_str());
    errno = saved;
    io_error("cannot rename " + temp + " over it", path);
  }
  sync_folder(target.parent_path());
}

Checkpoint read_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) io_error("cannot open", path);
  std::ostringstream buf;
  buf << in.rdbuf();
  std::string bytes = buf.str();
  auto corrupt = [&path](const std::string& why) {
    return CheckpointCorrupt("checkpoint " + path + " is corrupt: " + why);
  };
  if (bytes.size() < kHeaderSize || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw corrupt("not an emmy checkpoint (bad header)");
  uint64_t version = get_le(bytes, 8, 4);
  if (version != kCheckpointVersion)
    throw corrupt("format version " + std::to_string(version) + ", this emmy reads version " +
                  std::to_string(kCheckpointVersion));
  uint32_t want = static_cast<uint32_t>(get_le(bytes, 12, 4));
  uint64_t state_len = get_le(bytes, 16, 8);
  uint64_t rows_len = get_le(bytes, 24, 8);
  uint64_t body = bytes.size() - kHeaderSize;
  if (state_len > body || rows_len != body - state_len)
    throw corrupt("lengths do not match the file size (truncated?)");
  std::string_view state(bytes.data() + kHeaderSize, state_len);
  std::string_view rows(bytes.data() + kHeaderSize + state_len, rows_len);
  if (crc32(rows, crc32(state)) != want) throw corrupt("checksum mismatch");
  Checkpoint cp;
  cp.prior_state.assign(state);
  try {
    cp.reservoir = rows_from_json(std::string(rows));
  } catch (const std::exception& e) {
    throw corrupt(std::string("bad reservoir rows: ") + e.what());
  }
  return cp;
}

std::optional<Checkpoint> load_checkpoint_or_set_aside(const std::string& path,
                                                       std::string* warning) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  try {
    return read_checkpoint(path);
  } catch (const CheckpointCorrupt& e) {
    auto now = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
    std::string aside = path + ".corrupt-" + std::to_string(now);
    fs::rename(path, aside, ec);
    if (warning)
      *warning = std::string(e.what()) +
                 (ec ? "; could not rename it aside (" + ec.message() + "), starting fresh"
                     : "; moved to " + aside + ", starting fresh");
    return std::nullopt;
  }
}

}  // namespace emmy::store
