#include "tune/tune_report.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "tune/validation.hpp"

namespace emmy::tune {

nlohmann::json TuneReport::to_json() const {
  nlohmann::json j;
  j["run_id"] = run_id;
  j["status"] = status;
  j["source"] = source;
  j["backend"] = backend;
  if (!backend_note.empty()) j["backend_note"] = backend_note;
  j["env"] = env;
  j["prior"] = prior;
  j["search"] = search;
  j["first"] = first;
  j["patience"] = patience;
  j["budget"] = budget > 0 ? nlohmann::json(budget) : nlohmann::json(nullptr);
  j["prior_replays_run"] =
      prior_replays.empty() ? nlohmann::json(nullptr) : nlohmann::json(prior_replays);
  j["devices"] = devices;
  j["kernels_total"] = kernels_total;
  j["kernels_distinct"] = kernels_distinct;
  j["groupings_tried"] = groupings_tried;
  j["candidates_built"] = candidates_built;
  j["candidates_measured"] = candidates_measured;
  j["cache_hits"] = cache_hits;
  j["launches"] = launches;
  j["deploy_measurements"] = deploy_measurements;
  j["failures"] = failures;
  j["refused"] = refused;
  j["candidates_cut"] = candidates_cut;
  j["accurate_not_alike"] = accurate_not_alike;
  j["built_ahead"] = built_ahead;
  j["built_ahead_used"] = built_ahead_used;
  j["time_s"] = {{"build", build_s},
                 {"measure", measure_s},
                 {"reference", reference_s},
                 {"prior", prior_s},
                 {"look_ahead", look_ahead_s}};
  j["best_total_us"] = best_total_us;
  j["assembled_us"] = assembled_us;
  // The graph's typical time, what a comparison with other medians (a benchmark) takes.
  j["assembled_median_us"] =
      assembled_median_us > 0 ? nlohmann::json(assembled_median_us) : nlohmann::json(nullptr);
  j["end_to_end_us"] = end_to_end_us > 0 ? nlohmann::json(end_to_end_us) : nlohmann::json(nullptr);
  j["isolated_us"] = isolated_us > 0 ? nlohmann::json(isolated_us) : nlohmann::json(nullptr);
  // null, not 0, when the assembled graph was not measured.
  j["validation_gap_pct"] =
      validated() ? nlohmann::json(validation_gap_pct) : nlohmann::json(nullptr);
  if (validation_rounds > 0) j["validation_rounds"] = validation_rounds;
  if (!validation_note.empty()) j["validation_note"] = validation_note;
  j["wall_s"] = wall_s;
  nlohmann::json ks = nlohmann::json::array();
  for (const auto& k : kernels) {
    ks.push_back({{"key", k.key},
                  {"name", k.name},
                  {"template", k.templ},
                  {"config", k.config},
                  {"occurrences", k.occurrences},
                  {"best_rank_us", k.best_rank_us},
                  {"best_deploy_us", k.best_deploy_us},
                  {"evaluations", k.evaluations},
                  {"failures", k.failures}});
  }
  j["kernels"] = ks;
  nlohmann::json aside = nlohmann::json::array();
  for (const auto& g : set_aside) aside.push_back({{"grouping", g.grouping}, {"reason", g.reason}});
  j["groupings_set_aside"] = aside;
  nlohmann::json recombined_json = nlohmann::json::array();
  for (const auto& g : recombined)
    recombined_json.push_back({{"grouping", g.grouping},
                               {"changed", g.changed},
                               {"total_us", g.total_us},
                               {"was_us", g.was_us}});
  j["groupings_recombined"] = recombined_json;
  if (recombination_check.asked) {
    const RecombinationCheck& c = recombination_check;
    auto us_or_null = [](double us) {
      return us > 0 ? nlohmann::json(us) : nlohmann::json(nullptr);
    };
    j["recombination_check"] = {
        {"adopted_end_to_end_us", us_or_null(c.adopted_us)},
        {"searched_end_to_end_us", us_or_null(c.searched_us)},
        {"deployed", c.kept == RecombinationVerdict::adopted ? "adopted" : "searched"},
        {"note", c.note}};
  } else {
    j["recombination_check"] = nullptr;
  }
  // Each kernel's search, evaluation by evaluation: times in the order measured (null: failed),
  // so a benchmark of the search can tell how many candidates it took to come near its best.
  nlohmann::json traces = nlohmann::json::array();
  auto time_or_null = [](double us) {
    return us > 0 ? nlohmann::json(us) : nlohmann::json(nullptr);
  };
  for (const auto& t : searches) {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& p : t.trajectory)
      steps.push_back({{"rank_us", time_or_null(p.rank_us)},
                       {"deploy_us", time_or_null(p.deploy_us)},
                       {"cached", p.cached},
                       {"config", p.config}});
    traces.push_back({{"key", t.key},
                      {"name", t.name},
                      {"in_best_grouping", t.in_best_grouping},
                      {"evaluations", t.trajectory.size()},
                      {"stopped", t.stopped},
                      {"trajectory", steps}});
  }
  j["searches"] = traces;
  return j;
}

std::string TuneReport::table() const {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof line, "%-14s %-10s %-10s %5s %12s %12s %7s  %s\n", "kernel", "key",
                "template", "count", "rank us", "deploy us", "share", "best configuration");
  out << line;
  for (const auto& k : kernels) {
    double t = k.best_deploy_us > 0 ? k.best_deploy_us : k.best_rank_us;
    double share = best_total_us > 0 ? 100.0 * t * k.occurrences / best_total_us : 0;
    std::snprintf(line, sizeof line, "%-14s %-10s %-10s %5d %12.2f %12.2f %6.1f%%  %s\n",
                  k.name.c_str(), k.key.substr(0, 8).c_str(), k.templ.c_str(), k.occurrences,
                  k.best_rank_us, k.best_deploy_us, share, k.config.c_str());
    out << line;
  }
  std::snprintf(line, sizeof line,
                "total %.2f us over %d kernels (%d distinct); %ld built, %ld measured, %ld cache "
                "hits, %ld launches, %ld deploy re-measurements, %ld failures\n",
                best_total_us, kernels_total, kernels_distinct, candidates_built,
                candidates_measured, cache_hits, launches, deploy_measurements, failures);
  out << line;
  if (refused > 0)
    out << refused
        << " knob combinations refused by their template (generated nothing, ran "
           "nothing; `emmy eval failures --kind refused` lists them)\n";
  if (candidates_cut > 0)
    out << candidates_cut << " candidates cut short (far slower than their kernel's best)\n";
  if (accurate_not_alike > 0)
    out << accurate_not_alike
        << " measurements rounded otherwise than the graph, beyond its per-element tolerance, "
           "and accepted: no further from exact arithmetic than the graph's own rounding\n";
  std::snprintf(line, sizeof line,
                "time: build %.1f s, measure %.1f s, reference %.1f s, prior %.1f s, look-ahead "
                "%.1f s (summed over kernels tuned side by side), wall %.1f s\n",
                build_s, measure_s, reference_s, prior_s, look_ahead_s, wall_s);
  out << line;
  if (built_ahead > 0)
    out << built_ahead << " candidates built ahead while others were measured, " << built_ahead_used
        << " of them then picked by the search\n";
  for (const auto& g : set_aside) out << "grouping " << g.grouping << " " << g.reason << "\n";
  for (const auto& g : recombined) {
    std::snprintf(line, sizeof line, "%.2f us (was %.2f)", g.total_us, g.was_us);
    out << "grouping " << g.grouping << " adopted untuned, its kernels all tuned in other "
        << "groupings: " << g.changed << " gives " << line << "\n";
  }
  if (recombination_check.asked) {
    const RecombinationCheck& c = recombination_check;
    const char* deployed = c.kept == RecombinationVerdict::adopted
                               ? "the adopted grouping deploys"
                               : "the search's own best deploys";
    if (c.adopted_us > 0 && c.searched_us > 0) {
      std::snprintf(line, sizeof line,
                    "recombination checked end to end: the adopted grouping %.2f us, the "
                    "search's own best %.2f us: ",
                    c.adopted_us, c.searched_us);
      out << line << deployed << (c.note.empty() ? "" : " (" + c.note + ")") << "\n";
    } else {
      out << "recombination not compared end to end (" << c.note << "): " << deployed << "\n";
    }
  }
  if (validated()) {
    // A row from the database (a re-run) does not say how many rounds it took.
    const std::string rounds = validation_rounds > 0
                                   ? std::to_string(validation_rounds) + " alternating rounds"
                                   : "alternating rounds, from the database";
    std::snprintf(line, sizeof line,
                  "assembled graph: %.2f us; its kernels measured again in isolation: %.2f us; "
                  "gap %+.1f%% (20th percentiles of %s)\n",
                  assembled_us, isolated_us, validation_gap_pct, rounds.c_str());
    out << line;
    if (end_to_end_us > 0) {
      std::snprintf(line, sizeof line,
                    "assembled graph end to end (one cache flush per sample, kernels back to "
                    "back): %.2f us (median)\n",
                    end_to_end_us);
      out << line;
    }
  } else {
    out << "validation gap not measured: "
        << (validation_note.empty() ? std::string("no reason recorded") : validation_note) << "\n";
  }
  return out.str();
}

}  // namespace emmy::tune
