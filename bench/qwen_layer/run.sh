#!/usr/bin/env bash
# The Qwen3-layer benchmark of issue 12, in one device call (see docs/PERFORMANCE.md,
# "Qwen3 layer vs PyTorch (H200)"). Run from the repository root on the GPU machine, with the
# environment of scripts/gpu-roundtrip.sh's remote_env (that script's `remote-bench` mode does
# both):
#   1. for each shape BxS: `emmy trace --json` of every grouping the three structural fork
#      families can give (ops, FLOPs and bytes per structural key, for matching and floors), then
#      `emmy tune Qwen/Qwen3-Embedding-0.6B --layer 0 --batch B --seq S --backend cuda --json`;
#      then `emmy eval failures` of their database -> $OUT/failures.txt;
#   2. bench_torch.py: the ceilings, transformers' Qwen3DecoderLayer eager and torch.compile,
#      the per-kernel PyTorch counterparts, and the tables (qwen_table.py) -> $OUT/tables.md;
#   3. membound.py: the memory-bound kernels at 8192x1024 bf16 against a copy of the same bytes
#      (EMMY_BENCH_MEMBOUND=0 leaves them out) -> $OUT/membound.md, appended to tables.md;
#   4. optionally (EMMY_BENCH_MODEL=1) the tuning cost: all 28 layers from an empty database,
#      then the re-run (must launch nothing).
# Settings (environment):
#   EMMY_BENCH_EMMY      emmy binary (default $CARRY/bin/emmy, else build/bin/emmy)
#   EMMY_BENCH_SHAPES    BxS list (default 1x512,1x2048,8x512; "none": no layer tunes)
#   EMMY_BENCH_PATIENCE  --patience of each layer tune (default 2: at patience 1, B=1 S=512 took
#                        66 s on the H200; three shapes + PyTorch (~45 s a shape) must fit 600 s)
#   EMMY_BENCH_TUNE_TIMEOUT  seconds per layer tune before Ctrl-C (default 120). An interrupted
#                        tune's JSON has status "interrupted" and no kernels: that shape then
#                        shows PyTorch only. Pick a patience that finishes.
#   EMMY_BENCH_VERBOSE   1: each layer tune with -v, its whole output in $OUT/tune-bB-sS.log (the
#                        bench log keeps the last 40 lines either way): which groupings and kernels
#                        took the time of a slow tune
#   EMMY_BENCH_SAMPLES   PyTorch samples per measurement (default 100)
#   EMMY_BENCH_MODEL     1: also tune the whole model (default 0; needs its own device minutes)
#   EMMY_BENCH_MODEL_PATIENCE (default EMMY_BENCH_PATIENCE), EMMY_BENCH_MODEL_SEQ (default 512),
#   EMMY_BENCH_MODEL_TIMEOUT (first run, default 500), EMMY_BENCH_MODEL_RERUN_TIMEOUT (default 60):
#   the model tune needs its own call: EMMY_BENCH_SHAPES=none EMMY_BENCH_MODEL=1
#   EMMY_BENCH_MEMBOUND  1 (default): also the memory-bound kernels at ROWSx1024 bf16 against a copy
#                        of the same bytes (membound.py; EMMY_BENCH_MEMBOUND_ROWS default 8192,
#                        EMMY_BENCH_MEMBOUND_PATIENCE default 50, EMMY_BENCH_MEMBOUND_TIMEOUT s per
#                        tune, default 150); alone: EMMY_BENCH_SHAPES=none
#   EMMY_BENCH_BACKEND   emmy's backend (default cuda; cpu runs the Emmy half without a GPU)
#   EMMY_BENCH_TUNE_ARGS more `emmy tune` (and `emmy trace`) arguments for the layer tunes, split
#                        on spaces, e.g. "--pass-option fuse_matmul_prologue.backends=cuda" (the
#                        RMSNorms absorbed by the products reading them, offered on request)
#   EMMY_BENCH_PY        python with torch + transformers (default /opt/torch/.venv/bin/python3)
set -uo pipefail
cd "$(dirname "$0")/../.."
HERE=bench/qwen_layer
OUT=${OUT:-/tmp/emmy-bench-out}
mkdir -p "$OUT"
EMMY=${EMMY_BENCH_EMMY:-${CARRY:+$CARRY/bin/emmy}}
[[ -n $EMMY && -x $EMMY ]] || EMMY=build/bin/emmy
SHAPES=${EMMY_BENCH_SHAPES:-1x512,1x2048,8x512}
[[ $SHAPES == none ]] && SHAPES=""  # ceilings (and the model tune) only
PATIENCE=${EMMY_BENCH_PATIENCE:-2}
TUNE_TIMEOUT=${EMMY_BENCH_TUNE_TIMEOUT:-120}
PY=${EMMY_BENCH_PY:-/opt/torch/.venv/bin/python3}
[[ -x $PY ]] || PY=python3
BACKEND=${EMMY_BENCH_BACKEND:-cuda}
MODEL=Qwen/Qwen3-Embedding-0.6B
CONFIG=plugins/frontends/hf/configs/$MODEL/config.json
WORK=$(mktemp -d /tmp/qwen-bench.XXXXXX)
LOG=$OUT/bench.log
export PYTHONUNBUFFERED=1

log() { echo "$*" | tee -a "$LOG"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# A fresh home: the layer tunes start from an empty database and compile cache.
export EMMY_HOME=${EMMY_BENCH_HOME:-/tmp/emmy-bench-home}
export EMMY_DB=$EMMY_HOME/tuning.db
rm -rf "$EMMY_HOME"
mkdir -p "$EMMY_HOME"

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  echo "emmy: $EMMY; python: $PY; shapes $SHAPES; patience $PATIENCE"
} 2>&1 | tee "$LOG"

for shape in ${SHAPES//,/ }; do
  b=${shape%x*}
  s=${shape#*x}
  # Every grouping of the three structural fork families, so that any kernel the tuner picks
  # has its ops, FLOPs and bytes (CPU only, well under a second each).
  # With EMMY_BENCH_TUNE_ARGS offering the norms' absorption, its kernels too (the fork
  # answered where it is not offered only warns).
  read -r -a extra <<<"${EMMY_BENCH_TUNE_ARGS:-}"
  i=0
  for h in fuse split; do
    for a in fused split; do
      for e in fuse split; do
        for p in separate absorbed; do
          absorb=()
          if [[ $p == absorbed ]]; then
            [[ -z ${EMMY_BENCH_TUNE_ARGS:-} ]] && continue
            absorb=(--fork fuse_matmul_prologue=absorbed --fork fuse_gated_epilogue=absorbed)
          fi
          "$EMMY" trace "$MODEL" --layer 0 --batch "$b" --seq "$s" --backend "$BACKEND" --json \
            --fork fuse_horizontal=$h --fork fuse_attention=$a --fork fuse_epilogue=$e \
            "${absorb[@]}" "${extra[@]}" \
            >"$WORK/trace-b$b-s$s-$i.json" 2>>"$LOG" || log "trace $h/$a/$e/$p failed"
          i=$((i + 1))
        done
      done
    done
  done
  cmd=("$EMMY" tune "$MODEL" --layer 0 --batch "$b" --seq "$s" --backend "$BACKEND" --patience "$PATIENCE"
       --no-progress --json "$WORK/tune-b$b-s$s.json" "${extra[@]}")
  full=/dev/null  # where the tune's whole output goes: $OUT only with EMMY_BENCH_VERBOSE=1
  [[ ${EMMY_BENCH_VERBOSE:-0} == 1 ]] && cmd+=(-v) && full=$OUT/tune-b$b-s$s.log
  log "== ${cmd[*]}"
  t0=$(now)
  # SIGINT first: emmy stops cleanly, keeps what it measured and writes its JSON (status
  # "interrupted"). --foreground: only emmy gets it; without it timeout also signals the process
  # group, and a second SIGINT ends emmy at once (emmy's handler restores the default action);
  # the likely cause of a model tune on the H200 that left no JSON and no message.
  timeout --foreground -s INT -k 30 "$TUNE_TIMEOUT" "${cmd[@]}" 2>&1 | tee "$full" |
    tail -40 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  log "wall $(elapsed "$t0" "$(now)") s (rc $rc)"
  # Every measured configuration of the tuned kernels, so the table can show what each competing
  # template (Emmy's generated matmul, cublaslt) reached for each kernel, not only the winner.
  "$PY" - "$EMMY" "$WORK/tune-b$b-s$s.json" "$WORK/variants-b$b-s$s.json" <<'PY' 2>>"$LOG"
import json, subprocess, sys
emmy, report, out = sys.argv[1:4]
try:
    kernels = json.load(open(report)).get("kernels", [])
except (OSError, ValueError):
    kernels = []
groups = []
for k in kernels:
    r = subprocess.run([emmy, "eval", "variants", "--kernel", k["key"], "--json", "--limit", "0"],
                       capture_output=True, text=True)
    if r.returncode == 0:
        groups += [g for g in json.loads(r.stdout) if g.get("structural_key") == k["key"]]
json.dump(groups, open(out, "w"))
PY
done

# What failed or was refused in the layer tunes, grouped by kind with the knob values the rows
# share (the home is gone after the call; the summary line only counts them).
if [[ $SHAPES != none ]]; then
  "$EMMY" eval failures >"$OUT/failures.txt" 2>&1 || log "emmy eval failures failed"
  log "== failures and refusals: $OUT/failures.txt ($(wc -l <"$OUT/failures.txt") lines)"
fi

log "== PyTorch side: $PY $HERE/bench_torch.py"
t0=$(now)
"$PY" "$HERE/bench_torch.py" --shapes "$SHAPES" --emmy-dir "$WORK" --config "$CONFIG" \
  --samples "${EMMY_BENCH_SAMPLES:-100}" --out "$OUT" 2>&1 | tee -a "$LOG"
log "wall $(elapsed "$t0" "$(now)") s"

# The memory-bound kernels at 8192x1024 bf16 (issue 19): Emmy's tuned RMSNorm, SiLU*mul and
# residual add (each exported with torch.export and tuned through the pt2 frontend) against a
# copy of the same bytes, eager and torch.compile, same process; their cubins' SASS summary.
if [[ ${EMMY_BENCH_MEMBOUND:-1} == 1 ]]; then
  log "== memory-bound kernels: $PY $HERE/membound.py"
  t0=$(now)
  "$PY" "$HERE/membound.py" --emmy "$EMMY" --work "$WORK" --out "$OUT" \
    --rows "${EMMY_BENCH_MEMBOUND_ROWS:-8192}" --patience "${EMMY_BENCH_MEMBOUND_PATIENCE:-50}" \
    --tune-timeout "${EMMY_BENCH_MEMBOUND_TIMEOUT:-150}" --samples "${EMMY_BENCH_SAMPLES:-100}" 2>&1 | tee -a "$LOG"
  [[ -f $OUT/membound.md ]] && { echo; cat "$OUT/membound.md"; } >>"$OUT/tables.md"
  "$PY" "$HERE/sass_summary.py" "$EMMY_HOME/cache/cuda" "$WORK"/membound-*.json --others 2 \
    >"$OUT/membound-sass.md" 2>&1 || echo "sass_summary failed (rc $?)" >>"$OUT/membound-sass.md"
  log "wall $(elapsed "$t0" "$(now)") s; disassembly: $OUT/membound-sass.md"
fi

if [[ ${EMMY_BENCH_MODEL:-0} == 1 ]]; then
  # Tuning cost from an empty database (its own home: no database, compile cache or prior).
  export EMMY_HOME=$EMMY_HOME-model
  export EMMY_DB=$EMMY_HOME/tuning.db
  rm -rf "$EMMY_HOME"
  mkdir -p "$EMMY_HOME"
  mp=${EMMY_BENCH_MODEL_PATIENCE:-$PATIENCE}
  cmd=("$EMMY" tune "$MODEL" --seq "${EMMY_BENCH_MODEL_SEQ:-512}" --backend "$BACKEND" --patience "$mp" --no-progress)
  walls=()
  declare -A limit=([first]=${EMMY_BENCH_MODEL_TIMEOUT:-500} [rerun]=${EMMY_BENCH_MODEL_RERUN_TIMEOUT:-60})
  for run in first rerun; do
    log "== ($run) ${cmd[*]}"
    t0=$(now)
    timeout --foreground -s INT -k 30 "${limit[$run]}" "${cmd[@]}" --json "$WORK/model-$run.json" 2>&1 |
      tail -25 | tee -a "$LOG"
    rc=${PIPESTATUS[0]}
    walls+=("$(elapsed "$t0" "$(now)")")
    log "wall ${walls[-1]} s (rc $rc)"
  done
  "$PY" "$HERE/qwen_table.py" model-cost "$WORK/model-first.json" "$WORK/model-rerun.json" \
    "${walls[0]}" "${walls[1]}" "emmy tune $MODEL --seq ${EMMY_BENCH_MODEL_SEQ:-512} --backend $BACKEND --patience $mp" |
    tee -a "$LOG" "$OUT/tables.md"
fi

# The Emmy reports and traces travel back as one file (the device tool returns at most 8).
"$PY" - "$WORK" "$OUT/emmy-reports.json" <<'PY'
import glob, json, os, sys
out = {}
for p in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    try:
        out[os.path.basename(p)] = json.load(open(p))
    except (OSError, ValueError) as e:
        out[os.path.basename(p)] = {"error": str(e)}
json.dump(out, open(sys.argv[2], "w"), indent=1)
PY
# Disassembly evidence (issue 12): per shape, the cubins its tune compiled (the home and its
# compile cache are shared by the shapes: a shape's cubins are those written after the previous
# shape's report and before its own) with the kernels it chose marked; -> $OUT/sass.md.
# ${EMMY_HOME%-model}: the layer tunes' home, also after the model tune moved EMMY_HOME.
sass_after=()
: >"$OUT/sass.md"
for shape in ${SHAPES//,/ }; do
  report=$WORK/tune-b${shape%x*}-s${shape#*x}.json
  printf '## B=%s S=%s: %s\n\n' "${shape%x*}" "${shape#*x}" "${EMMY_HOME%-model}/cache/cuda" >>"$OUT/sass.md"
  if [[ -f $report ]]; then
    "$PY" "$HERE/sass_summary.py" "${EMMY_HOME%-model}/cache/cuda" "$report" "${sass_after[@]}" \
      --before "$report" >>"$OUT/sass.md" 2>&1 || echo "sass_summary failed (rc $?)" >>"$OUT/sass.md"
    sass_after=(--after "$report")
  else
    echo "no tune report ($report): nothing to summarize" >>"$OUT/sass.md"
  fi
done
log "== disassembly: $OUT/sass.md ($(grep -c '^| ' "$OUT/sass.md") table lines)"
log "== tables: $OUT/tables.md"
