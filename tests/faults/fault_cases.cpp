#include "faults/fault_cases.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "process.hpp"

namespace emmy::test {
namespace fs = std::filesystem;
namespace {

std::vector<std::string> files_matching(const std::string& db, const std::string& prefix,
                                        const std::string& suffix, bool non_empty) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(db)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || !name.ends_with(suffix)) continue;
    if (non_empty && fs::file_size(e.path()) == 0) continue;
    out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void flip(const std::string& file, size_t at, size_t n) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  std::string bytes(n, '\0');
  f.seekg(static_cast<std::streamoff>(at));
  f.read(bytes.data(), static_cast<std::streamsize>(n));
  bytes.resize(static_cast<size_t>(f.gcount()));
  for (char& c : bytes) c = static_cast<char>(c ^ 0xFF);
  f.clear();
  f.seekp(static_cast<std::streamoff>(at));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot flip bytes in " + file);
}

bool stable(const std::string& name) {
  return name != "LOCK" && name.rfind("LOG", 0) != 0;
}

}  // namespace

std::vector<std::string> fixed_damage_names() {
  return {"delete_sst",        "flip_sst",      "flip_wal_middle", "flip_wal_last_record",
          "flip_manifest",     "truncate_sst",  "truncate_wal",    "truncate_wal_tail",
          "truncate_manifest", "delete_current"};
}

Damage apply_fixed_damage(const std::string& name, const std::string& db) {
  auto ssts = files_matching(db, "", ".sst", true);
  auto wals = files_matching(db, "", ".log", true);
  auto manifests = files_matching(db, "MANIFEST-", "", true);
  if (ssts.empty() || wals.empty() || manifests.empty())
    throw std::runtime_error("the base database in " + db + " lacks a table, a log or a MANIFEST");
  const std::string& sst = ssts.front();
  const std::string& wal = wals.back();
  const std::string& manifest = manifests.back();
  const size_t wal_size = fs::file_size(wal);
  if (name == "delete_sst")
    fs::remove(sst);
  else if (name == "flip_sst")
    flip(sst, 100, 8);
  else if (name == "flip_wal_middle")
    flip(wal, wal_size / 2, 8);
  else if (name == "flip_wal_last_record")
    flip(wal, wal_size - 20, 8);
  else if (name == "flip_manifest")
    flip(manifest, fs::file_size(manifest) / 2, 8);
  else if (name == "truncate_sst")
    fs::resize_file(sst, fs::file_size(sst) / 2);
  else if (name == "truncate_wal")
    fs::resize_file(wal, wal_size / 2);
  else if (name == "truncate_wal_tail")
    fs::resize_file(wal, wal_size - 10);
  else if (name == "truncate_manifest")
    fs::resize_file(manifest, fs::file_size(manifest) / 2);
  else if (name == "delete_current")
    fs::remove(db + "/CURRENT");
  else
    throw std::runtime_error("no damage named " + name);
  return {name, true};
}

Damage apply_random_damage(const std::string& db, std::mt19937& rng) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(db)) {
    const std::string name = e.path().filename().string();
    if (stable(name) && name.rfind("OPTIONS-", 0) != 0 && fs::file_size(e.path()) > 0)
      files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  const std::string& file = files[rng() % files.size()];
  const size_t size = fs::file_size(file);
  const std::string name = fs::path(file).filename().string();
  switch (rng() % 4) {
    case 0:
    case 1: {
      const size_t at = rng() % size, n = 1 + rng() % 8;
      flip(file, at, n);
      return {"flip " + std::to_string(n) + " bytes of " + name + " at " + std::to_string(at),
              true};
    }
    case 2: {
      const size_t keep = rng() % size;
      fs::resize_file(file, keep);
      return {
          "cut " + name + " to " + std::to_string(keep) + " of " + std::to_string(size) + " bytes",
          true};
    }
    default:
      fs::remove(file);
      return {"delete " + name, true};
  }
}

std::map<std::string, std::string> snapshot_files(const std::string& db) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(db)) {
    const std::string name = e.path().filename().string();
    if (stable(name)) out[name] = read_file(e.path().string());
  }
  return out;
}

void copy_folder(const std::string& from, const std::string& to) {
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
}

Rows read_rows(const std::string& db, const std::vector<std::string>& env) {
  Rows rows;
  Completed v = run(
      {EMMY_BIN, "eval", "variants", "--kernel", "matmul", "--json", "--limit", "0", "--db", db},
      env);
  rows.exit_code = v.exit_code;
  rows.err = v.err;
  if (v.exit_code != 0) return rows;
  for (const auto& group : nlohmann::json::parse(v.out))
    for (const auto& row : group["variants"])
      rows.measurements.insert(
          group["env"].get<std::string>() + "|" + group["structural_key"].get<std::string>() + "|" +
          row["regime"].get<std::string>() + "|" + row["config_key"].get<std::string>());
  Completed r = run({EMMY_BIN, "eval", "runs", "--json", "--db", db}, env);
  rows.exit_code = r.exit_code;
  rows.err = r.err;
  if (r.exit_code != 0) return rows;
  for (const auto& run_row : nlohmann::json::parse(r.out))
    rows.runs.insert(run_row["run_id"].get<std::string>());
  return rows;
}

bool contains_all(const Rows& after, const Rows& before, std::string* missing) {
  for (const auto& m : before.measurements)
    if (!after.measurements.count(m)) {
      if (missing) *missing = "measurement " + m;
      return false;
    }
  for (const auto& r : before.runs)
    if (!after.runs.count(r)) {
      if (missing) *missing = "run " + r;
      return false;
    }
  return true;
}

}  // namespace emmy::test
