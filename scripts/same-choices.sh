#!/usr/bin/env bash
# Checks that a change of Emmy's code leaves its choices alone (issue 23: "the run description's
# example and the Qwen layer tune choose the same configurations over the same database").
#
#   scripts/same-choices.sh record DIR
# with the build before the change, from an empty home: the run description's `--code` product,
# then the Qwen3 layer; keeps each report (DIR/code.json, DIR/layer.json) and the home as it was
# right after each command (DIR/home-code.tgz, DIR/home-layer.tgz; the compile cache left out)
# and its path (DIR/home-path: a run's identity names its database, so a re-run is identical only
# in the same place; EMMY_SAME_HOME, default /tmp/emmy-same-choices, emptied first).
#   scripts/same-choices.sh check DIR
# with the build after the change: each command again, over a copy of the home its recorded run
# left. Passes when each launches nothing (every candidate it reaches is already in the database,
# so the search walked the recorded path) and chooses the same kernels: same structural keys,
# templates, configurations and best times. Exit 1 otherwise, naming what differs.
#
# EMMY: the emmy binary (default build/bin/emmy). EMMY_SAME_ARGS: options added to both commands
# (e.g. "--backend cpu --patience 3"), EMMY_SAME_LAYER_ARGS: to the layer's (default "--layer 0";
# on the CPU e.g. "--layer 0 --seq 8"), EMMY_SAME_CODE: the --code expression (default the run
# description's product on the GPU). The defaults are the run description's two commands exactly.
set -euo pipefail
mode=${1:-}
dir=${2:-}
if [[ $mode != record && $mode != check ]] || [[ -z $dir ]]; then
  echo "usage: $0 record|check DIR" >&2
  exit 2
fi
emmy=${EMMY:-build/bin/emmy}
code=${EMMY_SAME_CODE:-"torch.matmul(torch.randn(512,512,device='cuda'), torch.randn(512,512,device='cuda'))"}
read -r -a extra <<<"${EMMY_SAME_ARGS:-}"
read -r -a layer_args <<<"${EMMY_SAME_LAYER_ARGS:---layer 0}"
code_cmd=("$emmy" tune --code "$code" --patience 10 "${extra[@]}")
layer_cmd=("$emmy" tune Qwen/Qwen3-Embedding-0.6B "${layer_args[@]}" "${extra[@]}")
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# Runs one command in home $1 (its database the home's), report to $2; the log beside it.
tune_in() {
  local home=$1 report=$2
  shift 2
  echo "== $*" | tee "$report.log"
  EMMY_HOME=$home EMMY_DB=$home/tuning.db "$@" --no-progress --json "$report" >>"$report.log" 2>&1 ||
    { tail -20 "$report.log"; return 1; }
  tail -3 "$report.log"
}

snapshot() { tar czf "$2" -C "$1" --exclude=./cache .; }

if [[ $mode == record ]]; then
  home=${EMMY_SAME_HOME:-/tmp/emmy-same-choices}
  rm -rf "$home" && mkdir -p "$home"
  echo "$home" >"$dir/home-path"
  tune_in "$home" "$dir/code.json" "${code_cmd[@]}"
  snapshot "$home" "$dir/home-code.tgz"
  tune_in "$home" "$dir/layer.json" "${layer_cmd[@]}"
  snapshot "$home" "$dir/home-layer.tgz"
  rm -rf "$home"
  echo "recorded under $dir"
  exit 0
fi

home=$(cat "$dir/home-path")
status=0
for what in code layer; do
  rm -rf "$home" && mkdir -p "$home"
  tar xzf "$dir/home-$what.tgz" -C "$home"
  declare -n cmd=${what}_cmd
  tune_in "$home" "$dir/$what-check.json" "${cmd[@]}" || status=1
  unset -n cmd
  rm -rf "$home"
  python3 - "$dir/$what.json" "$dir/$what-check.json" "$what" <<'PY' || status=1
import json, sys
recorded, again, what = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
def chosen(r):
    return sorted((k["key"], k["name"], k["template"], k["config"], round(k["best_deploy_us"], 3))
                  for k in r["kernels"])
problems = []
if again["launches"] != 0:
    problems.append(f"{again['launches']} launches (a new path through the database)")
a, b = chosen(recorded), chosen(again)
for k in sorted(set(a) ^ set(b)):
    problems.append(("recorded only: " if k in a else "now only: ") + " | ".join(map(str, k)))
if round(recorded["best_total_us"], 3) != round(again["best_total_us"], 3):
    problems.append(f"total {recorded['best_total_us']} -> {again['best_total_us']}")
if problems:
    print(f"{what}: DIFFERENT\n  " + "\n  ".join(problems))
    sys.exit(1)
print(f"{what}: same choices ({len(b)} kernels, total {again['best_total_us']:.3f} us, "
      f"0 launches, {again['cache_hits']} cache hits)")
PY
done
exit $status
