#include "store/record_codec.hpp"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "store/crc32.hpp"

namespace emmy::store {
namespace {

using nlohmann::json;

constexpr size_t kHeaderSize = 6;

enum class RecordType : char {
  measurement = 'M',
  kernel = 'K',
  run = 'R',
  plan = 'P',
  // 'N' was a search-tree node's statistics, never written outside tests: kept unused, so an old
  // database's rows of that type are not read as another type.
};

// ---- envelope ----

std::string seal(RecordType type, const json& payload) {
  // Compiler output may hold bytes that are not UTF-8; replace them rather than fail a write.
  std::string text = payload.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(kHeaderSize + text.size());
  out.push_back(static_cast<char>(kRecordVersion));
  out.push_back(static_cast<char>(type));
  out.append(4, '\0');
  out += text;
  uint32_t c = crc32(std::string_view(out.data(), 2));
  c = crc32(std::string_view(out.data() + kHeaderSize, text.size()), c);
  for (int i = 0; i < 4; ++i) out[2 + i] = static_cast<char>((c >> (8 * i)) & 0xFFu);
  return out;
}

bool unseal(std::string_view stored, RecordType type, json& payload, std::string& why) {
  if (stored.size() < kHeaderSize) {
    why = "record too short (" + std::to_string(stored.size()) + " bytes)";
    return false;
  }
  auto version = static_cast<unsigned char>(stored[0]);
  if (version != kRecordVersion) {
    why = "unknown record version " + std::to_string(version) + " (this emmy reads version " +
          std::to_string(kRecordVersion) + ")";
    return false;
  }
  if (stored[1] != static_cast<char>(type)) {
    why = std::string("record type '") + stored[1] + "' where '" + static_cast<char>(type) +
          "' was expected";
    return false;
  }
  uint32_t want = 0;
  for (int i = 0; i < 4; ++i)
    want |= static_cast<uint32_t>(static_cast<unsigned char>(stored[2 + i])) << (8 * i);
  uint32_t got = crc32(stored.substr(0, 2));
  got = crc32(stored.substr(kHeaderSize), got);
  if (got != want) {
    why = "checksum mismatch";
    return false;
  }
  payload = json::parse(stored.substr(kHeaderSize), nullptr, false);
  if (payload.is_discarded() || !payload.is_object()) {
    why = "payload is not a JSON object";
    return false;
  }
  return true;
}

// Runs `fill` (which reads fields with .at(), throwing on a missing or mistyped one).
template <typename F>
bool read_fields(F&& fill, std::string& why) {
  try {
    fill();
    return true;
  } catch (const std::exception& e) {
    why = std::string("bad field: ") + e.what();
    return false;
  }
}

// JSON has no NaN or infinity: they are stored as null and read back as NaN.
json number(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}
double get_number(const json& j) {
  return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>();
}
json knobs_json(const std::map<std::string, double>& knobs) {
  json j = json::object();
  for (const auto& [name, value] : knobs) j[name] = number(value);
  return j;
}
std::map<std::string, double> get_knobs(const json& j) {
  std::map<std::string, double> knobs;
  for (const auto& [name, value] : j.items()) knobs[name] = get_number(value);
  return knobs;
}

emmy::Regime get_regime(const json& j) {
  std::string s = j.get<std::string>();
  if (s == "rank") return emmy::Regime::rank;
  if (s == "deploy") return emmy::Regime::deploy;
  throw std::runtime_error("unknown regime '" + s + "'");
}

emmy::FailureKind get_failure(const json& j) {
  std::string s = j.get<std::string>();
  for (auto k :
       {emmy::FailureKind::none, emmy::FailureKind::build_error, emmy::FailureKind::runtime_fault,
        emmy::FailureKind::timeout, emmy::FailureKind::wrong_result, emmy::FailureKind::refused})
    if (s == emmy::to_string(k)) return k;
  throw std::runtime_error("unknown failure kind '" + s + "'");
}

}  // namespace

// ---- measurement ----

std::string encode_record(const MeasurementRecord& r) {
  json samples = json::array();
  for (double s : r.samples_us) samples.push_back(number(s));
  json fields = {{"env", r.env},
                 {"structural_key", r.structural_key},
                 {"kernel_name", r.kernel_name},
                 {"templ", r.templ},
                 {"config_key", r.config_key},
                 {"knobs", knobs_json(r.knobs)},
                 {"regime", emmy::to_string(r.regime)},
                 {"failure", emmy::to_string(r.failure)},
                 {"message", r.message},
                 {"median_us", number(r.median_us)},
                 {"samples_us", samples},
                 {"run_id", r.run_id},
                 {"unix_time", r.unix_time}};
  // Optional (absent in rows written before it existed), so no record version bump.
  if (r.timeout_s > 0) fields["timeout_s"] = number(r.timeout_s);
  if (r.isolated_us > 0) fields["isolated_us"] = number(r.isolated_us);
  return seal(RecordType::measurement, fields);
}

bool decode_record(std::string_view stored, MeasurementRecord& r, std::string& why) {
  json j;
  if (!unseal(stored, RecordType::measurement, j, why)) return false;
  return read_fields(
      [&] {
        r.env = j.at("env").get<std::string>();
        r.structural_key = j.at("structural_key").get<std::string>();
        r.kernel_name = j.at("kernel_name").get<std::string>();
        r.templ = j.at("templ").get<std::string>();
        r.config_key = j.at("config_key").get<std::string>();
        r.knobs = get_knobs(j.at("knobs"));
        r.regime = get_regime(j.at("regime"));
        r.failure = get_failure(j.at("failure"));
        r.message = j.at("message").get<std::string>();
        r.median_us = get_number(j.at("median_us"));
        r.samples_us.clear();
        for (const auto& s : j.at("samples_us")) r.samples_us.push_back(get_number(s));
        r.run_id = j.at("run_id").get<std::string>();
        r.unix_time = j.at("unix_time").get<int64_t>();
        r.timeout_s = j.contains("timeout_s") ? get_number(j.at("timeout_s")) : 0;
        r.isolated_us = j.contains("isolated_us") ? get_number(j.at("isolated_us")) : 0;
      },
      why);
}

// ---- kernel ----

std::string encode_record(const KernelRecord& r) {
  return seal(RecordType::kernel, {{"structural_key", r.structural_key},
                                   {"kernel_name", r.kernel_name},
                                   {"description", r.description}});
}

bool decode_record(std::string_view stored, KernelRecord& r, std::string& why) {
  json j;
  if (!unseal(stored, RecordType::kernel, j, why)) return false;
  return read_fields(
      [&] {
        r.structural_key = j.at("structural_key").get<std::string>();
        r.kernel_name = j.at("kernel_name").get<std::string>();
        r.description = j.at("description").get<std::string>();
      },
      why);
}

// ---- run ----

std::string encode_record(const RunRecord& r) {
  return seal(RecordType::run, {{"run_id", r.run_id},
                                {"unix_time", r.unix_time},
                                {"source", r.source},
                                {"backend", r.backend},
                                {"env", r.env},
                                {"kernels", r.kernels},
                                {"distinct_kernels", r.distinct_kernels},
                                {"best_total_us", number(r.best_total_us)},
                                {"assembled_us", number(r.assembled_us)},
                                {"validation_gap_pct", number(r.validation_gap_pct)},
                                {"validation_note", r.validation_note},
                                {"set_aside", r.set_aside},
                                {"status", r.status}});
}

bool decode_record(std::string_view stored, RunRecord& r, std::string& why) {
  json j;
  if (!unseal(stored, RecordType::run, j, why)) return false;
  return read_fields(
      [&] {
        r.run_id = j.at("run_id").get<std::string>();
        r.unix_time = j.at("unix_time").get<int64_t>();
        r.source = j.at("source").get<std::string>();
        r.backend = j.at("backend").get<std::string>();
        r.env = j.at("env").get<std::string>();
        r.kernels = j.at("kernels").get<int>();
        r.distinct_kernels = j.at("distinct_kernels").get<int>();
        r.best_total_us = get_number(j.at("best_total_us"));
        r.assembled_us = get_number(j.at("assembled_us"));
        r.validation_gap_pct = get_number(j.at("validation_gap_pct"));
        // Older records wrote 0 for a graph that was not measured: no assembled time, no gap.
        if (!(r.assembled_us > 0)) r.validation_gap_pct = std::numeric_limits<double>::quiet_NaN();
        r.validation_note = j.value("validation_note", std::string());   // absent in older records
        r.set_aside = j.value("set_aside", std::vector<std::string>());  // absent in older records
        r.status = j.at("status").get<std::string>();
      },
      why);
}

// ---- plan ----

std::string encode_record(const PlanRecord& r) {
  json kernels = json::array();
  for (const auto& k : r.kernels)
    kernels.push_back({{"structural_key", k.structural_key},
                       {"kernel_name", k.kernel_name},
                       {"templ", k.templ},
                       {"config_key", k.config_key},
                       {"knobs", knobs_json(k.knobs)},
                       {"count", k.count},
                       {"time_us", number(k.time_us)}});
  json fields = {{"env", r.env},
                 {"graph_key", r.graph_key},
                 {"run_id", r.run_id},
                 {"unix_time", r.unix_time},
                 {"total_us", number(r.total_us)},
                 {"kernels", kernels},
                 {"grouping", r.grouping}};
  if (!r.program_graph.empty()) {
    json program_kernels = json::array();
    for (const auto& k : r.program_kernels)
      program_kernels.push_back(
          {{"nodes", k.nodes}, {"templ", k.templ}, {"knobs", knobs_json(k.knobs)}});
    fields["program"] = {{"graph", r.program_graph}, {"kernels", program_kernels}};
  }
  return seal(RecordType::plan, fields);
}

bool decode_record(std::string_view stored, PlanRecord& r, std::string& why) {
  json j;
  if (!unseal(stored, RecordType::plan, j, why)) return false;
  return read_fields(
      [&] {
        r.env = j.at("env").get<std::string>();
        r.graph_key = j.at("graph_key").get<std::string>();
        r.run_id = j.at("run_id").get<std::string>();
        r.unix_time = j.at("unix_time").get<int64_t>();
        r.total_us = get_number(j.at("total_us"));
        r.grouping = j.at("grouping").get<std::string>();
        r.kernels.clear();
        for (const auto& k : j.at("kernels")) {
          PlanKernel p;
          p.structural_key = k.at("structural_key").get<std::string>();
          p.kernel_name = k.at("kernel_name").get<std::string>();
          p.templ = k.at("templ").get<std::string>();
          p.config_key = k.at("config_key").get<std::string>();
          p.knobs = get_knobs(k.at("knobs"));
          p.count = k.at("count").get<int>();
          p.time_us = get_number(k.at("time_us"));
          r.kernels.push_back(std::move(p));
        }
        r.program_graph.clear();
        r.program_kernels.clear();
        if (j.contains("program")) {  // absent in records written before exports
          const json& program = j.at("program");
          r.program_graph = program.at("graph").get<std::string>();
          for (const auto& k : program.at("kernels")) {
            emmy::ir::Kernel kernel;
            kernel.nodes = k.at("nodes").get<std::vector<emmy::ir::ValueId>>();
            kernel.templ = k.at("templ").get<std::string>();
            kernel.knobs = get_knobs(k.at("knobs"));
            r.program_kernels.push_back(std::move(kernel));
          }
        }
      },
      why);
}

}  // namespace emmy::store
