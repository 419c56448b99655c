#!/usr/bin/env bash
# The GPU machine builds libemmy_torch with scripts/libtorch-plugin.sh's build_emmy_torch (plain
# g++ against its PyTorch's LibTorch, no CMake); this runs the same function here against the
# LibTorch CMake found, so that a change that breaks that command line fails here. The library
# must link with no undefined symbol and register torch.classes.emmy.Model when Python loads it.
#   emmy_torch_gxx.sh SOURCE_DIR OUT_DIR RUNTIME_LIB_DIR TORCH_INCLUDE TORCH_LIB ABI PYTHON
set -uo pipefail
src=$1 out=$2 runtime=$3 inc=$4 lib=$5 abi=$6 py=$7
cd "$src" || exit 1
# shellcheck source=../../scripts/libtorch-plugin.sh
. scripts/libtorch-plugin.sh
rm -rf "$out"
build_emmy_torch "$out" "$runtime" "$inc" "$lib" "$abi" || { echo "FAIL: build_emmy_torch"; exit 1; }
[[ -f $out/emmy_torch.py ]] || { echo "FAIL: emmy_torch.py not copied beside the library"; exit 1; }
undefined=$(LD_LIBRARY_PATH=$runtime ldd -r "$out/libemmy_torch.so" 2>&1 | grep "undefined symbol")
if [[ -n $undefined ]]; then
  echo "FAIL: libemmy_torch.so has undefined symbols:"
  echo "$undefined" | head -5
  exit 1
fi
# Found beside emmy_torch.py with no EMMY_TORCH_LIBRARY; the class is registered.
LD_LIBRARY_PATH=$runtime PYTHONPATH=$out env -u EMMY_TORCH_LIBRARY "$py" -c '
import torch, emmy_torch
emmy_torch.load_library()
assert hasattr(torch.classes.emmy, "Model"), "torch.classes.emmy.Model not registered"
print("ok: libemmy_torch built with g++ and loaded from", emmy_torch._loaded)
' || { echo "FAIL: python could not load the g++ build"; exit 1; }
