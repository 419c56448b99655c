// What a tuning run shows while it works (the user's run description: "A live progress bar counts
// distinct kernels"; "-v prints one line per step of the search instead"). Without a terminal and
// without -v, one plain line per finished kernel.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "search/candidate.hpp"

namespace emmy::tune {

class Progress {
 public:
  // `verbose`: one line per search step. `bar`: a live bar, used only when stderr is a terminal.
  Progress(bool verbose, bool bar);

  void set_total(int distinct_kernels);
  void kernel_started(const std::string& name, const std::string& key);
  // One search step of kernel `name`; `regime_note` tells what ran ("built", "cached", ...).
  void step(const std::string& name, const search::StepInfo& info, const std::string& note);
  // `best_us` 0: none (printed "-"); `refused` of the `evaluations` were knob values the template
  // refused to generate, said so: a kernel whose every candidate is refused has not crashed.
  void kernel_finished(const std::string& name, const std::string& key, double best_us,
                       int evaluations, int refused = 0);
  // A line printed above the bar.
  void message(const std::string& line);
  void finish();

 private:
  void redraw_locked();
  void clear_bar_locked();

  std::mutex mutex_;
  bool verbose_;
  bool bar_;
  int total_ = 0;
  int done_ = 0;
  int steps_ = 0;
  std::string current_;
  double current_best_ = 0;
  bool bar_shown_ = false;
};

// "tile_m=64 tile_n=128" (knob values in their shortest exact form).
std::string format_knobs(const std::map<std::string, double>& knobs);

}  // namespace emmy::tune
