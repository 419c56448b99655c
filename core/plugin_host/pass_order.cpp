#include "plugin_host/pass_order.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "emmy/status.hpp"
#include "plugin_host/plugin_host.hpp"

namespace emmy {
namespace {

// "x runs before y", and the manifest words that say so.
struct Edge {
  std::string to;
  std::string why;  // e.g. "lower_matmul's manifest: AFTER lower_attention"
};

using Graph = std::map<std::string, std::vector<Edge>>;

Graph graph_of(const std::vector<PassConstraints>& all) {
  Graph g;
  for (const PassConstraints& p : all) {
    for (const std::string& a : p.after)
      g[a].push_back({p.name, p.name + "'s manifest: AFTER " + a});
    for (const std::string& b : p.before)
      g[p.name].push_back({b, p.name + "'s manifest: BEFORE " + b});
  }
  return g;
}

// The constraints that chain `from` before `to` (breadth first, so the shortest chain), or an
// empty list when none does. `from == to` finds a cycle through `from`.
std::vector<std::string> chain(const Graph& g, const std::string& from, const std::string& to) {
  std::map<std::string, std::pair<std::string, std::string>> came;  // node -> (previous, why)
  std::vector<std::string> frontier{from};
  std::set<std::string> seen;
  while (!frontier.empty()) {
    std::vector<std::string> next;
    for (const std::string& n : frontier) {
      auto it = g.find(n);
      if (it == g.end()) continue;
      for (const Edge& e : it->second) {
        if (seen.count(e.to)) continue;
        seen.insert(e.to);
        came[e.to] = {n, e.why};
        if (e.to == to) {
          std::vector<std::string> whys;
          for (std::string at = to;;) {
            const auto& [prev, why] = came.at(at);
            whys.push_back(why);
            if (prev == from) break;
            at = prev;
          }
          std::reverse(whys.begin(), whys.end());
          return whys;
        }
        next.push_back(e.to);
      }
    }
    frontier = std::move(next);
  }
  return {};
}

std::string joined(const std::vector<std::string>& items, const char* sep) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : sep) + i;
  return s;
}

void refuse_cycles(const Graph& g, const std::vector<std::string>& in_play) {
  for (const std::string& p : in_play)
    if (auto c = chain(g, p, p); !c.empty())
      throw Error("the passes' AFTER/BEFORE constraints form a cycle through '" + p + "' (" +
                  joined(c, "; ") + "): no order keeps them all; fix the manifests");
}

}  // namespace

PassConstraints constraints_of(const PluginRecord& record) {
  return {record.name, record.after, record.before};
}

std::vector<std::string> order_passes(const std::vector<std::string>& in_play,
                                      const std::vector<PassConstraints>& all) {
  const Graph g = graph_of(all);
  refuse_cycles(g, in_play);
  // Kahn's algorithm over the passes in play, "u before v" wherever a chain of constraints says
  // so; the ready pass first in name order goes next.
  std::map<std::string, std::set<std::string>> preds;
  for (const std::string& v : in_play) {
    preds[v];
    for (const std::string& u : in_play)
      if (u != v && !chain(g, u, v).empty()) preds[v].insert(u);
  }
  std::vector<std::string> out;
  while (!preds.empty()) {
    auto ready =
        std::find_if(preds.begin(), preds.end(), [](const auto& p) { return p.second.empty(); });
    if (ready == preds.end()) throw Error("pass order: no pass is free to run (a cycle)");
    const std::string name = ready->first;
    out.push_back(name);
    preds.erase(ready);
    for (auto& [v, ps] : preds) ps.erase(name);
  }
  return out;
}

void check_pass_order(const std::vector<std::string>& list,
                      const std::vector<PassConstraints>& all) {
  std::set<std::string> seen;
  for (const std::string& p : list)
    if (!seen.insert(p).second)
      throw Error("'" + p + "' is listed twice (a pass runs once in a pipeline)");
  const Graph g = graph_of(all);
  refuse_cycles(g, list);
  for (size_t i = 0; i < list.size(); ++i)
    for (size_t j = i + 1; j < list.size(); ++j)
      if (auto c = chain(g, list[j], list[i]); !c.empty())
        throw Error("'" + list[i] + "' is listed before '" + list[j] + "', but '" + list[j] +
                    "' must run first (" + joined(c, "; ") +
                    "); swap them, or let emmy order the passes with +NAME or default,+NAME");
}

std::vector<std::string> resolve_pass_spec(const std::string& spec, const PluginHost& host) {
  std::vector<PassConstraints> all;
  std::vector<std::string> defaults;
  for (const PluginRecord* r : host.of_kind("pass")) {
    all.push_back(constraints_of(*r));
    if (r->default_pipeline) defaults.push_back(r->name);
  }
  if (defaults.empty()) {
    std::string searched;
    for (const auto& d : host.search_dirs()) searched += (searched.empty() ? "" : ", ") + d.path;
    throw Error(
        "no pass of the default pipeline was found (no pass manifest declares "
        "DEFAULT_PIPELINE; searched: " +
        (searched.empty() ? "nothing" : searched) + ")");
  }
  std::vector<std::string> items;
  {
    std::stringstream in(spec);
    for (std::string item; std::getline(in, item, ',');) {
      item.erase(0, item.find_first_not_of(" \t"));
      item.erase(item.find_last_not_of(" \t") + 1);
      if (!item.empty()) items.push_back(item);
    }
  }
  const bool explicit_list = std::any_of(items.begin(), items.end(), [](const std::string& i) {
    return i != "default" && i[0] != '+' && i[0] != '-';
  });
  // Every name must be a pass plugin that was found and accepted (the host's message says where
  // it looked and what there is).
  auto known = [&host](const std::string& name) { host.record(name, "pass"); };

  if (!explicit_list) {
    std::vector<std::string> set = defaults;
    for (const std::string& i : items) {
      if (i == "default") continue;
      const std::string name = i.substr(1);
      auto it = std::find(set.begin(), set.end(), name);
      if (i[0] == '+') {
        known(name);
        if (it != set.end()) throw Error("'" + name + "' is already in the pipeline");
        set.push_back(name);
      } else {
        if (it == set.end()) throw Error("'" + name + "' is not in the default pipeline");
        set.erase(it);
      }
    }
    return order_passes(set, all);
  }
  std::vector<std::string> list;
  for (const std::string& i : items) {
    if (i[0] == '+' || i[0] == '-')
      throw Error(
          "'" + i +
          "' edits the default pipeline, but this is an explicit list (it "
          "names passes); write the list as it should run, or only edits: default,+NAME,-NAME");
    if (i == "default") {
      const auto d = order_passes(defaults, all);
      list.insert(list.end(), d.begin(), d.end());
    } else {
      known(i);
      list.push_back(i);
    }
  }
  check_pass_order(list, all);
  return list;
}

}  // namespace emmy
