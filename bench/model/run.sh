#!/usr/bin/env bash
# The whole-model benchmark of issue 22 (item 4), on the GPU machine; README.md beside this says
# what each step measures and how long it takes. Run from the repository root with the
# environment of scripts/gpu-roundtrip.sh's remote_env (its `remote-model-bench` mode does both,
# and builds the LibTorch plugins and libemmy_torch first):
#   tune     per shape BxS: `emmy tune Qwen/Qwen3-Embedding-0.6B --batch B --seq S --backend cuda`
#            (the whole model: no --layer) into EMMY_MODEL_HOME, kept between calls of a warm
#            machine: a shape already tuned there is a re-run that measures nothing new; its
#            report, its whole output, `emmy eval failures` and every configuration measured for
#            each chosen kernel (`emmy eval variants`) -> $OUT/tune-bB-sS.{json,log},
#            $OUT/failures-bB-sS.log, $OUT/variants-bB-sS.log
#   export   per shape: `emmy export` of the same into $WORK/model-bB-sS.emmy (wall time kept)
#   bench    bench_model.py: each export loaded through the PyTorch op, checked against
#            transformers' Qwen3Model (cosine >= 0.999, same random weights, bf16) and timed
#            against transformers eager and torch.compile -> $OUT/model.md, $OUT/model.json
# Settings (environment):
#   EMMY_MODEL_STEPS      which steps (default "tune export bench")
#   EMMY_MODEL_SHAPES     BxS list (default 1x512,8x512)
#   EMMY_MODEL_PATIENCE   --patience of each tune (default 4: at B=8 the tune takes as long as at 2,
#                         its wall being the reference and the validation, and measures all of
#                         cuBLASLt's algorithms of the large products; docs/PERFORMANCE.md)
#   EMMY_MODEL_TUNE_TIMEOUT  seconds per tune before Ctrl-C (default 330): an interrupted tune
#                         keeps what it measured; run the step again to continue from it
#   EMMY_MODEL_HOME       the tuning home (default /tmp/emmy-model-home; EMMY_MODEL_FRESH=1 empties it)
#   EMMY_MODEL_WORK       where the exports go (default /tmp/emmy-model-work; a folder per model)
#   EMMY_MODEL_SAMPLES    samples per timing (default 20)
#   EMMY_MODEL_ROUNDS     alternating rounds of Emmy's and torch.compile's graph replays (default 5)
#   EMMY_MODEL_INTERLEAVED  samples of each, the two graphs' replays interleaved ABBA (default 60)
#   EMMY_MODEL_WEIGHTS    a model.safetensors or its folder (default: random weights)
#   EMMY_MODEL_EXTRA      more `emmy tune` options, e.g. "--prior roofline"
#   EMMY_MODEL_SOURCE     the model (default Qwen/Qwen3-Embedding-0.6B; bench/model/tiny-qwen3 for
#                         a smoke test: EMMY_MODEL_SHAPES=1x64, about a minute)
#   EMMY_MODEL_BACKEND    emmy's backend (default cuda; cpu runs the tune and export steps here,
#                         e.g. EMMY_MODEL_SHAPES=1x8, as a dry run of this script)
#   EMMY_BENCH_EMMY, EMMY_BENCH_PY as bench/qwen_layer/run.sh (binary; python with torch +
#   transformers, default /opt/torch/.venv/bin/python3)
#   EMMY_TORCH_LIBRARY    libemmy_torch.so (default $CARRY/lib/libemmy_torch.so, else build/lib/)
set -uo pipefail
cd "$(dirname "$0")/../.."
HERE=bench/model
OUT=${OUT:-/tmp/emmy-bench-out}
mkdir -p "$OUT"
EMMY=${EMMY_BENCH_EMMY:-${CARRY:+$CARRY/bin/emmy}}
[[ -n $EMMY && -x $EMMY ]] || EMMY=build/bin/emmy
PY=${EMMY_BENCH_PY:-/opt/torch/.venv/bin/python3}
[[ -x $PY ]] || PY=python3
STEPS=" ${EMMY_MODEL_STEPS:-tune export bench} "
SHAPES=${EMMY_MODEL_SHAPES:-1x512,8x512}
PATIENCE=${EMMY_MODEL_PATIENCE:-4}
TUNE_TIMEOUT=${EMMY_MODEL_TUNE_TIMEOUT:-330}
# EMMY_MODEL_SOURCE: another model, e.g. bench/model/tiny-qwen3 (2 small layers: a smoke test of
# the whole flow in about a minute before the real model's calls).
MODEL=${EMMY_MODEL_SOURCE:-Qwen/Qwen3-Embedding-0.6B}
CONFIG=plugins/frontends/hf/configs/$MODEL/config.json
[[ -f $MODEL/config.json ]] && CONFIG=$MODEL/config.json
# One folder per model: a smoke test's exports never stand in for the real model's.
WORK=${EMMY_MODEL_WORK:-/tmp/emmy-model-work}/$(basename "$MODEL")
LIB=${EMMY_TORCH_LIBRARY:-${CARRY:+$CARRY/lib/libemmy_torch.so}}
[[ -n $LIB && -f $LIB ]] || LIB=build/lib/libemmy_torch.so
LOG=$OUT/model-bench.log
export PYTHONUNBUFFERED=1
export EMMY_HOME=${EMMY_MODEL_HOME:-/tmp/emmy-model-home}
export EMMY_DB=$EMMY_HOME/tuning.db
[[ ${EMMY_MODEL_FRESH:-0} == 1 ]] && rm -rf "$EMMY_HOME"
mkdir -p "$EMMY_HOME" "$WORK"
# shellcheck disable=SC2206  # EMMY_MODEL_EXTRA is a list of options
EXTRA=(${EMMY_MODEL_EXTRA:-})

log() { echo "$*" | tee -a "$LOG"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  echo "emmy: $EMMY; python: $PY; libemmy_torch: $LIB; steps:$STEPS; shapes $SHAPES; patience $PATIENCE; home $EMMY_HOME"
} 2>&1 | tee -a "$LOG"

# Wall times of the steps, per shape, for the table (bench_model.py reads $WORK/steps.json).
STEPS_JSON=$WORK/steps.json
[[ -f $STEPS_JSON ]] || echo '{}' >"$STEPS_JSON"
record() {  # SHAPE KEY SECONDS
  "$PY" - "$STEPS_JSON" "$1" "$2" "$3" <<'PY'
import json, sys
path, shape, key, value = sys.argv[1:5]
d = json.load(open(path))
d.setdefault(shape, {})[key] = float(value)
json.dump(d, open(path, "w"), indent=1)
PY
}

status=0
for shape in ${SHAPES//,/ }; do
  b=${shape%x*} s=${shape#*x}
  source_opts=("$MODEL" --batch "$b" --seq "$s" --backend "${EMMY_MODEL_BACKEND:-cuda}")
  if [[ $STEPS == *" tune "* ]]; then
    cmd=("$EMMY" tune "${source_opts[@]}" --patience "$PATIENCE" --no-progress "${EXTRA[@]}"
         --json "$OUT/tune-b$b-s$s.json")
    log "== ${cmd[*]}"
    t0=$(now)
    # SIGINT first and --foreground, as bench/qwen_layer/run.sh: emmy stops cleanly and keeps
    # what it measured.
    # The whole output is kept beside the report (tune-bBsS.log); the bench's log gets its end.
    timeout --foreground -s INT -k 30 "$TUNE_TIMEOUT" "${cmd[@]}" 2>&1 |
      tee "$OUT/tune-b$b-s$s.log" | tail -30 | tee -a "$LOG"
    rc=${PIPESTATUS[0]}
    t=$(elapsed "$t0" "$(now)")
    log "tune wall $t s (rc $rc)"
    # What failed, and why (the report counts them only).
    "$EMMY" eval failures >"$OUT/failures-b$b-s$s.log" 2>&1 || true
    # Every configuration measured for each kernel of the chosen grouping (by structural key: a
    # name may hold '+'), e.g. which cuBLASLt algorithms the search reached and what each took;
    # the database itself stays on the machine.
    "$PY" - "$OUT/tune-b$b-s$s.json" <<'PY' 2>/dev/null |
import json, sys
for k in json.load(open(sys.argv[1])).get("kernels", []):
    print(k["key"])
PY
      while read -r key; do
        "$EMMY" eval variants --kernel "$key" --limit 0 || true
      done >"$OUT/variants-b$b-s$s.log" 2>&1
    record "b$b-s$s" tune_s "$t"
    ((rc == 0)) || status=1
  fi
  if [[ $STEPS == *" export "* ]]; then
    t0=$(now)
    "$EMMY" export "${source_opts[@]}" --out "$WORK/model-b$b-s$s.emmy" 2>&1 | tail -5 | tee -a "$LOG"
    rc=${PIPESTATUS[0]}
    t=$(elapsed "$t0" "$(now)")
    log "export wall $t s (rc $rc); $(du -sh "$WORK/model-b$b-s$s.emmy" 2>/dev/null | cut -f1) on disk"
    ls -l "$WORK/model-b$b-s$s.emmy" 2>&1 | tee -a "$LOG"
    record "b$b-s$s" export_s "$t"
    ((rc == 0)) || status=1
  fi
done

if [[ $STEPS == *" bench "* ]]; then
  log "== $PY $HERE/bench_model.py"
  PYTHONPATH=$(dirname "$LIB")${PYTHONPATH:+:$PYTHONPATH} "$PY" "$HERE/bench_model.py" \
    --shapes "$SHAPES" --exports "$WORK" --config "$CONFIG" --library "$LIB" \
    --samples "${EMMY_MODEL_SAMPLES:-20}" --rounds "${EMMY_MODEL_ROUNDS:-5}" \
    --interleaved "${EMMY_MODEL_INTERLEAVED:-60}" \
    ${EMMY_MODEL_WEIGHTS:+--weights "$EMMY_MODEL_WEIGHTS"} \
    --out "$OUT" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  log "bench_model.py exit $rc"
  ((rc == 0)) || status=1
fi
exit $status
