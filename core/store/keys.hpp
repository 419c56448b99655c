// Key layouts of the tuning database. Parts are joined by the unit separator 0x1F, which no
// part may contain (checked on write), so a prefix of parts is a prefix of keys.
//
//   measurements  <env> 1F <structural_key> 1F <config_key>             rank measurements
//   search_tree   <env> 1F deploy 1F <structural_key> 1F <config_key>   deploy measurements
//                 <env> 1F node 1F <tree> 1F <path>                      search-tree nodes
//   kernels       desc 1F <structural_key>                               KernelRecord
//                 name 1F <kernel_name> 1F <env> 1F <structural_key>     index (empty value)
//                 skey 1F <structural_key> 1F <env>                      index (empty value)
//   runs          <run_id>
//   plans         <env> 1F <graph_key>
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace emmy::store {

inline constexpr char kKeySeparator = '\x1f';

// The canonical text of a configuration: "templ|name=value;name=value" with knobs in name
// order and values in their shortest exact decimal form ("64", "0.5"). Equal configurations
// give equal keys whatever order the knobs were decided in.
std::string config_key(const std::string& templ, const std::map<std::string, double>& knobs);

// Shortest decimal text that reads back as exactly `v` ("64", "0.25", "1e-07").
std::string format_number(double v);

std::string measurement_key(std::string_view env, std::string_view structural_key,
                            std::string_view config);
std::string deploy_key(std::string_view env, std::string_view structural_key,
                       std::string_view config);
std::string kernel_desc_key(std::string_view structural_key);
std::string name_index_key(std::string_view kernel_name, std::string_view env,
                           std::string_view structural_key);
std::string skey_index_key(std::string_view structural_key, std::string_view env);
std::string plan_key(std::string_view env, std::string_view graph_key);

// Joins parts with the separator, adding a trailing one (a prefix for a scan).
std::string key_prefix(const std::vector<std::string_view>& parts);
// Splits a key at the separator.
std::vector<std::string> split_key(std::string_view key);

// Throws emmy::Error naming `what` if `part` is empty or holds the separator.
void check_key_part(const char* what, std::string_view part);

// The key with non-printing bytes written as \xHH (the separator shows as \x1f), for messages.
std::string printable_key(std::string_view key);

}  // namespace emmy::store
