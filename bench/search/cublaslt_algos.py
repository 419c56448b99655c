#!/usr/bin/env python3
"""cuBLASLt's algorithms beside their measured times: which attributes of an algorithm could tell
the prior what its `algo` index does not (issue 24).

Joins the lines `cuda_cublaslt_describe_gpu_test` prints (the algorithm behind each index:
"[ lt-algo  ] qkv M=4096 N=4096 K=1024 workspace=32 algo=4 waves=... tile=... stages=... ...")
with the pooled times of the same indices in search benchmark reports (the cuda suite's products,
e.g. qkv_b8s512 = M 4096, N 4096, K 1024), and prints per product each index's time relative to
the best cuBLASLt index and its attributes, tile and stages decoded from cublasLt.h's enums.

  # device: run(command="bash scripts/gpu-roundtrip.sh remote-tests 'CublasLtDescribeGpu.*'", ...)
  python3 bench/search/cublaslt_algos.py <files_at>/gpu-tests.log \\
    bench/search/data/cuda_h100_20261206_random_prior_b8.json bench/search/data/cuda_h100_20261206_random_prior_b1.json
"""
import argparse
import json
import re
import statistics
import sys

from table_from_bench import parse_config, trajectories

# The cuda suite's products (bench/search/search_bench.py, SUITES["cuda"]) by shape.
SUITE_PRODUCTS = {
    "qkv_b1s512": (512, 4096, 1024), "o_proj_b1s512": (512, 1024, 2048),
    "gate_up_b1s512": (512, 6144, 1024), "down_b1s512": (512, 1024, 3072),
    "qkv_b8s512": (4096, 4096, 1024), "o_proj_b8s512": (4096, 1024, 2048),
    "gate_up_b8s512": (4096, 6144, 1024), "down_b8s512": (4096, 1024, 3072),
}

LINE = re.compile(r"\[ lt-algo\s*\]\s+(\S+)\s+M=(\d+)\s+N=(\d+)\s+K=(\d+)\s+workspace=(\d+)\s+algo=(\d+)\s+(.*)")


def enum_names(header, prefix):
    """{value: name suffix} of a cublasLt.h enum whose members start with `prefix`."""
    names = {}
    try:
        with open(header) as f:
            for m in re.finditer(r"\b" + prefix + r"([0-9A-Za-z_]+)\s*=\s*(\d+)", f.read()):
                names.setdefault(int(m.group(2)), m.group(1))
    except OSError:
        pass
    return names


def descriptions(log):
    """{(M, N, K, workspace, algo): {attribute: value}}; a refused index is absent."""
    out = {}
    with open(log, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if not m or "=" not in m.group(7).split()[0]:
                continue
            attrs = dict(kv.split("=", 1) for kv in m.group(7).split() if "=" in kv)
            key = tuple(int(m.group(i)) for i in (2, 3, 4, 5, 6))
            out[key] = attrs
    return out


def measured(reports):
    """{(M, N, K): {(algo, workspace): median pooled us}} over every mode's trajectory."""
    times = {}
    for path in reports:
        with open(path) as f:
            report = json.load(f)
        for kernel in report["kernels"]:
            shape = SUITE_PRODUCTS.get(kernel["name"])
            if not shape:
                continue
            for mode in kernel["modes"].values():
                for point in trajectories(mode):
                    templ, knobs = parse_config(point.get("config") or "")
                    us = point.get("pooled_us") or point.get("rank_us")
                    if templ != "cublaslt" or not us:
                        continue
                    key = (int(knobs["algo"]), int(knobs["workspace"]))
                    times.setdefault(shape, {}).setdefault(key, []).append(us)
    return {s: {k: statistics.median(v) for k, v in t.items()} for s, t in times.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="output of cuda_cublaslt_describe_gpu_test (gpu-tests.log)")
    ap.add_argument("reports", nargs="+", help="search benchmark reports (search_bench.json)")
    ap.add_argument("--header", default="/usr/local/cuda/include/cublasLt.h",
                    help="cublasLt.h, to name the tile and stages enums")
    a = ap.parse_args(argv)
    tiles = enum_names(a.header, "CUBLASLT_MATMUL_TILE_")
    stages = enum_names(a.header, "CUBLASLT_MATMUL_STAGES_")
    algos = descriptions(a.log)
    if not algos:
        sys.exit(f"{a.log}: no '[ lt-algo ]' line with a description")
    times = measured(a.reports)
    for shape in sorted(times):
        best = min(times[shape].values())
        print(f"\nM={shape[0]} N={shape[1]} K={shape[2]}: best cuBLASLt {best:.2f} us")
        print("| algo | workspace | time / best | waves | tile | stages | splitk | reduction | swizzle | custom | cluster |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for (algo, ws), us in sorted(times[shape].items(), key=lambda kv: kv[1]):
            d = algos.get(shape + (ws, algo), {})
            tile = tiles.get(int(d["tile"]), d["tile"]) if "tile" in d else "?"
            stage = stages.get(int(d["stages"]), d["stages"]) if "stages" in d else "?"
            print(f"| {algo} | {ws} | {us / best:.3f} | {d.get('waves', '?')} | {tile} | {stage} | "
                  f"{d.get('splitk', '?')} | {d.get('reduction', '?')} | {d.get('swizzle', '?')} | "
                  f"{d.get('custom', '?')} | {d.get('cluster', '?')} |")


if __name__ == "__main__":
    main()
