#include "eval/eval_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <tuple>

#include "store/keys.hpp"

namespace emmy::eval {
using store::format_number;

namespace {

using nlohmann::json;

std::string dump(const json& j) {
  return j.dump(2, ' ', false, json::error_handler_t::replace);
}

json number(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

json knobs_json(const std::map<std::string, double>& knobs) {
  json j = json::object();
  for (const auto& [k, v] : knobs) j[k] = number(v);
  return j;
}

// Left-aligned columns separated by two spaces; the last column is not padded.
void print_table(std::ostream& out, const std::vector<std::vector<std::string>>& rows,
                 const std::string& indent) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  return out + "\"";
}

int kind_order(emmy::FailureKind k) {
  return static_cast<int>(k);
}

}  // namespace

// ---- shared formatting ----

std::string format_knobs(const std::map<std::string, double>& knobs) {
  std::string out;
  for (const auto& [k, v] : knobs) {
    if (!out.empty()) out.push_back(' ');
    out += k + "=" + format_number(v);
  }
  return out;
}

std::string format_us(double us) {
  if (!std::isfinite(us) || us <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, us < 10 ? "%.3f" : "%.1f", us);
  return buf;
}

std::string format_utc(int64_t unix_time) {
  std::time_t t = static_cast<std::time_t>(unix_time);
  std::tm tm{};
  if (!gmtime_r(&t, &tm)) return std::to_string(unix_time);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string terminal_safe(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  char buf[8];
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n' || c == '\t') {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      std::snprintf(buf, sizeof buf, "\\u00%02x", static_cast<unsigned char>(text[++i]));
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string first_line(const std::string& message, size_t max_chars) {
  size_t start = 0;
  while (start < message.size()) {
    size_t end = message.find('\n', start);
    if (end == std::string::npos) end = message.size();
    std::string line = message.substr(start, end - start);
    size_t a = line.find_first_not_of(" \t\r");
    if (a != std::string::npos) {
      size_t b = line.find_last_not_of(" \t\r");
      line = line.substr(a, b - a + 1);
      if (line.size() > max_chars) line = line.substr(0, max_chars) + "...";
      return line;
    }
    start = end + 1;
  }
  return "";
}

std::string summarize_description(const std::string& description, size_t max_chars) {
  std::map<std::string, std::string> type_of;  // "%3" -> "f32[16,128]"
  std::vector<std::string> inputs, ops, outputs;
  size_t start = 0;
  while (start < description.size()) {
    size_t end = description.find('\n', start);
    if (end == std::string::npos) end = description.size();
    std::string line = description.substr(start, end - start);
    start = end + 1;
    line.erase(0, line.find_first_not_of(" \t"));
    if (line.rfind("outputs(", 0) == 0) {
      size_t p = 8;
      while (p < line.size()) {
        size_t q = line.find_first_of(",)", p);
        if (q == std::string::npos) break;
        std::string id = line.substr(p, q - p);
        id.erase(0, id.find_first_not_of(' '));
        if (!id.empty()) outputs.push_back(id);
        p = q + 1;
      }
      continue;
    }
    size_t eq = line.find(" = ");
    size_t paren = line.find('(', eq == std::string::npos ? 0 : eq);
    if (line.empty() || line[0] != '%' || eq == std::string::npos || paren == std::string::npos)
      continue;
    std::string id = line.substr(0, eq);
    std::string op = line.substr(eq + 3, paren - eq - 3);
    std::string body = line.substr(0, line.find("  #"));
    size_t colon = body.rfind(" : ");
    std::string type = colon == std::string::npos ? "?" : body.substr(colon + 3);
    type_of[id] = type;
    if (op == "input")
      inputs.push_back(type);
    else if (op != "constant")
      ops.push_back(op);
  }
  if (ops.empty()) return first_line(description, max_chars);
  auto join = [](const std::vector<std::string>& parts, const char* sep) {
    std::string out;
    for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
    return out;
  };
  std::vector<std::string> out_types;
  for (const auto& id : outputs) out_types.push_back(type_of.count(id) ? type_of[id] : id);
  std::string line =
      "in " + join(inputs, ", ") + " -> " + join(ops, "+") + " -> out " + join(out_types, ", ");
  return line.size() > max_chars ? line.substr(0, max_chars) + "..." : line;
}

// ---- variants ----

bool better_variant(const MeasurementRecord& a, const MeasurementRecord& b) {
  if (a.ok() != b.ok()) return a.ok();
  if (a.ok()) {
    double ta = std::isfinite(a.median_us) ? a.median_us : INFINITY;
    double tb = std::isfinite(b.median_us) ? b.median_us : INFINITY;
    if (ta != tb) return ta < tb;
    if (a.regime != b.regime) return a.regime == emmy::Regime::deploy;
    return a.config_key < b.config_key;
  }
  if (a.failure != b.failure) return kind_order(a.failure) < kind_order(b.failure);
  if (a.config_key != b.config_key) return a.config_key < b.config_key;
  return a.regime < b.regime;
}

std::vector<VariantGroup> group_variants(std::vector<MeasurementRecord> rows,
                                         const std::vector<KernelRecord>& kernels, size_t limit) {
  std::map<std::pair<std::string, std::string>, VariantGroup> by_kernel;
  for (auto& r : rows) {
    auto& g = by_kernel[{r.env, r.structural_key}];
    if (g.rows.empty()) {
      g.env = r.env;
      g.structural_key = r.structural_key;
      g.kernel_name = r.kernel_name;
    }
    g.rows.push_back(std::move(r));
  }
  std::vector<VariantGroup> out;
  for (auto& [key, g] : by_kernel) {
    for (const auto& k : kernels)
      if (k.structural_key == g.structural_key) g.description = k.description;
    std::sort(g.rows.begin(), g.rows.end(), better_variant);
    g.total = g.rows.size();
    g.failed = static_cast<size_t>(
        std::count_if(g.rows.begin(), g.rows.end(), [](const auto& r) { return !r.ok(); }));
    g.deploy = static_cast<size_t>(std::count_if(g.rows.begin(), g.rows.end(), [](const auto& r) {
      return r.regime == emmy::Regime::deploy;
    }));
    if (limit > 0 && g.rows.size() > limit) g.rows.resize(limit);
    out.push_back(std::move(g));
  }
  auto best = [](const VariantGroup& g) {
    return !g.rows.empty() && g.rows.front().ok() ? g.rows.front().median_us : INFINITY;
  };
  std::stable_sort(out.begin(), out.end(), [&](const VariantGroup& a, const VariantGroup& b) {
    return std::make_tuple(best(a), a.kernel_name, a.structural_key, a.env) <
           std::make_tuple(best(b), b.kernel_name, b.structural_key, b.env);
  });
  return out;
}

void print_variants_text(std::ostream& out, const std::vector<VariantGroup>& groups) {
  bool first = true;
  for (const auto& g : groups) {
    if (!first) out << "\n";
    first = false;
    out << g.kernel_name << "  key " << g.structural_key << "  on " << g.env << "\n";
    if (!g.description.empty()) out << "  " << summarize_description(g.description) << "\n";
    out << "  " << g.total - g.deploy << " rank and " << g.deploy << " deploy measurements, "
        << g.failed << " failed\n";
    std::vector<std::vector<std::string>> table = {
        {"#", "regime", "time_us", "status", "template", "knobs"}};
    size_t n = 0;
    for (const auto& r : g.rows) {
      std::string status = emmy::to_string(r.failure);
      if (!r.ok() && !r.message.empty()) status += ": " + first_line(r.message, 60);
      table.push_back({std::to_string(++n), emmy::to_string(r.regime),
                       r.ok() ? format_us(r.median_us) : "-", status, r.templ,
                       format_knobs(r.knobs)});
    }
    print_table(out, table, "  ");
    if (g.rows.size() < g.total)
      out << "  (showing " << g.rows.size() << " of " << g.total << "; --limit N for more)\n";
  }
}

void print_variants_csv(std::ostream& out, const std::vector<VariantGroup>& groups) {
  out << "kernel,structural_key,env,position,regime,time_us,status,template,config_key,knobs,"
         "message\n";
  for (const auto& g : groups) {
    size_t n = 0;
    for (const auto& r : g.rows) {
      out << csv_field(g.kernel_name) << "," << csv_field(g.structural_key) << ","
          << csv_field(g.env) << "," << ++n << "," << emmy::to_string(r.regime) << ","
          << (r.ok() && std::isfinite(r.median_us) ? format_number(r.median_us) : "") << ","
          << emmy::to_string(r.failure) << "," << csv_field(r.templ) << ","
          << csv_field(r.config_key) << "," << csv_field(format_knobs(r.knobs)) << ","
          << csv_field(first_line(r.message)) << "\n";
    }
  }
}

std::string variants_json(const std::vector<VariantGroup>& groups) {
  json out = json::array();
  for (const auto& g : groups) {
    json rows = json::array();
    for (const auto& r : g.rows) {
      json samples = json::array();
      for (double s : r.samples_us) samples.push_back(number(s));
      rows.push_back({{"regime", emmy::to_string(r.regime)},
                      {"status", emmy::to_string(r.failure)},
                      {"time_us", r.ok() ? number(r.median_us) : json(nullptr)},
                      {"template", r.templ},
                      {"config_key", r.config_key},
                      {"knobs", knobs_json(r.knobs)},
                      {"message", r.message},
                      {"samples_us", samples},
                      {"run_id", r.run_id},
                      {"unix_time", r.unix_time}});
    }
    out.push_back({{"kernel", g.kernel_name},
                   {"structural_key", g.structural_key},
                   {"env", g.env},
                   {"description", g.description},
                   {"total", g.total},
                   {"failed", g.failed},
                   {"deploy", g.deploy},
                   {"variants", rows}});
  }
  return dump(out);
}

// ---- failures ----

std::map<std::string, double> common_knobs(const std::vector<const MeasurementRecord*>& rows) {
  if (rows.empty()) return {};
  std::map<std::string, double> common = rows.front()->knobs;
  for (const auto* r : rows) {
    for (auto it = common.begin(); it != common.end();) {
      auto found = r->knobs.find(it->first);
      // Compare as the key does, so that NaN == NaN and -0 == 0.
      if (found == r->knobs.end() || format_number(found->second) != format_number(it->second))
        it = common.erase(it);
      else
        ++it;
    }
  }
  return common;
}

std::vector<FailureGroup> group_failures(const std::vector<MeasurementRecord>& rows) {
  std::map<int, std::vector<const MeasurementRecord*>> by_kind;
  for (const auto& r : rows)
    if (!r.ok()) by_kind[kind_order(r.failure)].push_back(&r);
  std::vector<FailureGroup> out;
  for (const auto& [order, members] : by_kind) {
    FailureGroup g;
    g.kind = members.front()->failure;
    g.count = members.size();
    g.common_knobs = common_knobs(members);
    g.common_template = members.front()->templ;
    std::map<std::string, size_t> lines;
    for (const auto* r : members) {
      if (r->templ != g.common_template) g.common_template.clear();
      ++g.kernels[r->kernel_name];
      ++g.regimes[emmy::to_string(r->regime)];
      std::string line = first_line(r->message);
      if (!line.empty()) ++lines[line];
    }
    // The most frequent line represents the group best (ties: the first in sort order).
    size_t best = 0;
    for (const auto& [line, n] : lines)
      if (n > best) {
        best = n;
        g.sample_message = line;
      }
    out.push_back(std::move(g));
  }
  return out;
}

void print_failures_text(std::ostream& out, const std::vector<FailureGroup>& groups) {
  if (groups.empty()) {
    out << "no failing configurations\n";
    return;
  }
  bool first = true;
  for (const auto& g : groups) {
    if (!first) out << "\n";
    first = false;
    out << emmy::to_string(g.kind) << ": " << g.count << " failing configuration"
        << (g.count == 1 ? "" : "s");
    std::string kernels;
    for (const auto& [name, n] : g.kernels)
      kernels += (kernels.empty() ? "" : ", ") + name + " " + std::to_string(n);
    std::string regimes;
    for (const auto& [name, n] : g.regimes)
      regimes += (regimes.empty() ? "" : ", ") + name + " " + std::to_string(n);
    out << " (kernels: " << kernels << "; regimes: " << regimes << ")\n";
    out << "  sample:       " << (g.sample_message.empty() ? "(no message)" : g.sample_message)
        << "\n";
    std::string shared = format_knobs(g.common_knobs);
    if (!g.common_template.empty())
      shared = "template=" + g.common_template + (shared.empty() ? "" : " " + shared);
    out << "  every row has: " << (shared.empty() ? "(no knob value shared by all)" : shared)
        << "\n";
  }
}

std::string failures_json(const std::vector<FailureGroup>& groups) {
  json out = json::array();
  for (const auto& g : groups)
    out.push_back({{"kind", emmy::to_string(g.kind)},
                   {"count", g.count},
                   {"sample_message", g.sample_message},
                   {"common_template", g.common_template},
                   {"common_knobs", knobs_json(g.common_knobs)},
                   {"kernels", g.kernels},
                   {"regimes", g.regimes}});
  return dump(out);
}

// ---- runs ----

void sort_runs(std::vector<RunRecord>& runs) {
  std::sort(runs.begin(), runs.end(), [](const RunRecord& a, const RunRecord& b) {
    if (a.unix_time != b.unix_time) return a.unix_time > b.unix_time;
    return a.run_id > b.run_id;
  });
}

void print_runs_text(std::ostream& out, const std::vector<RunRecord>& runs) {
  if (runs.empty()) {
    out << "no runs recorded\n";
    return;
  }
  std::vector<std::vector<std::string>> table = {{"run", "date (UTC)", "backend", "kernels",
                                                  "best total us", "assembled us", "gap %",
                                                  "status", "source"}};
  for (const auto& r : runs) {
    char gap[32] = "-";
    if (std::isfinite(r.validation_gap_pct) && r.assembled_us > 0)
      std::snprintf(gap, sizeof gap, "%+.2f", r.validation_gap_pct);
    table.push_back(
        {r.run_id, format_utc(r.unix_time), r.backend,
         std::to_string(r.kernels) + " (" + std::to_string(r.distinct_kernels) + " distinct)",
         format_us(r.best_total_us), format_us(r.assembled_us), gap,
         r.status.empty() ? "-" : r.status, first_line(r.source, 60)});
  }
  print_table(out, table, "");
  // Groupings a run set aside as hopeless, and why: what its search did not spend time on.
  for (const auto& r : runs)
    for (const auto& g : r.set_aside) out << "run " << r.run_id << " set aside " << g << "\n";
}

std::string runs_json(const std::vector<RunRecord>& runs) {
  json out = json::array();
  for (const auto& r : runs)
    out.push_back({{"run_id", r.run_id},
                   {"unix_time", r.unix_time},
                   {"date_utc", format_utc(r.unix_time)},
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
  return dump(out);
}

}  // namespace emmy::eval
