// Runs independent jobs on a fixed number of slots (the devices a backend measures on): each slot
// takes one job at a time, the next free slot takes the next job in order.
#pragma once

#include <cstddef>
#include <functional>

namespace emmy::tune {

// Calls job(i) for every i in [0, count), at most `slots` at once (inline when slots or count is
// 1). When a job throws, no further job starts; the ones running finish, and the first exception
// is rethrown here.
void run_on_slots(size_t count, int slots, const std::function<void(size_t)>& job);

}  // namespace emmy::tune
