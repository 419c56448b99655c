#include "search/step_line.hpp"

#include <cstdio>

namespace emmy::search {
namespace {

std::string microseconds(double us) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f us", us);
  return buf;
}

}  // namespace

std::string format_step(const StepInfo& s) {
  std::string line = "step " + std::to_string(s.step) + " ";
  for (const std::string& label : s.candidate.labels) line += " " + label;
  if (s.candidate.labels.empty()) line += " (no forks)";
  line += "  ";
  if (s.evaluation.ok)
    line += microseconds(s.evaluation.time_us) +
            (s.evaluation.message.empty() ? std::string() : " (" + s.evaluation.message + ")");
  else
    line += "FAILED" +
            (s.evaluation.message.empty() ? std::string() : " (" + s.evaluation.message + ")");
  if (s.replayed)
    line += " (replayed)";
  else if (s.evaluation.cached)
    line += " (cached)";
  if (s.new_best)
    line += "  new best";
  else if (s.best_us > 0)
    line += "  best " + microseconds(s.best_us);
  line += "  " + std::to_string(s.since_best) + " since best";
  return line;
}

}  // namespace emmy::search
