// Damage done to a copy of a tuning database, and what is read back from one through the real
// `emmy` binary (tests/faults).
#pragma once

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace emmy::test {

// One way to damage a database folder: what it did (for messages) and whether it did anything.
struct Damage {
  std::string what;
  bool done = false;
};

// The fixed cases every CI run checks (an .sst deleted, bytes flipped in an .sst, in the log, in
// the MANIFEST, files cut short, CURRENT gone).
std::vector<std::string> fixed_damage_names();
Damage apply_fixed_damage(const std::string& name, const std::string& db);
// A random one: a random file of the database (never LOG, LOCK or OPTIONS), flipped, cut or
// deleted at random.
Damage apply_random_damage(const std::string& db, std::mt19937& rng);

// File name -> contents of every file in `db` that a command may not change (all but the info
// logs and LOCK): equal before and after means the files were left as they are.
std::map<std::string, std::string> snapshot_files(const std::string& db);
void copy_folder(const std::string& from, const std::string& to);

// The rows `emmy eval` reads: the measurements of every kernel named matmul (identified by
// environment, structural key, regime and configuration) and the run ids.
struct Rows {
  int exit_code = -1;
  std::string err;
  std::set<std::string> measurements;
  std::set<std::string> runs;
};
Rows read_rows(const std::string& db, const std::vector<std::string>& env);
// Whether every row of `before` is in `after`; `missing` names the first that is not.
bool contains_all(const Rows& after, const Rows& before, std::string* missing);

}  // namespace emmy::test
