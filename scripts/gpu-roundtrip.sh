#!/usr/bin/env bash
# The GPU round trip, in two halves (docs/DESIGN.md, The GPU machine).
#
# Here (Debian, no GPU):
#   scripts/gpu-roundtrip.sh [bundle] [BUILD_DIR [OVERLAY_BUILD_DIR...]]
# bundles BUILD_DIR (default build/; configured and built when it has no bin/emmy) into .carry/
# (ignored by git): bin/emmy, lib/libemmy_sdk*, lib/libemmy_runtime*, lib/emmy/plugins/*, libexec/emmy/*, the GPU test
# binaries (ctest label "gpu"), flatc, and the shared libraries they need that Ubuntu 24.04 does
# not have (Boost, RocksDB, gflags, snappy, FlatBuffers, ...). Binaries are stripped to stay under
# the device tool's 64 MiB. Each OVERLAY_BUILD_DIR adds its plugins, workers and GPU tests on top
# (e.g. a build of only the cuda backend). Prints the device tool call to make.
#
# There (Ubuntu 24.04, H200), from the repository root, with carry [".carry"]:
#   scripts/gpu-roundtrip.sh remote
# builds the LibTorch plugins (torchscript frontend, mlp prior) against the machine's LibTorch
# (the carried ones link Debian's LibTorch 1.13; scripts/libtorch-plugin.sh), runs the GPU tests
# (EMMY_GPU_TESTS: a gtest filter, "none" skips them), then the two commands of the user's run
# description exactly as written (`emmy tune --code "...device='cuda'..." --patience 10 -v` and
# `emmy tune Qwen/Qwen3-Embedding-0.6B --layer 0`, no --backend), each with its re-run, printing
# the backend and prior they used, compares the structural keys of a traced transformers Qwen3
# layer with the hf frontend's (keys.log: "keys identical: True"), `emmy eval variants --kernel matmul` and `emmy eval failures`,
# writing every log and JSON report under $OUT (the device tool's output folder).
#   scripts/gpu-roundtrip.sh remote-tests [GTEST_FILTER]
# runs only the carried GPU tests (optionally filtered), for a quick check of a backend change.
#   scripts/gpu-roundtrip.sh remote-export
# issue 22 on cuda: the runtime's GPU tests (CudaExportGpu*), then `emmy tune` (patience 2) +
# `emmy export` + `emmy run` on the cuda backend of a bf16 256^3 product with the generated
# matmul only (cublaslt=0) and with cuBLASLt offered, the Qwen3 layer 0 at seq 64, and the run
# description's --code 512^3 product; export-*.log under $OUT, export-summary.log with one
# PASS/FAIL line each. EMMY_EXPORT_CASES (bf16-generated bf16-cublaslt qwen-layer0 code-512)
# picks some, EMMY_GPU_TESTS=none skips the tests.
#   scripts/gpu-roundtrip.sh remote-pt2 [SEQ]
# runs only the pt2 frontend's key check (pt2-keys.log: "keys identical (sdpa|eager): True"),
# which `remote` runs too.
#   scripts/gpu-roundtrip.sh remote-sh COMMAND...
# runs COMMAND with the carried build's environment (LD_LIBRARY_PATH, EMMY_CUDA_WORKER, CARRY),
# e.g. a one-off profile of a GPU test under ncu.
#   scripts/gpu-roundtrip.sh remote-interrupt
# a whole-model cuda tune given SIGINT once its validation starts: the exit status (130), the
# seconds it took to stop, and `emmy export`'s answer (no plan stored); interrupt.md under $OUT.
#   scripts/gpu-roundtrip.sh remote-same-choices record|check
# scripts/same-choices.sh there (the run description's commands choose the same configurations
# over the same database before and after a change), then the GPU tests.
#   scripts/gpu-roundtrip.sh remote-prior-data
# tunes a suite of bf16 cuda kernels (Qwen3-0.6B's products at M = 512, 2048 and B=8 S=512, its
# norms, SiLU-multiply, softmax, causal attention) as --code expressions from one empty home,
# stopping before EMMY_PRIOR_DATA_BUDGET seconds (default 500, the whole call), each kernel then
# sampled EMMY_PRIOR_DATA_RANDOM times at random (default 0; EMMY_PRIOR_DATA_FROM=N starts at the
# suite's N-th expression, EMMY_PRIOR_DATA_MATCH=REGEX keeps those it matches), and exports
# every measured row to $OUT/cuda_<arch>.jsonl (`emmy eval prior --export`; <arch>: the GPU's model word, h100 or
# h200, EMMY_PRIOR_DATA_ARCH to override), the table `emmy prior train` makes the shipped cuda
# prior of that architecture from (bench/prior/README.md).
#   scripts/gpu-roundtrip.sh remote-bench
# runs the issue-12 benchmark (bench/qwen_layer/run.sh: Emmy's tuned Qwen3 layer vs PyTorch eager,
# cuBLAS and torch.compile); its EMMY_BENCH_* variables are documented there.
#   scripts/gpu-roundtrip.sh remote-model-bench
# runs the whole-model benchmark of issue 22 (bench/model/run.sh: Qwen3-Embedding-0.6B's 28
# layers tuned and exported on cuda, loaded through the PyTorch op, checked against transformers
# and timed against eager and torch.compile); its EMMY_MODEL_* variables are documented there.
#   scripts/gpu-roundtrip.sh remote-search-bench [ARGS...]
# runs the search benchmark (issue 24, bench/search/search_bench.py) on its cuda suite (the Qwen3
# layer's distinct kernels at B=1 and B=8, S=512): per kernel the default search at patience 10
# and 50, a flat prior and random search at p50's budget and a 10x reference, each tune from an
# empty home; search_bench.{md,json,log} under $OUT. A subset fits one call:
# EMMY_SEARCH_KERNELS=qkv_b1s512,sdpa_b1s512 (names: search_bench.py's SUITES), EMMY_SEARCH_MODES,
# EMMY_SEARCH_REF_FACTOR, EMMY_SEARCH_BASELINE_RUNS (flat and random K times, seeds apart: the
# mean evaluations a baseline needs, not one draw); EMMY_SEARCH_DEADLINE (default: 480 s from the start, plugin builds
# included) starts no tune after it; ARGS go to search_bench.py. The whole suite with flat beside p50
# takes two calls; `search_bench.py --recompute A.json B.json` makes their reports one benchmark.
# EMMY_SEARCH_EXPORT_ROWS=1 also writes each run's measured rows as prior tables under $OUT/rows
# (search_bench.py --export-rows; rows to train the shipped prior on, bench/prior/README.md).
# Every remote-* command ends by fitting $OUT to what the device tool brings back (8 files): where
# there are more, all of them are in $OUT/outputs.tar.gz, the top-level *.md tables beside it.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# EMMY_CARRY names another bundle folder (e.g. .carry-attn), so that several people can bundle
# at once; it must match .gitignore's /.carry*/ and the device tool's carry argument.
CARRY=$ROOT/${EMMY_CARRY:-.carry}
CODE="torch.matmul(torch.randn(512,512,device='cuda'), torch.randn(512,512,device='cuda'))"
ATTN_CODE="torch.nn.functional.scaled_dot_product_attention(torch.randn(1,16,2048,128,dtype=torch.bfloat16,device='cuda'), torch.randn(1,16,2048,128,dtype=torch.bfloat16,device='cuda'), torch.randn(1,16,2048,128,dtype=torch.bfloat16,device='cuda'), is_causal=True)"

# Libraries of these packages are not on the GPU machine (Ubuntu 24.04 base + CUDA); everything
# else ldd finds (libc, libstdc++, zlib, zstd, lz4, bz2, ...) is.
# The plugins that link LibTorch: built there by build_libtorch_plugin, not carried.
LIBTORCH_PLUGINS=${LIBTORCH_PLUGINS:-torchscript mlp}
# shellcheck source=scripts/libtorch-plugin.sh
. "$ROOT/scripts/libtorch-plugin.sh"

CARRY_LIBS='librocksdb|libgflags|libsnappy|libboost_|libflatbuffers|libglog|libunwind|libjemalloc|libtbb|libfmt|liburing'

bundle() {
  local build=${1:-build}
  shift || true
  if [[ ! -x $build/bin/emmy ]]; then
    echo "== configuring and building $build"
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo || exit 1
    cmake --build "$build" -j2 || exit 1
  fi
  rm -rf "$CARRY"
  mkdir -p "$CARRY"/{bin,lib/emmy/plugins,libexec/emmy,tests,deps}
  cp "$build/bin/emmy" "$CARRY/bin/"
  # emmy links the SDK and libemmy_runtime (emmy run); both travel with it.
  cp -P "$build"/lib/libemmy_sdk.so* "$build"/lib/libemmy_runtime.so* "$CARRY/lib/"
  for dir in "$build" "$@"; do
    cp "$dir"/lib/emmy/plugins/* "$CARRY/lib/emmy/plugins/" 2>/dev/null
    # Libraries beside the plugins (libemmy_cublaslt_step.so: the step library exports copy).
    cp "$dir"/lib/emmy/*.so "$CARRY/lib/emmy/" 2>/dev/null
    cp "$dir"/libexec/emmy/* "$CARRY/libexec/emmy/" 2>/dev/null
    # GPU tests: the binaries behind ctest's "gpu" label.
    if [[ -f $dir/CTestTestfile.cmake ]]; then
      (cd "$dir" && ctest -N -L gpu --show-only=json-v1 2>/dev/null) |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print("\n".join(sorted({t["command"][0] for t in d.get("tests",[]) if t.get("command")})))' |
        while read -r t; do [[ -x $t ]] && cp "$t" "$CARRY/tests/"; done
    fi
  done
  # The LibTorch plugins' manifests, for the plugins rebuilt there (any build that made one will do).
  for n in $LIBTORCH_PLUGINS; do
    if [[ ! -f $CARRY/lib/emmy/plugins/$n.emmy-manifest ]]; then
      m=$(ls build*/lib/emmy/plugins/$n.emmy-manifest 2>/dev/null | head -1)
      [[ -n $m ]] && cp "$m" "$CARRY/lib/emmy/plugins/"
    fi
    [[ -f $CARRY/lib/emmy/plugins/$n.emmy-manifest ]] ||
      echo "== warning: no $n.emmy-manifest in any build*/: the GPU machine will not have $n"
    # They link Debian's LibTorch: not carried (rebuilt there, build_libtorch_plugin).
    rm -f "$CARRY/lib/emmy/plugins/libemmy_$n.so"
  done
  # A manifest whose library is not carried is stale; the library is the one the manifest names
  # (several plugins may share one: lower_matmul's is libemmy_lower.so), not libemmy_<name>.so.
  for m in "$CARRY"/lib/emmy/plugins/*.emmy-manifest; do
    n=$(basename "$m" .emmy-manifest)
    lib=$(grep -ao 'libemmy_[A-Za-z0-9_]*\.so' "$m" | head -1)
    [[ " $LIBTORCH_PLUGINS " == *" $n "* || (-n $lib && -f $CARRY/lib/emmy/plugins/$lib) ]] ||
      { echo "== dropping $n: its library ${lib:-?} is not in the bundle"; rm -f "$m"; }
  done
  cp "$(command -v flatc)" "$CARRY/bin/" 2>/dev/null
  # The hf frontend's shipped model configs, where the plugin looks for them.
  mkdir -p "$CARRY/share/emmy" && cp -r plugins/frontends/hf/configs "$CARRY/share/emmy/hf-configs"
  # Non-system shared libraries, resolved through symlinks, kept under their SONAME.
  find "$CARRY" -type f \( -perm -u+x -o -name '*.so*' \) -print0 | xargs -0 ldd 2>/dev/null |
    awk '/=> \// {print $1, $3}' | sort -u | grep -E "^($CARRY_LIBS)" |
    while read -r soname path; do cp -L "$path" "$CARRY/deps/$soname"; done
  find "$CARRY" -type f \( -perm -u+x -o -name '*.so*' \) -exec strip --strip-unneeded {} + 2>/dev/null
  echo "== bundled into .carry ($(du -sm "$CARRY" | cut -f1) MiB; the device tool takes 64 MiB with the tree):"
  (cd "$CARRY" && find . -type f | sort | sed 's/^/   /')
  cat <<EOF
== now call the device tool:
   run(command="EMMY_CARRY=${EMMY_CARRY:-.carry} bash scripts/gpu-roundtrip.sh remote", carry=["${EMMY_CARRY:-.carry}"], timeout_s=600)
EOF
}

remote_env() {
  export LD_LIBRARY_PATH=$CARRY/lib:$CARRY/deps:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export EMMY_CUDA_WORKER=$CARRY/libexec/emmy/emmy-cuda-worker
  export EMMY_HOME=/tmp/emmy-home
  # The two-GPU test fails (rather than skips) when the machine has two GPUs and one fails.
  EMMY_EXPECT_GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
  export EMMY_EXPECT_GPUS
  chmod +x "$CARRY"/bin/* "$CARRY"/libexec/emmy/* "$CARRY"/tests/* 2>/dev/null
}

remote_tests() {
  local out=${OUT:-/tmp/emmy-gpu-out} filter=${1:-*}
  mkdir -p "$out"
  remote_env
  nvidia-smi -L | tee "$out/env.log"
  for t in "$CARRY"/tests/*; do
    [[ -x $t ]] || continue
    "$t" --gtest_color=no --gtest_filter="$filter" 2>&1 | tee -a "$out/gpu-tests.log"
  done
}

# Only the pt2 frontend's key check (issue 25): torch.export of the real-size Qwen3 layer (sdpa and
# eager) against the hf frontend; needs no LibTorch plugin.
remote_pt2() {
  local out=${OUT:-/tmp/emmy-gpu-out}
  mkdir -p "$out"
  remote_env
  /opt/torch/.venv/bin/python3 scripts/pt2_compare_keys.py "$CARRY/bin/emmy" "$out/pt2" "${1:-128}" 2>&1 |
    tee "$out/pt2-keys.log"
}

# The LibTorch plugins (torchscript frontend, mlp prior: the default prior), built against this
# machine's LibTorch with the g++ line the libtorch_plugin_gxx test checks against Debian's.
remote_libtorch_plugins() {
  local out=$1 emmy=$CARRY/bin/emmy
  local py=/opt/torch/.venv/bin/python3
  if [[ -x $py ]]; then
    local T ABI n
    T=$($py -c "import torch, os; print(os.path.dirname(torch.__file__))")
    ABI=$($py -c "import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))")
    : >"$out/libtorch-build.log"
    for n in $LIBTORCH_PLUGINS; do
      [[ -f $CARRY/lib/emmy/plugins/$n.emmy-manifest ]] || continue
      # Built earlier in this call (bundle never carries them): built once per call.
      [[ -f $CARRY/lib/emmy/plugins/libemmy_$n.so ]] && continue
      echo "== building the $n plugin against $T (cxx11 abi $ABI)" | tee -a "$out/libtorch-build.log"
      build_libtorch_plugin "$n" "$CARRY/lib/emmy/plugins" "$CARRY/lib" "$T/include" "$T/lib" "$ABI" 2>&1 |
        tail -20 | tee -a "$out/libtorch-build.log"
    done
  fi
  # The LibTorch plugins and the priors as the host sees them (a refused one says why).
  "$emmy" plugins 2>&1 | grep -E -A1 "^(mlp|roofline|torchscript) " | tee -a "$out/libtorch-build.log"

}

# The two commands of the user's run description exactly as a user types them (no --backend:
# the default must pick the GPU), from an empty home, each followed by up to RERUNS re-runs
# (stopping at the first that launches nothing). The default prior learns from every run, but an
# identical re-run with nothing learned elsewhere since starts from the prior its first run started
# from, so it walks the same path from the database and launches nothing (README, "The prior").
# When both ran, the --code command once more after the layer: its prior has learned the layer's
# kernels since, so it may descend differently and reach new configurations. Then the --code
# command with --prior roofline (a prior that does not learn) twice: its re-run launches nothing
# too.
example_runs() {
  local out=$1 reruns=$2 emmy=$CARRY/bin/emmy i
  local code=("$emmy" tune --code "$CODE" --patience 10 -v)
  local layer=("$emmy" tune Qwen/Qwen3-Embedding-0.6B --layer 0)
  # Not the run description's, asked by EMMY_EXAMPLE_WHAT containing "attn": issue 24's causal
  # attention at S=2048 (16 heads, hd 128, bf16) at the default patience, to finish in under a
  # minute.
  local attn=("$emmy" tune --code "$ATTN_CODE" --patience 50 -v)
  local code_limit=${EMMY_TUNE_TIMEOUT:-240} layer_limit=${EMMY_EXAMPLE_LAYER_TIMEOUT:-420}
  for what in ${EMMY_EXAMPLE_WHAT:-code layer}; do
    local -n cmd=$what
    local limit=$code_limit log=$out/example-$what.log
    local n=$reruns
    [[ $what == layer ]] && limit=$layer_limit && n=${EMMY_EXAMPLE_LAYER_RERUNS:-$reruns}
    echo "== ${cmd[*]}" | tee "$log"
    for ((i = 0; i <= n; ++i)); do
      ((i > 0)) && echo "== re-run $i" | tee -a "$log"
      /usr/bin/time -f "wall %e s" timeout "$limit" "${cmd[@]}" --no-progress --json "$out/example-$what-$i.json" \
        >"$out/example-run.tmp" 2>&1
      if [[ $what != layer ]]; then cat "$out/example-run.tmp" >>"$log"; tail -4 "$out/example-run.tmp"; else tail -16 "$out/example-run.tmp" | tee -a "$log"; fi
      python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1])).get("launches", 1) != 0)' \
        "$out/example-$what-$i.json" 2>/dev/null && ((i > 0)) && break
    done
    unset -n cmd
  done
  # PyTorch's time for the same product, measured as bench/qwen_layer measures (issue 18's
  # target: the run description's f32 example at least as fast as PyTorch's, TF32 off).
  if [[ -f $out/example-code-0.json && -x /opt/torch/.venv/bin/python3 ]]; then
    /opt/torch/.venv/bin/python3 bench/example/torch_product.py "$out/example-code-0.json" 2>&1 |
      tail -3 | tee -a "$out/example-code.log" "$out/example-summary.log"
  fi
  if [[ ${EMMY_EXAMPLE_WHAT:-code layer} == "code layer"* ]]; then
    echo "== ${code[*]} (after the layer)" | tee -a "$out/example-code.log"
    /usr/bin/time -f "wall %e s" timeout "$code_limit" "${code[@]}" --no-progress \
      --json "$out/example-after-layer-0.json" >"$out/example-run.tmp" 2>&1
    cat "$out/example-run.tmp" >>"$out/example-code.log"
    tail -4 "$out/example-run.tmp"
  fi
  rm -f "$out/example-run.tmp"
  local rh=/tmp/emmy-example-roofline
  rm -rf "$rh"
  echo "== ${code[*]} --prior roofline, twice" | tee "$out/example-roofline.log"
  for i in 0 1; do
    EMMY_HOME=$rh EMMY_DB=$rh/tuning.db timeout "$code_limit" "${code[@]}" --prior roofline --no-progress \
      --json "$out/example-roofline-$i.json" >>"$out/example-roofline.log" 2>&1
  done
  python3 - "$out" <<'PY' 2>&1 | tee -a "$out/example-summary.log"
import glob, json, os, sys
out = sys.argv[1]
for name in ("example-code", "example-layer", "example-after-layer", "example-roofline", "example-attn"):
    runs = sorted(glob.glob(os.path.join(out, name + "-*.json")), key=lambda p: int(p.rsplit("-", 1)[1][:-5]))
    for i, path in enumerate(runs):
        try:
            r = json.load(open(path))
        except (OSError, ValueError) as e:
            print(f"{name} run {i}: no report ({e})")
            continue
        print(f"{name} run {i}: {r.get('status')}; backend {r['backend']} ({r['env']}), prior {r['prior']}, "
              f"total {r['best_total_us']:.2f} us, assembled {r.get('assembled_us')} us, "
              f"gap {r.get('validation_gap_pct')} %, {r['wall_s']:.1f} s, {r['launches']} launches, "
              f"{r['cache_hits']} cache hits, replays run {r.get('prior_replays_run')}")
PY
}

remote() {
  local out=${OUT:-/tmp/emmy-gpu-out}
  mkdir -p "$out"
  remote_env
  local emmy=$CARRY/bin/emmy
  {
    date
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    echo "missing libraries:"
    find "$CARRY" -type f \( -perm -u+x -o -name '*.so*' \) -print0 | xargs -0 ldd 2>/dev/null | grep "not found" | sort -u
  } 2>&1 | tee "$out/env.log"

  remote_libtorch_plugins "$out"
  local py=/opt/torch/.venv/bin/python3

  # Structural keys (issue 17): the real transformers Qwen3DecoderLayer, traced, against the hf
  # frontend's graph of the same layer: the same kernels must get the same keys.
  if [[ -x $py && -f $CARRY/lib/emmy/plugins/libemmy_torchscript.so ]]; then
    local seq=128 pt=/tmp/emmy-qwen3-layer0.pt cfg=plugins/frontends/hf/configs/Qwen/Qwen3-Embedding-0.6B/config.json
    echo "== keys: torch.jit.trace of transformers' Qwen3DecoderLayer vs the hf frontend (seq $seq)" | tee "$out/keys.log"
    $py scripts/trace_transformers_layer.py "$cfg" "$pt" "$seq" 2>&1 | tail -20 | tee -a "$out/keys.log"
    "$emmy" trace "$pt" --ir > "$out/keys-traced.txt" 2>&1
    "$emmy" trace Qwen/Qwen3-Embedding-0.6B --layer 0 --seq "$seq" --dtype bf16 --ir > "$out/keys-hf.txt" 2>&1
    "$emmy" trace "$pt" --json > "$out/keys-traced.json" 2>> "$out/keys.log"
    "$emmy" trace Qwen/Qwen3-Embedding-0.6B --layer 0 --seq "$seq" --dtype bf16 --json > "$out/keys-hf.json" 2>> "$out/keys.log"
    python3 - "$out/keys-traced.json" "$out/keys-hf.json" <<'PY' 2>&1 | tee -a "$out/keys.log"
import json, sys
try:
    traced, hf = ({d["key"]: d for d in json.load(open(p))["distinct"]} for p in sys.argv[1:3])
except Exception as e:
    print(f"cannot read the trace reports ({e}); see keys-traced.txt and keys-hf.txt")
    print("keys identical: False")
    sys.exit(0)
for key in sorted(set(traced) | set(hf), key=lambda k: (hf.get(k) or traced.get(k))["name"]):
    t, h = traced.get(key), hf.get(key)
    print(f"{key[:16]}  hf {h['name'] if h else '-':34} traced {t['name'] if t else '-':34} "
          f"nodes {h['nodes'] if h else '-'}/{t['nodes'] if t else '-'}")
print(f"distinct kernels: traced {len(traced)}, hf {len(hf)}")
print(f"keys identical: {set(traced) == set(hf)}")
PY
  fi

  # Structural keys (issue 25): the same layer exported with torch.export (sdpa and eager
  # attention) through the pt2 frontend (no LibTorch) against the hf frontend's graph.
  if [[ -x $py && -f $CARRY/lib/emmy/plugins/libemmy_pt2.so ]]; then
    echo "== keys: torch.export of transformers' Qwen3DecoderLayer (.pt2) vs the hf frontend (seq 128)" | tee "$out/pt2-keys.log"
    $py scripts/pt2_compare_keys.py "$emmy" "$out/pt2" 128 2>&1 | tail -40 | tee -a "$out/pt2-keys.log" || true
  fi

  # EMMY_GPU_TESTS: a gtest filter for the GPU tests (default all; "none" skips them).
  echo "== GPU tests (${EMMY_GPU_TESTS:-*})" | tee "$out/gpu-tests.log"
  for t in "$CARRY"/tests/*; do
    [[ -x $t && ${EMMY_GPU_TESTS:-*} != none ]] || continue
    "$t" --gtest_color=no --gtest_filter="${EMMY_GPU_TESTS:-*}" 2>&1 | tee -a "$out/gpu-tests.log"
  done

  export EMMY_DB=$EMMY_HOME/tuning.db
  rm -rf "$EMMY_HOME"
  local limit=${EMMY_TUNE_TIMEOUT:-240}
  example_runs "$out" "${EMMY_EXAMPLE_RERUNS:-1}"
  # Defaults that follow the machine (issue 17): no --backend takes the GPU, for an expression on
  # device='cuda' and for one without a device alike; the first line says which and why.
  echo "== defaults: emmy tune --code ... --patience 3 (no --backend)" | tee "$out/defaults.log"
  for expr in "$CODE" "torch.matmul(torch.randn(256,256), torch.randn(256,256))"; do
    timeout "$limit" "$emmy" tune --code "$expr" --patience 3 --no-progress >"$out/defaults.tmp" 2>&1
    echo "exit $?: $(head -1 "$out/defaults.tmp")" | tee -a "$out/defaults.log"
  done
  rm -f "$out/defaults.tmp"
  grep -c ': backend cuda' "$out/defaults.log" | sed 's/^/lines saying backend cuda (want 2): /' | tee -a "$out/defaults.log"
  # More figures (EMMY_ROUNDTRIP_EXTRA=0 skips them): a bf16 1024^3 matmul on tensor cores,
  # PyTorch's own time for both products, and layer 0 of Qwen3-Embedding-0.6B end to end.
  if [[ ${EMMY_ROUNDTRIP_EXTRA:-1} != 0 ]]; then
    local bf="torch.matmul(torch.randn(1024,1024,dtype=torch.bfloat16,device='cuda'), torch.randn(1024,1024,dtype=torch.bfloat16,device='cuda'))"
    echo "== emmy tune --backend cuda --code \"$bf\" --patience 10" | tee "$out/extra.log"
    timeout "$limit" "$emmy" tune --backend cuda --code "$bf" --patience 10 2>&1 | tee -a "$out/extra.log"
    echo "== PyTorch's time for the same products (CUDA events, median of 50 after 10 warm-ups)" | tee -a "$out/extra.log"
    /opt/torch/.venv/bin/python3 - <<'PY' 2>&1 | tee -a "$out/extra.log"
import torch
for n, dt in ((512, torch.float32), (1024, torch.bfloat16)):
    a, b = torch.randn(n, n, device="cuda", dtype=dt), torch.randn(n, n, device="cuda", dtype=dt)
    for _ in range(10): a @ b
    ts = []
    for _ in range(50):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); a @ b; e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e) * 1000)
    ts.sort()
    print(f"torch {n}x{n}x{n} {dt}: median {ts[len(ts)//2]:.2f} us (tf32 {torch.backends.cuda.matmul.allow_tf32})")
PY
    # Layer 0 from an empty home (no database, compile cache or prior checkpoint), so that the
    # wall time can be set beside the fanned-out run below, which starts from the same nothing.
    # These runs use --prior roofline, a prior that does not learn: the default (mlp) learns from
    # the fanned-out run, so the one-GPU run over its database would not walk the same path.
    echo "== emmy tune Qwen/Qwen3-Embedding-0.6B --layer 0 --backend cuda --patience 5" | tee "$out/qwen.log"
    rm -rf /tmp/emmy-qwen-1gpu
    EMMY_HOME=/tmp/emmy-qwen-1gpu EMMY_DB=/tmp/emmy-qwen-1gpu/tuning.db /usr/bin/time -f "wall %e s" \
      timeout "${EMMY_QWEN_TIMEOUT:-240}" "$emmy" tune Qwen/Qwen3-Embedding-0.6B --layer 0 --backend cuda \
      --prior roofline --patience 5 --json "$out/qwen.json" 2>&1 | tail -60 | tee -a "$out/qwen.log"
    # With several GPUs: the same tune fanned out over all of them, from an empty home too.
    local gpus
    gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
    if (( gpus > 1 )); then
      local many=/tmp/emmy-qwen-gpus
      rm -rf "$many"
      echo "== emmy tune Qwen/Qwen3-Embedding-0.6B --layer 0 --backend cuda --patience 5 --gpus $gpus" | tee "$out/qwen-gpus.log"
      EMMY_HOME=$many EMMY_DB=$many/tuning.db /usr/bin/time -f "wall %e s" timeout "${EMMY_QWEN_TIMEOUT:-240}" \
        "$emmy" tune Qwen/Qwen3-Embedding-0.6B --layer 0 --backend cuda --prior roofline --patience 5 --gpus "$gpus" \
        --json "$out/qwen-gpus.json" 2>&1 | tail -60 | tee -a "$out/qwen-gpus.log"
      # The same tune on one GPU over the fanned-out run's measurements: the device count must not
      # change the path (launches 0) nor any kernel's choice or the total.
      echo "== the same on 1 GPU over that database (should launch nothing, same choices)" | tee -a "$out/qwen-gpus.log"
      EMMY_HOME=$many EMMY_DB=$many/tuning.db /usr/bin/time -f "wall %e s" timeout "${EMMY_QWEN_TIMEOUT:-240}" \
        "$emmy" tune Qwen/Qwen3-Embedding-0.6B --layer 0 --backend cuda --prior roofline --patience 5 --gpus 1 \
        --json "$out/qwen-gpus-1.json" 2>&1 | tail -20 | tee -a "$out/qwen-gpus.log"
      python3 - "$out/qwen-gpus.json" "$out/qwen-gpus-1.json" "$out/qwen.json" <<'PY' 2>&1 | tee -a "$out/qwen-gpus.log"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
same = [(x["key"], x["config"], x["best_deploy_us"]) for x in a["kernels"]] == \
       [(x["key"], x["config"], x["best_deploy_us"]) for x in b["kernels"]]
one = json.load(open(sys.argv[3]))
print(f"from empty homes: 1 GPU {one['wall_s']:.1f} s ({one['launches']} launches, total "
      f"{one['best_total_us']:.2f} us), {a['devices']} GPUs {a['wall_s']:.1f} s ({a['launches']} launches, "
      f"total {a['best_total_us']:.2f} us)")
print(f"devices {a['devices']} vs {b['devices']} over the same database: wall {a['wall_s']:.1f} s vs {b['wall_s']:.1f} s; "
      f"launches {a['launches']} vs {b['launches']}; total {a['best_total_us']:.2f} vs "
      f"{b['best_total_us']:.2f} us; per-kernel choices identical: {same}")
PY
    fi
  fi

  echo "== emmy eval variants --kernel matmul" | tee "$out/eval.log"
  CUDA_VISIBLE_DEVICES= "$emmy" eval variants --kernel matmul 2>&1 | tee -a "$out/eval.log"
  echo "== emmy eval failures" | tee -a "$out/eval.log"
  CUDA_VISIBLE_DEVICES= "$emmy" eval failures 2>&1 | tee -a "$out/eval.log"
  pack_out "$out"
}

# The device tool brings back at most 8 files from $OUT: everything goes into one archive.
pack_out() {
  local out=$1
  (cd "$out" && tar czf /tmp/roundtrip.tgz --exclude=roundtrip.tgz . && mv /tmp/roundtrip.tgz . &&
    find . -type f ! -name roundtrip.tgz -delete)
  echo "== logs and reports: \$OUT/roundtrip.tgz"
}

# Issue 22 on cuda (remote-export above): GPU tests of the runtime, then tune + export + run.
remote_export() {
  local out=${OUT:-/tmp/emmy-gpu-out} emmy=$CARRY/bin/emmy
  mkdir -p "$out"
  remote_env
  remote_libtorch_plugins "$out"
  export EMMY_DB=$EMMY_HOME/tuning.db
  rm -rf "$EMMY_HOME"
  [[ ${EMMY_GPU_TESTS:-} == none ]] || remote_tests "${EMMY_GPU_TESTS:-CudaExportGpu*}"
  local bf16="torch.matmul(torch.randn(256,256,dtype=torch.bfloat16,device='cuda'), torch.randn(256,256,dtype=torch.bfloat16,device='cuda'))"
  local tune_opts=(--patience 2 --prior roofline --no-progress)
  : >"$out/export-summary.log"
  # NAME, then the source and options shared by tune and export.
  export_case() {
    local name=$1 log=$out/export-$1.log
    shift
    echo "== $name: tune" | tee "$log"
    timeout 420 "$emmy" tune "$@" "${tune_opts[@]}" >>"$log" 2>&1
    echo "== $name: export" | tee -a "$log"
    timeout 120 "$emmy" export "$@" --out "/tmp/emmy-export-$name.emmy" >>"$log" 2>&1
    echo "== $name: run" | tee -a "$log"
    timeout 120 "$emmy" -v run "/tmp/emmy-export-$name.emmy" --repeat 5 >>"$log" 2>&1
    local rc=$?
    ls -l "/tmp/emmy-export-$name.emmy" >>"$log" 2>&1
    echo "$name: emmy run exit $rc, $(grep -c PASS "$log") PASS line(s)" |
      tee -a "$out/export-summary.log"
    tail -8 "$log"
  }
  # EMMY_EXPORT_CASES picks some (one device call is 10 minutes at most).
  local cases=" ${EMMY_EXPORT_CASES:-bf16-generated bf16-cublaslt qwen-layer0 code-512} "
  [[ $cases == *" bf16-generated "* ]] &&
    export_case bf16-generated --backend cuda --code "$bf16" --backend-option cublaslt=0
  [[ $cases == *" bf16-cublaslt "* ]] && export_case bf16-cublaslt --backend cuda --code "$bf16"
  [[ $cases == *" qwen-layer0 "* ]] &&
    export_case qwen-layer0 Qwen/Qwen3-Embedding-0.6B --layer 0 --seq 64 --backend cuda
  [[ $cases == *" code-512 "* ]] && export_case code-512 --backend cuda --code "$CODE"
  pack_out "$out"
}

# Only the LibTorch plugins and the run description's commands, with up to EMMY_EXAMPLE_RERUNS (default
# 3) re-runs each: their record for docs/PERFORMANCE.md.
remote_example() {
  local out=${OUT:-/tmp/emmy-gpu-out}
  mkdir -p "$out"
  remote_env
  remote_libtorch_plugins "$out"
  export EMMY_DB=$EMMY_HOME/tuning.db
  rm -rf "$EMMY_HOME"
  example_runs "$out" "${EMMY_EXAMPLE_RERUNS:-3}"
  pack_out "$out"
}

# scripts/same-choices.sh on the GPU, with the run description's two commands exactly (default
# prior, so the LibTorch plugins are built first): `record` from an empty home into
# $OUT/same-choices (fetch it, and put it at .carry/same-choices after the next bundle), `check`
# over the homes recorded there. Then the GPU tests (EMMY_GPU_TESTS: a gtest filter, "none" skips
# them), so that one call says both "same choices" and "the GPU suite passes".
remote_same_choices() {
  local out=${OUT:-/tmp/emmy-gpu-out} mode=${1:-check}
  mkdir -p "$out"
  remote_env
  remote_libtorch_plugins "$out"
  if [[ $mode == record ]]; then
    EMMY=$CARRY/bin/emmy bash scripts/same-choices.sh record "$out/same-choices" 2>&1 | tee "$out/same-choices.log"
  else
    cp -r "${EMMY_SAME_DIR:-$CARRY/same-choices}" "$out/same-choices"
    EMMY=$CARRY/bin/emmy bash scripts/same-choices.sh check "$out/same-choices" 2>&1 | tee "$out/same-choices.log"
  fi
  [[ ${EMMY_GPU_TESTS:-*} == none ]] || remote_tests "${EMMY_GPU_TESTS:-*}"
  # One archive: the device tool returns at most 8 files.
  pack_out "$out"
}

# The GPU suite of the prior's training data (issue 24): each kernel tuned at a small patience
# with --prior roofline (a prior that learns nothing, so every kernel's search is the same
# whatever ran before it), all into one home, whose checkpoint then holds every measured row.
prior_data_suite() {
  local bf="dtype=torch.bfloat16,device='cuda'" n k nk shape
  # Qwen3-0.6B: hidden 1024; q 2048, k/v 1024 (and qkv fused 4096); o 2048 -> 1024; gate/up
  # 3072 (fused 6144); down 3072 -> 1024. M: 512 and 2048 tokens, and B=8 S=512 as 3-d input.
  # The kinds alternate, so that a budget spent early still leaves every kind in the table.
  products() {
    for nk in 4096,1024 2048,1024 1024,1024 1024,2048 3072,1024 6144,1024 1024,3072; do
      n=${nk%,*} k=${nk#*,}
      echo "torch.nn.functional.linear(torch.randn($1,$k,$bf), torch.randn($n,$k,$bf))"
    done
  }
  rows() {
    for shape in "$@"; do
      n=${shape##*,}
      echo "torch.randn($shape,$bf) * torch.rsqrt(torch.randn($shape,$bf).pow(2).mean(-1, keepdim=True) + 1e-6) * torch.randn($n,$bf)"
      echo "torch.nn.functional.silu(torch.randn($shape,$bf)) * torch.randn($shape,$bf)"
      echo "torch.softmax(torch.randn($shape,$bf), -1)"
    done
  }
  attention() {
    echo "torch.nn.functional.scaled_dot_product_attention(torch.randn($1,128,$bf), torch.randn($1,128,$bf), torch.randn($1,128,$bf), is_causal=True)"
  }
  products 512
  rows 512,1024 8192,128
  attention 1,16,512
  products 2048
  rows 2048,1024 4096,3072
  attention 1,16,2048
  products 8,512
  rows 8,512,1024
  attention 8,16,512
}

remote_prior_data() {
  local out=${OUT:-/tmp/emmy-gpu-out} emmy=$CARRY/bin/emmy started=$SECONDS
  # The whole call, the LibTorch build included, within EMMY_PRIOR_DATA_BUDGET seconds (default
  # 500: the device tool's 600 s limit, less time for the export).
  local home=/tmp/emmy-prior-data budget=${EMMY_PRIOR_DATA_BUDGET:-500}
  local patience=${EMMY_PRIOR_DATA_PATIENCE:-6} log=$out/prior-data.log
  local random_samples=${EMMY_PRIOR_DATA_RANDOM:-0}
  mkdir -p "$out"
  remote_env
  # Only the frontend of --code needs LibTorch here (the suite runs with --prior roofline).
  LIBTORCH_PLUGINS=torchscript remote_libtorch_plugins "$out"
  echo "== LibTorch plugin built after $((SECONDS - started)) s" | tee "$log"
  rm -rf "$home"
  nvidia-smi --query-gpu=name,driver_version --format=csv | tee -a "$log"
  # EMMY_PRIOR_DATA_FROM=N starts at the suite's N-th expression (1-based), to measure the rest
  # of a suite a first call's budget did not reach.
  # EMMY_PRIOR_DATA_MATCH=REGEX keeps only the expressions it matches (grep -E), e.g. the
  # attention kernels, to add rows of one kind to a table measured before.
  local expr left index=0 from=${EMMY_PRIOR_DATA_FROM:-1} match=${EMMY_PRIOR_DATA_MATCH:-}
  while read -r expr; do
    ((++index < from)) && continue
    [[ -z $match ]] || grep -qE -- "$match" <<<"$expr" || continue
    left=$((budget - (SECONDS - started)))
    if ((left < 15)); then
      echo "== budget of $budget s spent: not tuned: $expr" | tee -a "$log"
      continue
    fi
    echo "== $expr" | tee -a "$log"
    # --no-validate: the validation's requests make no prior rows, and the budget is better spent
    # on more kernels (the 12-06 products call did not reach three of its 21 products).
    EMMY_HOME=$home EMMY_DB=$home/tuning.db timeout "$left" "$emmy" tune --backend cuda \
      --prior roofline --patience "$patience" --no-validate --no-progress --code "$expr" </dev/null 2>&1 | tail -3 | tee -a "$log"
    # EMMY_PRIOR_DATA_RANDOM=N: then N configurations of each kernel drawn uniformly from its space
    # (any the tune measured already is served from the database: fewer new rows). The tune above
    # measures what roofline ranks high, so a knob value it never likes has no row, and a prior
    # trained on the table guesses it (the H100 table of 12-05 has no attention row with
    # heads=2, the shipped state's favourite for sdpa at B=1 S=512).
    if ((random_samples > 0)); then
      left=$((budget - (SECONDS - started)))
      ((left < 15)) && continue
      EMMY_HOME=$home EMMY_DB=$home/tuning.db timeout "$left" "$emmy" tune --backend cuda \
        --prior roofline --search random --budget "$random_samples" --seed "$index" --no-validate \
        --no-progress --code "$expr" </dev/null 2>&1 | grep '^total' | tee -a "$log"
    fi
  done < <(prior_data_suite)
  # The architecture word the shipped prior answers to (store/pretrained_prior.hpp): the word of
  # the device's name after "NVIDIA", lower-cased ("NVIDIA H100 80GB HBM3" -> h100).
  local arch=${EMMY_PRIOR_DATA_ARCH:-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 |
    awk '{ print tolower($2) }')}
  local table=$out/cuda_${arch:-unknown}.jsonl
  EMMY_HOME=$home "$emmy" eval prior --prior roofline --export "$table" 2>&1 | tee -a "$log"
  EMMY_HOME=$home "$emmy" eval prior --data "$table" --compare roofline 2>&1 | tee -a "$log"
  echo "== $(wc -l < "$table") rows in \$OUT/$(basename "$table"), $((SECONDS - started)) s" | tee -a "$log"
}

remote_bench() {
  local out=${OUT:-/tmp/emmy-gpu-out}
  mkdir -p "$out"
  remote_env
  # The default prior (mlp) links LibTorch: built here, as for `remote`, or the tune falls back to
  # roofline.
  remote_libtorch_plugins "$out"
  CARRY=$CARRY bash bench/qwen_layer/run.sh
}

# libemmy_torch (the PyTorch op, runtime/torch) against this machine's PyTorch, into $CARRY/lib
# beside the carried libemmy_runtime, with emmy_torch.py; built once per call.
remote_emmy_torch() {
  local out=$1 py=/opt/torch/.venv/bin/python3 T ABI
  [[ -f $CARRY/lib/libemmy_torch.so ]] && return 0
  [[ -x $py ]] || { echo "== no $py: libemmy_torch not built" | tee -a "$out/libtorch-build.log"; return 1; }
  T=$($py -c "import torch, os; print(os.path.dirname(torch.__file__))")
  ABI=$($py -c "import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))")
  echo "== building libemmy_torch against $T (cxx11 abi $ABI)" | tee -a "$out/libtorch-build.log"
  build_emmy_torch "$CARRY/lib" "$CARRY/lib" "$T/include" "$T/lib" "$ABI" 2>&1 | tail -20 |
    tee -a "$out/libtorch-build.log"
  [[ -f $CARRY/lib/libemmy_torch.so ]]
}

# Issue 22, item 4: the whole Qwen3 model tuned, exported, loaded through the PyTorch op and timed
# against transformers eager and torch.compile (bench/model/run.sh; its EMMY_MODEL_* variables
# pick the steps and shapes: one call is 600 s at most, bench/model/README.md splits the work).
remote_model_bench() {
  local out=${OUT:-/tmp/emmy-gpu-out}
  mkdir -p "$out"
  remote_env
  remote_libtorch_plugins "$out"
  remote_emmy_torch "$out" || { echo "== libemmy_torch did not build: $out/libtorch-build.log"; return 1; }
  CARRY=$CARRY EMMY_TORCH_LIBRARY=$CARRY/lib/libemmy_torch.so bash bench/model/run.sh
}

# Any command with the carried build's environment (CARRY exported): a probe, a profile.
remote_sh() {
  remote_env
  export CARRY
  "$@"
}

# Ctrl-C during a whole model's validation (docs/DESIGN.md: Ctrl-C stops before the next build
# or measurement): tunes Qwen3-Embedding-0.6B at EMMY_INTERRUPT_SHAPE (default 1x512) from an
# empty home with -v, sends SIGINT once the log says the validation started, and reports the
# exit status (130 expected), the seconds from the signal to the exit and what `emmy export`
# then says (no plan stored); interrupt.{log,md} under $OUT. The tune is killed after
# EMMY_INTERRUPT_LIMIT seconds (default 400) whatever happens.
remote_interrupt() {
  local out=${OUT:-/tmp/emmy-gpu-out} shape=${EMMY_INTERRUPT_SHAPE:-1x512}
  local limit=${EMMY_INTERRUPT_LIMIT:-400} home=/tmp/emmy-interrupt log pid t0 sent="" rc
  mkdir -p "$out"
  remote_env
  rm -rf "$home"
  log=$out/interrupt.log
  EMMY_HOME=$home "$CARRY/bin/emmy" tune Qwen/Qwen3-Embedding-0.6B --batch "${shape%x*}" \
    --seq "${shape#*x}" --backend cuda --patience 2 -v --no-progress >"$log" 2>&1 &
  pid=$!
  t0=$SECONDS
  while kill -0 "$pid" 2>/dev/null && ((SECONDS - t0 < limit)); do
    if [[ -z $sent ]] && grep -q "validating the best grouping" "$log"; then
      sent=$SECONDS
      kill -INT "$pid"
      echo "== SIGINT sent at $((sent - t0)) s, during the validation" | tee -a "$out/interrupt.md"
    fi
    sleep 0.5
  done
  kill -0 "$pid" 2>/dev/null && { echo "== still running after $limit s: killed" | tee -a "$out/interrupt.md"; kill -KILL "$pid"; }
  wait "$pid"
  rc=$?
  echo "== exit $rc, $((SECONDS - ${sent:-$t0})) s after the signal (130 = interrupted cleanly)" |
    tee -a "$out/interrupt.md"
  tail -5 "$log" | tee -a "$out/interrupt.md"
  EMMY_HOME=$home "$CARRY/bin/emmy" export Qwen/Qwen3-Embedding-0.6B --batch "${shape%x*}" \
    --seq "${shape#*x}" --backend cuda --out /tmp/emmy-interrupt.export 2>&1 | tail -2 |
    tee -a "$out/interrupt.md"
}

# Issue 24's wall-time target: the causal attention at S=2048 (ATTN_CODE) tuned at the default
# patience, once per --build-ahead value of EMMY_AHEAD_VALUES ("default 0": the run's default,
# then none), each from an empty home (empty database, cold compile cache, the shipped prior), in
# the same call so the walls compare. Logs (-v), JSON reports and search-wall.md under $OUT.
remote_search_wall() {
  local out=${OUT:-/tmp/emmy-gpu-out} v
  mkdir -p "$out"
  remote_env
  remote_libtorch_plugins "$out"
  for v in ${EMMY_AHEAD_VALUES:-default 0}; do
    local home=/tmp/emmy-wall-$v flag=()
    [[ $v == default ]] || flag=(--build-ahead "$v")
    rm -rf "$home"
    echo "== build ahead $v" | tee -a "$out/search-wall.log"
    EMMY_HOME=$home EMMY_DB=$home/tuning.db /usr/bin/time -f "wall %e s" \
      timeout "${EMMY_WALL_TIMEOUT:-200}" "$CARRY/bin/emmy" tune --code "$ATTN_CODE" --patience 50 \
      -v --no-progress "${flag[@]}" --json "$out/search-wall-$v.json" >"$out/search-wall-$v.log" 2>&1
    tail -8 "$out/search-wall-$v.log" | tee -a "$out/search-wall.log"
  done
  python3 - "$out" ${EMMY_AHEAD_VALUES:-default 0} <<'PY' 2>&1 | tee "$out/search-wall.md"
import json, os, sys
out = sys.argv[1]
print("| --build-ahead | status | wall s | measured | deploy | cache hits | built ahead | of them picked | best total us |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for v in sys.argv[2:]:
    try:
        r = json.load(open(os.path.join(out, f"search-wall-{v}.json")))
    except (OSError, ValueError) as e:
        print(f"| {v} | no report ({e}) | | | | | | | |")
        continue
    print(f"| {v} | {r['status']} | {r['wall_s']:.1f} | {r['candidates_measured']} | {r['deploy_measurements']} | "
          f"{r['cache_hits']} | {r.get('built_ahead')} | {r.get('built_ahead_used')} | {r['best_total_us']:.2f} |")
PY
}

# The search benchmark's cuda suite (bench/search). --code needs the torchscript frontend and the
# default prior is mlp: both are rebuilt here first, as for `remote`.
remote_search_bench() {
  local out=${OUT:-/tmp/emmy-gpu-out} t0=$SECONDS
  mkdir -p "$out"
  remote_env
  remote_libtorch_plugins "$out"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv 2>&1 | tee "$out/env.log"
  # The device tool stops a command at 600 s: no tune starts after 480 s from here (the plugin
  # builds above included), and one still running 60 s later is interrupted; whatever ran is in
  # $OUT either way (rewritten after every tune).
  local deadline=${EMMY_SEARCH_DEADLINE:-$((480 - (SECONDS - t0)))}
  ((deadline >= 1)) || deadline=1  # 0 would mean none
  python3 bench/search/search_bench.py --suite cuda --emmy "$CARRY/bin/emmy" --out "$out" \
    --work /tmp/emmy-search-bench --deadline "$deadline" \
    --tune-timeout "${EMMY_SEARCH_TUNE_TIMEOUT:-300}" \
    ${EMMY_SEARCH_EXPORT_ROWS:+--export-rows "$out/rows"} "$@"
}

# The device tool brings back at most 8 files of $OUT, none deeper than two folders (its README,
# Limits); a file beyond them is left out without a trace in $OUT (12-07: a bench's -v log, the
# search benchmark's exported rows). Where a command left more, every file goes into
# $OUT/outputs.tar.gz and only the top-level tables (*.md, at most 7) stay beside it. Only where
# $OUT is set (the device tool's folder); EMMY_OUT_MAX_FILES overrides the 8.
fit_out() {
  local out=${OUT:-} max=${EMMY_OUT_MAX_FILES:-8} n tables archive
  [[ -n $out && -d $out ]] || return 0
  n=$(find "$out" -type f | wc -l)
  ((n > max)) || return 0
  archive=$(mktemp /tmp/emmy-outputs.XXXXXX) || return 0
  tar czf "$archive" -C "$out" . || return 0
  tables=$(find "$out" -maxdepth 1 -type f -name '*.md' | wc -l)
  if ((tables < max)); then
    find "$out" -mindepth 1 -maxdepth 1 ! \( -type f -name '*.md' \) -exec rm -rf {} +
  else
    find "$out" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
  fi
  mv "$archive" "$out/outputs.tar.gz"
  echo "== $n files under \$OUT: all in outputs.tar.gz (the device tool brings back $max)"
}

command=${1:-bundle}
case $command in
  remote) remote ;;
  remote-sh) shift; remote_sh "$@" ;;
  remote-interrupt) remote_interrupt ;;
  remote-bench) remote_bench ;;
  remote-model-bench) remote_model_bench ;;
  remote-prior-data) remote_prior_data ;;
  remote-search-bench) shift; remote_search_bench "$@" ;;
  remote-example) remote_example ;;
  remote-search-wall) remote_search_wall ;;
  remote-same-choices) shift; remote_same_choices "$@" ;;
  remote-tests) shift; remote_tests "$@" ;;
  remote-pt2) shift; remote_pt2 "$@" ;;
  remote-export) remote_export ;;
  bundle) shift || true; bundle "$@" ;;
  *) bundle "$@" ;;
esac
rc=$?
[[ $command == remote* ]] && fit_out
exit $rc
