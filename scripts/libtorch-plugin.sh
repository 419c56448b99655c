#!/usr/bin/env bash
# Builds Emmy's LibTorch plugins (the torchscript frontend, the mlp prior) with plain g++ against
# a given LibTorch, outside CMake. The GPU machine has no Debian LibTorch, so the round trip
# (scripts/gpu-roundtrip.sh remote) rebuilds these there against its PyTorch's LibTorch; the
# test `libtorch_plugin_gxx` runs the same function here against Debian's, so that the command
# line is known to compile before it reaches the GPU machine.
#
# Sourced:  . scripts/libtorch-plugin.sh; build_libtorch_plugin NAME OUT_DIR SDK_LIB_DIR \
#               TORCH_INCLUDE TORCH_LIB ABI
# Run:      bash scripts/libtorch-plugin.sh NAME OUT_DIR SDK_LIB_DIR TORCH_INCLUDE TORCH_LIB ABI
#   NAME           torchscript or mlp
#   OUT_DIR        where libemmy_NAME.so goes (beside its manifest, which CMake writes)
#   SDK_LIB_DIR    a folder with libemmy_sdk.so
#   TORCH_INCLUDE  the folder holding torch/ and ATen/ (PyTorch: torch/include; Debian: /usr/include)
#   TORCH_LIB      the folder holding libtorch.so (and its rpath)
#   ABI            _GLIBCXX_USE_CXX11_ABI of that LibTorch (0 or 1)
# Run from the repository root. Exits non-zero (and prints the compiler's errors) on failure.

# The plugin's version, as its CMakeLists.txt declares it (the manifest carries the same): the
# VERSION on the line of `emmy_add_plugin(NAME <name>` (the style of this repository), else
# emmy_add_plugin's default, 0.1.0.
libtorch_plugin_version() {
  [[ -f $1/CMakeLists.txt ]] || return 1
  local v
  v=$(grep -o "emmy_add_plugin(NAME $2 .*VERSION [0-9][0-9.]*" "$1/CMakeLists.txt" | awk '{print $NF}')
  echo "${v:-0.1.0}"
}

build_libtorch_plugin() {
  local name=$1 out=$2 sdk=$3 inc=$4 lib=$5 abi=$6 dir
  local extra_inc=() extra_src=() incs=()
  # A system folder must not be named again with -isystem: libstdc++'s #include_next breaks.
  [[ $4 == /usr/include ]] || incs=(-isystem "$4")
  case $name in
    # The ATen-to-IR pieces it shares with the pt2 frontend (a static library in CMake builds).
    torchscript) dir=plugins/frontends/torchscript
                 extra_inc=(-I plugins/frontends/common) extra_src=(plugins/frontends/common/*.cpp) ;;
    # The mlp prior's correction is on top of the roofline prior's model: the same source.
    mlp) dir=plugins/priors/mlp
         extra_inc=(-I plugins/priors/roofline) extra_src=(plugins/priors/roofline/roofline_model.cpp) ;;
    *) echo "build_libtorch_plugin: no LibTorch plugin named '$name' (torchscript, mlp)" >&2; return 2 ;;
  esac
  local version
  version=$(libtorch_plugin_version "$dir" "$name") || {
    echo "build_libtorch_plugin: no $dir/CMakeLists.txt (run from the repository root)" >&2
    return 2
  }
  mkdir -p "$out" || return 1
  # Only the entry point is exported, as emmy_add_plugin's version script does.
  local exports
  exports=$(mktemp) || return 1
  printf '{\n  global: emmy_plugin_info;\n  local: *;\n};\n' >"$exports"
  local flags=(-std=c++20 -fPIC -Wall -Wextra -Wpedantic -Wno-unused-parameter
    -fvisibility=hidden -fvisibility-inlines-hidden -D_GLIBCXX_USE_CXX11_ABI="$abi" -I sdk/include
    "${incs[@]}" -isystem "$inc/torch/csrc/api/include" "${extra_inc[@]}"
    -DEMMY_PLUGIN_NAME="\"$name\"" -DEMMY_PLUGIN_VERSION="\"$version\"")
  # The sources that include LibTorch compile at -O1 (its headers are most of the time this takes
  # on the GPU machine); the others at -O2, where GCC vectorizes: the mlp prior's forward pass and
  # encoder run thousands of times after every measurement of a tune.
  local src objs=() heavy=() objdir
  objdir=$(mktemp -d) || return 1
  for src in "$dir"/*.cpp "${extra_src[@]}"; do
    if grep -q '#include <torch/' "$src"; then
      heavy+=("$src")
      continue
    fi
    objs+=("$objdir/${#objs[@]}.o")
    g++ "${flags[@]}" -O2 -c "$src" -o "${objs[-1]}" || { rm -rf "$objdir" "$exports"; return 1; }
  done
  g++ "${flags[@]}" -O1 -shared "${heavy[@]}" "${objs[@]}" \
    -L"$sdk" -lemmy_sdk -L"$lib" -ltorch -ltorch_cpu -lc10 -Wl,-rpath,"$lib" \
    -Wl,--exclude-libs,ALL -Wl,--version-script="$exports" \
    -o "$out/libemmy_$name.so"
  local rc=$?
  rm -rf "$exports" "$objdir"
  return $rc
}

# libemmy_torch (runtime/torch, the PyTorch op over libemmy_runtime) against a given LibTorch, with
# emmy_torch.py copied beside it: what CMake's target emmy_torch builds, for the GPU machine.
#   build_emmy_torch OUT_DIR RUNTIME_LIB_DIR TORCH_INCLUDE TORCH_LIB ABI
# RUNTIME_LIB_DIR holds libemmy_runtime.so (built with the cxx11 ABI, as Debian's g++ builds: a
# LibTorch of ABI 0 cannot link it, and is refused by name).
build_emmy_torch() {
  local out=$1 runtime=$2 inc=$3 lib=$4 abi=$5 incs=()
  if [[ $abi != 1 ]]; then
    echo "build_emmy_torch: this LibTorch uses _GLIBCXX_USE_CXX11_ABI=$abi; libemmy_runtime's API (std::string) needs 1" >&2
    return 2
  fi
  [[ -f runtime/torch/emmy_torch.cpp ]] || {
    echo "build_emmy_torch: no runtime/torch/emmy_torch.cpp (run from the repository root)" >&2
    return 2
  }
  [[ $inc == /usr/include ]] || incs=(-isystem "$inc")
  mkdir -p "$out" || return 1
  # libtorch_cuda is not linked: a cuda output tensor's copy dispatches to it through PyTorch,
  # which has loaded it; the op itself calls only torch::cuda::synchronize (CUDA hooks).
  g++ -std=c++20 -O2 -fPIC -shared -Wall -Wextra -Wpedantic -Wno-unused-parameter \
    -D_GLIBCXX_USE_CXX11_ABI="$abi" -I runtime/include "${incs[@]}" \
    -isystem "$inc/torch/csrc/api/include" runtime/torch/emmy_torch.cpp \
    -L"$runtime" -lemmy_runtime -L"$lib" -ltorch -ltorch_cpu -lc10 \
    -Wl,-rpath,"$lib" -Wl,-rpath,'$ORIGIN' -o "$out/libemmy_torch.so" || return 1
  cp runtime/torch/emmy_torch.py "$out/"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -uo pipefail
  if (($# != 6)); then
    sed -n '8,16p' "$0" >&2
    exit 2
  fi
  build_libtorch_plugin "$@"
fi
