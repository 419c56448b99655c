// The tuning run (docs/DESIGN.md, Data flow of emmy tune; "Inside a Tuning Run"):
//  1. plugins chosen by the options (frontend, passes in order, backend, prior);
//  2. the frontend turns the source into a graph;
//  3. the outer search over structural forks; its endpoint is a grouping, scored by the sum of
//     the best times of its kernels;
//  4. the inner search per distinct structural key on the kernel's slice, every candidate looked
//     up in the database before anything is built; built at `rank`, measured, checked against
//     the reference interpreter, stored; within 15 % of the best so far re-built at `deploy` and
//     measured again (search-tree table and the prior's reservoir, never the measurements table);
//  5. the assembled graph benchmarked once and compared with the sum of its kernels;
//  6. the run's rows into the prior's checkpoint; the best plan and the run into the database.
#pragma once

#include "plugin_host/plugin_host.hpp"
#include "tune/progress.hpp"
#include "tune/tune_options.hpp"
#include "tune/tune_report.hpp"

namespace emmy::tune {

// Runs the whole thing. Throws store::DatabaseBusy when another tune holds the database,
// Interrupted after writing what it has when Ctrl-C was pressed (the report is then in
// `report`), and emmy::Error for bad input (unknown plugin, frontend error) or a failed run.
void run_tuning(const TuneOptions& options, PluginHost& host, Progress& progress,
                TuneReport& report);

// A fingerprint of the whole graph (the plans table's key, with the environment): the
// structural key of one kernel holding every compute node. `emmy export` finds a plan by it.
std::string graph_key(const ir::Graph& g);

// The frontend to use for a request: `options.frontend` if set, else the first accepting one.
std::string pick_frontend(const TuneOptions& options, PluginHost& host);

// The options a run gives plugin `plugin` (TuneOptions::plugin_options; {} when none).
PluginOptions plugin_options_of(const TuneOptions& options, const std::string& plugin);
// Throws BadInput when an entry of TuneOptions::plugin_options names no plugin found, a frontend,
// or a key the plugin's manifest does not declare (the message names the valid ones). Entries
// for plugins this run does not use are checked too: a misspelling is never ignored.
void check_plugin_options(const TuneOptions& options, const PluginHost& host);

// The built-in name `--prior flat`: no prior (every untried configuration valued alike, nothing
// learned or saved), the baseline a benchmark of the search compares the priors with.
inline constexpr const char* kFlatPrior = "flat";

// The prior to use: `options.prior` (kFlatPrior included), else mlp (it learns from every run, and
// predicts exactly what roofline does until it has rows) when its plugin is available, else
// roofline. When it falls back to roofline, *why (if given) receives a one-line warning saying so.
std::string pick_prior(const TuneOptions& options, const PluginHost& host,
                       std::string* why = nullptr);

}  // namespace emmy::tune
