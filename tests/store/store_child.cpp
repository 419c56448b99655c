// Helper process for the store tests (tests/store/processes_test.cpp):
//   store_child write-loop DB          writes records 0,1,2,... printing "i" once i is committed
//   store_child hold DB N              writes records 0..N-1, prints "ready", waits for stdin to
//                                      close, writes record N, prints "done"
//   store_child try-writer DB          prints "opened" (exit 0) or "busy: MESSAGE" (exit 3)
//   store_child checkpoint-writer PATH N   replaces the checkpoint N times (two alternating
//                                      contents), then prints "done"
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "store/checkpoint.hpp"
#include "store/test_records.hpp"
#include "store/tuning_store.hpp"

using namespace emmy::store;
using emmy::store::testing::make_record;

namespace {

// Unbuffered: a line the parent reads is a fact about the child's committed state.
void say(const std::string& line) {
  std::string text = line + "\n";
  if (::write(1, text.data(), text.size()) < 0) std::_Exit(9);
}

// Every fifth record fails to build; every fourth is a deploy measurement.
MeasurementRecord record_for(int i) {
  auto failure = i % 5 == 4 ? emmy::FailureKind::build_error : emmy::FailureKind::none;
  auto regime = i % 4 == 3 ? emmy::Regime::deploy : emmy::Regime::rank;
  return make_record(i, regime, failure);
}

std::vector<emmy::PriorRow> rows(int n, double time) {
  std::vector<emmy::PriorRow> out;
  for (int i = 0; i < n; ++i) {
    emmy::PriorRow r;
    r.features.op_class = "matmul";
    r.features.shape = {512, 512, i};
    r.features.dtype = "f32";
    r.knobs = {{"tile_m", 16.0 * i}};
    r.time_us = time + i;
    out.push_back(r);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: store_child MODE PATH [N]\n";
    return 2;
  }
  std::string mode = argv[1], path = argv[2];
  try {
    if (mode == "write-loop") {
      auto store = TuningStore::open_writer(path);
      for (int i = 0; i < 1000000; ++i) {
        store->put_measurement(record_for(i));
        say(std::to_string(i));
      }
      return 0;
    }
    if (mode == "hold") {
      int n = argc > 3 ? std::stoi(argv[3]) : 0;
      auto store = TuningStore::open_writer(path);
      for (int i = 0; i < n; ++i) store->put_measurement(make_record(i));
      say("ready");
      char c;
      while (::read(0, &c, 1) > 0) {
      }
      store->put_measurement(make_record(n));
      say("done");
      return 0;
    }
    if (mode == "try-writer") {
      auto store = TuningStore::open_writer(path);
      say("opened");
      return 0;
    }
    if (mode == "checkpoint-writer") {
      int n = argc > 3 ? std::stoi(argv[3]) : 1;
      for (int i = 0; i < n; ++i) {
        if (i % 2 == 0)
          write_checkpoint(path, std::string("state-A\0\x01", 9), rows(10, 1.0));
        else
          write_checkpoint(path, std::string(5000, 'B'), rows(200, 2.0));
      }
      say("done");
      return 0;
    }
  } catch (const DatabaseBusy& e) {
    say(std::string("busy: ") + e.what());
    return 3;
  } catch (const std::exception& e) {
    say(std::string("error: ") + e.what());
    return 1;
  }
  std::cerr << "store_child: unknown mode '" << mode << "'\n";
  return 2;
}
