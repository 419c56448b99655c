// Tables of measured prior rows, one JSON object per line (the prior benchmark's format,
// bench/prior/prior_table.hpp; `emmy eval prior --export` writes one from a checkpoint):
//   {"kernel":"matmul_64x64x64","op_class":"matmul","dtype":"f32","shape":[64,64],
//    "flops":524288,"bytes":49152,"regime":"rank","time_us":12.5,"knobs":{"mr":6,...}}
// "kernel" names the kernel the row measures (rows of one kernel differ only in knobs and
// regime); it is what leave-kernels-out folds split on. Read by `emmy eval prior --data` and
// `emmy prior train`.
#pragma once

#include <string>
#include <vector>

#include "emmy/prior.hpp"

namespace emmy::store {

struct TableRow {
  std::string kernel;
  PriorRow row;
};

// The kernel name a row gets when its table has none: op class, dtype and shape, FLOPs, bytes.
std::string kernel_name_of(const KernelFeatures& f);

// Reads a table. Throws emmy::Error naming the file, the line and what is wrong (unreadable
// file, malformed JSON, a missing or mistyped field, an unknown regime, a time that is not a
// positive number).
std::vector<TableRow> read_prior_table(const std::string& path);

std::string to_json_line(const TableRow& row);

// Writes `rows` (kernel names from kernel_name_of), replacing `path`. Throws emmy::Error.
void write_prior_table(const std::string& path, const std::vector<PriorRow>& rows);

}  // namespace emmy::store
