#!/usr/bin/env bash
# Builds emmy-prior-measure and the cpu backend's worker with nothing but a C++20 compiler (no
# CMake package, Boost, RocksDB or FlatBuffers), e.g. on the GPU machine's host CPU:
#   bench/prior/build_measure_standalone.sh OUT_DIR
#   OUT_DIR/emmy-prior-measure table.jsonl --worker OUT_DIR/libexec/emmy/emmy-cpu-worker
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-$root/build-prior-measure}" && cd "${1:-$root/build-prior-measure}" && pwd)
cxx=${CXX:-g++}
mkdir -p "$out/obj" "$out/libexec/emmy"
flags=(-std=c++20 -O2 -I"$root/sdk/include" -I"$root/plugins/backends/cpu/src" -I"$root/bench/prior")
sources=("$root"/sdk/src/*.cpp "$root"/bench/prior/measure_cpu_table.cpp)
for s in "$root"/plugins/backends/cpu/src/*.cpp; do
  [[ $(basename "$s") == plugin.cpp ]] || sources+=("$s")  # the plugin entry needs emmy_add_plugin
done
export cxx out root
printf '%s\n' "${sources[@]}" | xargs -P "$(nproc)" -I{} bash -c \
  'o="$out/obj/$(echo "{}" | sed "s|$root/||; s|/|_|g").o"; '"$cxx"' '"${flags[*]}"' -c "{}" -o "$o"'
"$cxx" -o "$out/emmy-prior-measure" "$out"/obj/*.o -ldl -lpthread
"$cxx" -std=c++20 -O2 -I"$root/plugins/backends/cpu/src" -o "$out/libexec/emmy/emmy-cpu-worker" \
  "$root/plugins/backends/cpu/worker/worker_main.cpp" -ldl -lpthread
echo "built $out/emmy-prior-measure and $out/libexec/emmy/emmy-cpu-worker"
