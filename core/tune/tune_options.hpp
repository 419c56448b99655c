// What one `emmy tune` invocation was asked to do, after the command line, the environment and
// the config file were layered (core/cli/cmd_tune.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace emmy::tune {

struct TuneOptions {
  std::string source;                                   // model id or file (may be empty with code)
  std::string code;                                     // --code EXPR
  std::string frontend;                                 // "" = the first frontend that accepts
  std::map<std::string, std::string> frontend_options;  // layer, batch, seq, dtype, config, ...
  std::string backend;                                  // "" = cuda when usable, else cpu
  std::string backend_reason;  // why `backend` was asked for, if not by --backend
  std::map<std::string, std::string> backend_options;
  std::string prior;   // "" = mlp if installed, else roofline (pick_prior)
  std::string passes;  // --passes as typed; "" = the default pipeline (plugin_host/pass_order.hpp)
  // Options of passes, priors and backends by plugin name: the config file's [plugin NAME]
  // sections, overridden by --pass-option and --prior-option. A backend's --backend-option
  // (backend_options) wins over its section. Checked against the manifests when the run starts.
  std::map<std::string, std::map<std::string, std::string>> plugin_options;
  int patience = 50;
  // How each kernel's inner search picks candidates (--search): "mcts-ranked" (the tree, a branch
  // valued by the best configuration left untried below it, every estimate calibrated by the
  // prior's error over all the search's measurements: search::SearchOptions::remaining_estimate
  // and global_calibration; the default since 2026-12-06, docs/PERFORMANCE.md), "mcts" (the tree,
  // a tried branch valued by what was measured below it), "mcts-remaining" (as mcts-ranked, each
  // branch calibrated by its own measurements) or "random" (uniformly among the untried,
  // bench/search's baseline).
  std::string search = "mcts-ranked";
  // What each kernel's search evaluates first (--first): "prior-then-defaults" (the default since
  // 2026-12-06), the configuration the prior predicts fastest and then the backend's untuned one
  // (option 0 at every fork), so a good favourite is measured at once (the products' cuBLASLt
  // algorithm, where the untuned generated tile is 1.2-1.9 x slower) and the defaults still
  // second, where they are the best; "defaults", the untuned configuration first; or "prior", the
  // favourite alone first (search::FirstCandidate). Without a prior (flat) the defaults come
  // first; random search takes none.
  std::string first = "prior-then-defaults";
  // --budget N: each kernel's inner search evaluates exactly N candidates (fewer only when its
  // space has fewer), patience unused; 0 = patience decides. Groupings are searched as always.
  int budget = 0;
  uint64_t seed = 0;
  int samples = 15;  // timed repetitions per measurement
  int warmup = 3;
  double timeout_s = 20;  // per measurement
  // --hopeless F: a grouping whose kernels' time (those known, the first measurements of the
  // others) is beyond F times the best total is set aside, and a candidate running beyond F
  // times the best known time of its kernel is cut short (a timeout row with that limit). 0: never.
  double hopeless_factor = 10;
  // --build-ahead N: each kernel's search builds the N candidates it would evaluate next while
  // one is measured (tune/build_ahead.hpp; never changes what is evaluated). -1: the backend's
  // default (resolve_build_ahead).
  int build_ahead = -1;
  bool validate = true;                   // benchmark the assembled graph once at the end
  std::string db;                         // tuning database path
  std::string home;                       // EMMY_HOME (priors' checkpoints live here)
  std::vector<std::string> plugin_paths;  // discovery path, complete
  bool verbose = false;                   // one line per search step
  bool progress_bar = true;               // a live bar (only when stderr is a terminal)
  std::string json_path;                  // --json FILE
};

}  // namespace emmy::tune

#include "emmy/status.hpp"

namespace emmy::tune {
// The user's input is at fault (unknown plugin, unreadable model, unsupported op): exit code 2.
class BadInput : public emmy::Error {
  using emmy::Error::Error;
};
}  // namespace emmy::tune
