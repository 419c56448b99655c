// Records and folders the store tests share.
#pragma once

#include <string>

#include "store/records.hpp"

namespace emmy::store::testing {

inline const std::string kEnv = "cpu|Test CPU 3000|g++ 12.2.0";

// A distinct, fully filled record per `i` (knobs, samples, message all depend on it).
MeasurementRecord make_record(int i, emmy::Regime regime = emmy::Regime::rank,
                              emmy::FailureKind failure = emmy::FailureKind::none);

// Whether two records hold the same values (NaN-free records only).
bool same_record(const MeasurementRecord& a, const MeasurementRecord& b);

// A fresh empty folder under the system temp folder, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace emmy::store::testing
