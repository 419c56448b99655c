#include "store/test_records.hpp"

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>

#include "store/keys.hpp"

namespace emmy::store::testing {

MeasurementRecord make_record(int i, emmy::Regime regime, emmy::FailureKind failure) {
  MeasurementRecord r;
  r.env = kEnv;
  r.structural_key = "sk" + std::to_string(i % 3) + "-matmul-512x512x512-f32";
  r.kernel_name = "matmul";
  r.templ = "matmul_tiled";
  r.knobs = {{"tile_m", 16.0 * (1 + i % 4)}, {"tile_n", 32}, {"unroll", double(i)}};
  r.config_key = config_key(r.templ, r.knobs);
  r.regime = regime;
  r.failure = failure;
  if (failure == emmy::FailureKind::none) {
    r.median_us = 100.0 + i * 0.5;
    r.samples_us = {r.median_us - 1, r.median_us, r.median_us + 2.25};
  } else {
    r.message = "error " + std::to_string(i) + ": something went wrong\nsecond line";
  }
  r.run_id = "run-" + std::to_string(i / 10);
  r.unix_time = 1700000000 + i;
  return r;
}

bool same_record(const MeasurementRecord& a, const MeasurementRecord& b) {
  return a.env == b.env && a.structural_key == b.structural_key && a.kernel_name == b.kernel_name &&
         a.templ == b.templ && a.config_key == b.config_key && a.knobs == b.knobs &&
         a.regime == b.regime && a.failure == b.failure && a.message == b.message &&
         a.median_us == b.median_us && a.samples_us == b.samples_us && a.run_id == b.run_id &&
         a.unix_time == b.unix_time;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "emmy-store-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace emmy::store::testing
