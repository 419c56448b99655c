// The prior a tuning run started from, kept beside the prior's checkpoint
// ($EMMY_HOME/priors/<name>.rerun), so that an identical re-run starts from it too.
//
// Why: the user's run description says both that "re-running an identical tuning run walks the same
// path, hits the cache every time, and finishes having launched nothing", and that the prior "keeps
// changing as it learns from other kernels and other runs", so that a re-run reaches new
// configurations. A learning prior also learns from the run itself; started from that, a re-run of
// the same command would never be identical. So a run's own rows are learned (the checkpoint keeps
// them for every other run), but the run that repeats it, with nothing learned elsewhere in between
// (the checkpoint is still the one it left), starts from the prior it started from and replays its
// path from the database. Once anything else was learned, a re-run starts from the checkpoint and
// descends where the new knowledge leads.
//
// One record, the last run's: losing or ignoring it never loses a measurement (the database has
// them), it only makes the next re-run start from the current checkpoint.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "emmy/prior.hpp"

namespace emmy::store {

struct RerunRecord {
  std::string identity;     // what the run was asked to do (tune::run_identity)
  std::string end_digest;   // the checkpoint the run left (checkpoint_digest), "" = none
  std::string start_state;  // the prior's state (Prior::save) the run's search started from
  std::string run_id;       // the run that first started from start_state
};

// A short text naming the checkpoint's content; equal digests mean the same state and rows.
std::string checkpoint_digest(const std::string& prior_state,
                              const std::vector<emmy::PriorRow>& reservoir);

// Atomically replaces `path` (the checkpoint file format, so it is checked the same way).
// Throws emmy::Error on an I/O failure.
void write_rerun_record(const std::string& path, const RerunRecord& record);

// The record at `path`; nullopt when there is none or it is unreadable or damaged (`warning`
// then says so: the record is only an optimisation, the run goes on from the checkpoint).
std::optional<RerunRecord> read_rerun_record(const std::string& path, std::string* warning);

}  // namespace emmy::store
