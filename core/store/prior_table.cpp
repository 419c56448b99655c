#include "store/prior_table.hpp"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace emmy::store {

std::string kernel_name_of(const KernelFeatures& f) {
  std::ostringstream os;
  os.precision(17);
  os << f.op_class << '_' << f.dtype << '[';
  for (size_t i = 0; i < f.shape.size(); ++i) os << (i ? "x" : "") << f.shape[i];
  os << "]_" << f.flops << '_' << f.bytes;
  return os.str();
}

std::vector<TableRow> read_prior_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read the prior data file " + path);
  std::vector<TableRow> rows;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      const auto j = nlohmann::json::parse(line);
      TableRow t;
      auto& f = t.row.features;
      f.op_class = j.at("op_class").get<std::string>();
      f.dtype = j.at("dtype").get<std::string>();
      f.shape = j.at("shape").get<std::vector<int64_t>>();
      f.flops = j.at("flops").get<double>();
      f.bytes = j.at("bytes").get<double>();
      const std::string regime = j.at("regime").get<std::string>();
      if (regime != "rank" && regime != "deploy")
        throw Error("regime '" + regime + "' is not rank or deploy");
      t.row.regime = regime == "deploy" ? Regime::deploy : Regime::rank;
      t.row.time_us = j.at("time_us").get<double>();
      if (!(t.row.time_us > 0) || !std::isfinite(t.row.time_us))
        throw Error("time_us " + std::to_string(t.row.time_us) + " is not a positive time");
      t.row.knobs = j.at("knobs").get<std::map<std::string, double>>();
      t.kernel = j.contains("kernel") ? j.at("kernel").get<std::string>() : kernel_name_of(f);
      rows.push_back(std::move(t));
    } catch (const std::exception& e) {
      throw Error(path + ":" + std::to_string(number) + ": not a prior row (" + e.what() + ")");
    }
  }
  return rows;
}

std::string to_json_line(const TableRow& t) {
  const auto& f = t.row.features;
  nlohmann::json j;
  j["kernel"] = t.kernel;
  j["op_class"] = f.op_class;
  j["dtype"] = f.dtype;
  j["shape"] = f.shape;
  j["flops"] = f.flops;
  j["bytes"] = f.bytes;
  j["regime"] = to_string(t.row.regime);
  j["time_us"] = t.row.time_us;
  j["knobs"] = t.row.knobs;
  return j.dump();
}

void write_prior_table(const std::string& path, const std::vector<PriorRow>& rows) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw Error("cannot write " + path);
  for (const auto& row : rows) out << to_json_line({kernel_name_of(row.features), row}) << '\n';
  if (!out.flush()) throw Error("cannot write " + path);
}

}  // namespace emmy::store
