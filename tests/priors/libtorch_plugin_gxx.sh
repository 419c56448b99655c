#!/usr/bin/env bash
# The GPU machine builds the LibTorch plugins with scripts/libtorch-plugin.sh (plain g++, no
# CMake); this runs the same function here against the LibTorch CMake found, so that a change
# that breaks that command line fails here, not on the GPU machine. Each plugin must link with
# no undefined symbol and export only its entry point.
#   libtorch_plugin_gxx.sh SOURCE_DIR OUT_DIR SDK_LIB_DIR TORCH_INCLUDE TORCH_LIB ABI NAME...
set -uo pipefail
src=$1 out=$2 sdk=$3 inc=$4 lib=$5 abi=$6
shift 6
cd "$src" || exit 1
# shellcheck source=../../scripts/libtorch-plugin.sh
. scripts/libtorch-plugin.sh
rm -rf "$out"
status=0
for name in "$@"; do
  if ! build_libtorch_plugin "$name" "$out" "$sdk" "$inc" "$lib" "$abi"; then
    echo "FAIL: build_libtorch_plugin $name did not build"
    status=1
    continue
  fi
  so=$out/libemmy_$name.so
  undefined=$(LD_LIBRARY_PATH=$sdk ldd -r "$so" 2>&1 | grep "undefined symbol")
  if [[ -n $undefined ]]; then
    echo "FAIL: $so has undefined symbols:"
    echo "$undefined" | head -5
    status=1
  fi
  exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sort -u | tr '\n' ' ')
  if [[ $exported != "emmy_plugin_info " ]]; then
    echo "FAIL: $so exports '$exported', expected only emmy_plugin_info"
    status=1
  fi
  [[ $status == 0 ]] && echo "ok: $name built with g++ against $lib"
done
exit $status
