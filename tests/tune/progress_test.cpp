// The plain line a finished kernel gets (no terminal, no -v): its best, its candidates, and how
// many of them its template refused, so a kernel whose every candidate was refused reads as that.
#include "tune/progress.hpp"

#include <gtest/gtest.h>

#include <iostream>
#include <sstream>
#include <string>

namespace emmy::tune {
namespace {

// What `Progress` writes to std::cerr while `run` runs.
template <typename Run>
std::string captured(Run&& run) {
  std::ostringstream out;
  std::streambuf* previous = std::cerr.rdbuf(out.rdbuf());
  run();
  std::cerr.rdbuf(previous);
  return out.str();
}

TEST(Progress, AFinishedKernelSaysHowManyOfItsCandidatesWereRefused) {
  const std::string text = captured([] {
    Progress p(/*verbose=*/false, /*bar=*/false);
    p.set_total(2);
    p.kernel_finished("self_attn.q_norm+k_norm", "393f962d0123", 0, 48, 48);
    p.kernel_finished("mlp.down_proj", "b9b654b90123", 12.74, 8);
  });
  EXPECT_NE(text.find("[1/2] self_attn.q_norm+k_norm [393f962d]: best - after 48 candidates (48 "
                      "refused by the template)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("[2/2] mlp.down_proj [b9b654b9]: best 12.74 us after 8 candidates\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace emmy::tune
