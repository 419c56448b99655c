#!/usr/bin/env python3
"""A prior table (bench/prior's format, one JSON row per line) of the configurations a search
benchmark measured for one kernel, for emmy-search-replay.

Every point of every mode's trajectory (and every baseline run's) that has a rank time becomes a
row; a configuration measured in several modes gets several rows (the replay takes their
median). The kernel's features (dtype, shape, FLOPs, bytes) are not in the benchmark's report:
they are copied from a row of the table the shipped prior was trained on (--features-from,
--features-kernel), so the replayed prior is asked exactly as the real search asked it.

  python3 bench/search/table_from_bench.py \\
    bench/search/data/cuda_h100_20261205_template_features_gate_up_rmsnorm.json rmsnorm_b1s512 \\
    --features-from bench/prior/data/cuda_h100.jsonl \\
    --features-kernel 'reduction_bf16[512x1024]_2098176_3147776' --out /tmp/rmsnorm_b1s512.jsonl
"""
import argparse
import json
import sys


def parse_config(config):
    """'reduction|block=256;vec=8' -> ('reduction', {'block': 256.0, 'vec': 8.0})."""
    templ, _, knobs = config.partition("|")
    values = {}
    for part in filter(None, knobs.split(";")):
        name, _, value = part.partition("=")
        values[name] = float(value)
    return templ, values


def trajectories(mode):
    for run in mode.get("runs") or [mode]:
        yield from run.get("trajectory") or []


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bench", help="a search benchmark report (search_bench.json)")
    ap.add_argument("kernel", help="the suite kernel's name in it (e.g. rmsnorm_b1s512)")
    ap.add_argument("--features-from", required=True, help="a prior table holding the kernel")
    ap.add_argument("--features-kernel", required=True, help="its kernel name in that table")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    with open(a.bench) as f:
        report = json.load(f)
    kernel = next((k for k in report["kernels"] if k["name"] == a.kernel), None)
    if kernel is None:
        sys.exit(f"{a.bench} has no kernel {a.kernel!r}: "
                 f"{', '.join(k['name'] for k in report['kernels'])}")
    features = None
    with open(a.features_from) as f:
        for line in f:
            row = json.loads(line)
            if row.get("kernel") == a.features_kernel:
                features = row
                break
    if features is None:
        sys.exit(f"{a.features_from} has no row of kernel {a.features_kernel!r}")

    rows = []
    for mode in kernel["modes"].values():
        for point in trajectories(mode):
            if not point.get("config") or not point.get("rank_us"):
                continue
            templ, knobs = parse_config(point["config"])
            rows.append({"kernel": a.kernel, "op_class": templ, "dtype": features["dtype"],
                         "shape": features["shape"], "flops": features["flops"],
                         "bytes": features["bytes"], "regime": "rank",
                         "time_us": point["rank_us"], "knobs": knobs})
    if not rows:
        sys.exit(f"{a.bench}: kernel {a.kernel} has no measured point with a configuration")
    with open(a.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    configs = {(r["op_class"], tuple(sorted(r["knobs"].items()))) for r in rows}
    print(f"{a.out}: {len(rows)} rows, {len(configs)} configurations")


if __name__ == "__main__":
    main()
