#include "tune/progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>

#include "store/keys.hpp"

namespace emmy::tune {

Progress::Progress(bool verbose, bool bar)
    : verbose_(verbose), bar_(bar && !verbose && isatty(STDERR_FILENO)) {}

std::string format_knobs(const std::map<std::string, double>& knobs) {
  std::string out;
  for (const auto& [name, value] : knobs) {
    if (!out.empty()) out += ' ';
    out += name + "=" + store::format_number(value);
  }
  return out.empty() ? "(defaults)" : out;
}

// The structural forks an inner search answered (the attention fusion inside a slice that carries
// its producer, "fuse_attention@<situation>"): which option, by label, since such a fork sets no
// knob of the kernel that is built ("fuse_attention=fused ").
static std::string structural_choices(const search::Candidate& c) {
  std::string out;
  for (size_t i = 0; i < c.forks.size() && i < c.labels.size(); ++i) {
    const auto at = c.forks[i].find('@');
    if (at != std::string::npos) out += c.forks[i].substr(0, at) + "=" + c.labels[i] + " ";
  }
  return out;
}

static std::string format_us(double us) {
  char buf[64];
  if (us <= 0) return "-";
  if (us >= 1e4)
    std::snprintf(buf, sizeof buf, "%.1f ms", us / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.2f us", us);
  return buf;
}

void Progress::set_total(int distinct_kernels) {
  std::lock_guard<std::mutex> lock(mutex_);
  total_ = distinct_kernels;
  redraw_locked();
}

void Progress::kernel_started(const std::string& name, const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  current_ = name;
  current_best_ = 0;
  steps_ = 0;
  if (done_ >= total_) total_ = done_ + 1;  // a grouping brought a kernel the estimate missed
  if (verbose_) std::cerr << "kernel " << name << " [" << key.substr(0, 8) << "]\n";
  redraw_locked();
}

void Progress::step(const std::string& name, const search::StepInfo& info,
                    const std::string& note) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++steps_;
  current_best_ = info.best_us;
  if (verbose_) {
    std::ostringstream line;
    line << "  " << name << " step " << info.step << "  " << structural_choices(info.candidate)
         << format_knobs(info.candidate.knobs) << "  ";
    if (info.evaluation.ok)
      line << format_us(info.evaluation.time_us)
           << (info.evaluation.message.empty() ? "" : " (" + info.evaluation.message + ")");
    else
      line << "FAILED (" << info.evaluation.message.substr(0, info.evaluation.message.find('\n'))
           << ")";
    line << "  [" << note << "]  best " << format_us(info.best_us)
         << (info.new_best ? "  *new best*" : "");
    std::cerr << line.str() << "\n";
  }
  redraw_locked();
}

void Progress::kernel_finished(const std::string& name, const std::string& key, double best_us,
                               int evaluations, int refused) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++done_;
  clear_bar_locked();
  if (!bar_ || verbose_) {
    std::cerr << "[" << done_ << "/" << std::max(total_, done_) << "] " << name << " ["
              << key.substr(0, 8) << "]: best " << format_us(best_us) << " after " << evaluations
              << " candidates";
    if (refused > 0) std::cerr << " (" << refused << " refused by the template)";
    std::cerr << "\n";
  }
  redraw_locked();
}

void Progress::message(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  clear_bar_locked();
  std::cerr << line << "\n";
  redraw_locked();
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  clear_bar_locked();
  bar_ = false;
}

void Progress::clear_bar_locked() {
  if (bar_shown_) {
    std::cerr << "\r\033[K";
    bar_shown_ = false;
  }
}

void Progress::redraw_locked() {
  if (!bar_) return;
  const int width = 30;
  int total = std::max(total_, 1);
  int filled = std::min(width, done_ * width / total);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(width, '.');
  std::ostringstream line;
  line << "\r\033[K[" << bar << "] " << done_ << "/" << total_ << " distinct kernels";
  if (!current_.empty() && done_ < total_)
    line << "  " << current_ << " step " << steps_ << " best " << format_us(current_best_);
  std::cerr << line.str() << std::flush;
  bar_shown_ = true;
}

}  // namespace emmy::tune
