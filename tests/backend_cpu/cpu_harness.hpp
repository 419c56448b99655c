// Test helpers for the cpu backend: a backend with a private cache directory, and a check that
// builds a graph through a template, runs it in the worker and compares every output with the
// reference interpreter.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "cpu_backend.hpp"
#include "emmy/ir.hpp"
#include "ir/interpreter.hpp"

namespace emmy::cpu::testing {

// One backend per test binary (one worker process), caching in a fresh temporary directory.
CpuBackend& shared_backend();
std::string worker_executable();
std::string fresh_cache_dir();

// A slice holding all of g's compute nodes as one kernel lowered to `templ` with `knobs`.
ir::Slice whole_graph_slice(const ir::Graph& g, const std::string& templ,
                            const std::map<std::string, double>& knobs);

// Builds `slice` on `backend` and measures it on random inputs (`seed`); "" when every output
// matches the interpreter, else what went wrong. `artifact` receives what was built.
std::string build_and_check(CpuBackend& backend, const ir::Slice& slice, Regime regime,
                            uint64_t seed, Artifact& artifact);

// Builds and measures g through `templ`; "" when the template was used (not the fallback,
// unless `templ` is "fallback") and every output matches the interpreter on random inputs,
// else what went wrong.
std::string check_against_reference(const ir::Graph& g, const std::string& templ,
                                    const std::map<std::string, double>& knobs,
                                    Regime regime = Regime::rank, uint64_t seed = 7);

}  // namespace emmy::cpu::testing
