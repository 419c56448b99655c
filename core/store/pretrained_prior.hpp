// A pretrained prior shipped with Emmy: a prior's state trained on measured rows of one backend
// and architecture, installed beside the prior plugin as <plugin dir>/<prior>-pretrained-
// <backend>-<arch>.ckpt and made by `emmy prior train` (README, "The prior"). A tune whose
// $EMMY_HOME has no checkpoint of this prior starts from the shipped one that matches its
// backend and architecture; its own checkpoint then refines it run by run.
//
// File layout: text header lines, then the state's bytes:
//   EMMY-PRETRAINED-PRIOR 1
//   prior mlp
//   backend cpu
//   arch x86_64
//   rows 2016
//   seed 1
//   data <the data files it was trained on, space separated>
//   state <byte count>
//   <state bytes>
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "emmy/status.hpp"

namespace emmy::store {

struct PretrainedPrior {
  std::string prior, backend, arch;
  uint64_t rows = 0;
  uint64_t seed = 0;
  std::string data;
  std::string state;
};

// Throws emmy::Error naming the file and what is wrong (not this format, a missing field, a
// state shorter or longer than its header says).
PretrainedPrior read_pretrained_prior(const std::string& path);
void write_pretrained_prior(const std::string& path, const PretrainedPrior& p);

// The file name it is installed under: "<prior>-pretrained-<backend>-<arch>.ckpt".
std::string pretrained_file_name(const std::string& prior, const std::string& backend,
                                 const std::string& arch);

// The architecture names a run's device answers to: the host's instruction set (a cpu backend
// measures on the host), and the lower-cased words of the backend's environment fingerprint
// (the cuda backend's holds the GPU's name: "NVIDIA H200" answers to "h200").
std::vector<std::string> device_arch_names(const std::string& environment_fingerprint);

struct PretrainedChoice {
  std::optional<PretrainedPrior> chosen;
  std::string path;                // the chosen file
  std::vector<std::string> notes;  // one per file not taken, and why (for -v)
};

// Looks in `dir` for the shipped checkpoints of `prior` and takes the one made for `backend`
// on an architecture the device answers to (device_arch_names). Files for another backend or
// architecture, and unreadable ones, are not taken; `notes` says why.
PretrainedChoice find_pretrained_prior(const std::string& dir, const std::string& prior,
                                       const std::string& backend,
                                       const std::string& environment_fingerprint);

}  // namespace emmy::store
