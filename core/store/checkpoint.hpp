// The prior's checkpoint file ($EMMY_HOME/priors/<name>.ckpt, docs/DESIGN.md, The prior's
// checkpoint): the prior's own state (opaque bytes from Prior::save) plus its reservoir of rows.
//
// File layout (little endian):
//   magic "EMMYCKPT" (8 bytes), format version (u32), CRC-32 of everything after the header
//   (u32), state length (u64), rows length (u64), state bytes, rows as JSON text.
// Written to a temporary file in the same folder, fsynced, renamed over the old one and the
// folder fsynced: a reader sees the old checkpoint or the new one, never a mix.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "emmy/prior.hpp"
#include "emmy/status.hpp"

namespace emmy::store {

inline constexpr uint32_t kCheckpointVersion = 1;

struct Checkpoint {
  std::string prior_state;
  std::vector<emmy::PriorRow> reservoir;
};

// A checkpoint file that exists but fails its checks; the message names the file and why.
class CheckpointCorrupt : public emmy::Error {
  using emmy::Error::Error;
};

// Atomically replaces `path` (creating its folder). Throws emmy::Error on an I/O failure.
void write_checkpoint(const std::string& path, const std::string& prior_state,
                      const std::vector<emmy::PriorRow>& reservoir);

// Reads and checks `path`. Throws CheckpointCorrupt on a damaged or unknown-version file and
// emmy::Error if it cannot be read (a missing file included).
Checkpoint read_checkpoint(const std::string& path);

// What a prior host usually wants: the checkpoint if there is a good one; nullopt if there is
// none, or if it was corrupt, in which case it is renamed aside to <path>.corrupt-<unix time>
// (never deleted) and `warning` says so.
std::optional<Checkpoint> load_checkpoint_or_set_aside(const std::string& path,
                                                       std::string* warning = nullptr);

}  // namespace emmy::store
