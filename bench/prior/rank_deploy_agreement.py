#!/usr/bin/env python3
"""How well one table's times order each kernel's configurations the way another table's do.

    rank_deploy_agreement.py RANK.jsonl DEPLOY.jsonl [--json]

The two tables are prior tables (prior_table.hpp: one JSON object per measured row) of the same
kernels and configurations, typically a rank-regime and a deploy-regime table measured by
`emmy-prior-measure` with the same --seed and --per-kernel. Rows are paired by kernel and knobs.
Per op class (the kernel name's first word): the mean over kernels of the Spearman correlation of
the two tables' times within the kernel. Over all kernels: the mean of (deploy best / deploy time
of the configuration the first table ranks fastest), the share of the best deployable time a
search that steers by the first table would keep; and the median ratio of the first table's time
to the second's. Two deploy tables measured apart give the noise ceiling of these figures.
Standard library only.
"""
import argparse
import collections
import json
import sys


def load(path):
    rows = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                rows[(r["kernel"], json.dumps(r["knobs"], sort_keys=True))] = float(r["time_us"])
            except (ValueError, KeyError, TypeError) as e:
                raise SystemExit(f"{path}:{n}: not a prior row ({e})")
    return rows


def ranks(values):
    # Average ranks for ties, so equal times do not decide the correlation by their order.
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2
        i = j + 1
    return out


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return num / den if den else 0.0


def agreement(first, second):
    pairs = collections.defaultdict(list)
    for key, t in first.items():
        if key in second:
            pairs[key[0]].append((t, second[key]))
    if not pairs:
        raise SystemExit("the two tables have no (kernel, knobs) row in common")
    by_class = collections.defaultdict(list)
    kept, ratios = [], []
    for kernel, v in sorted(pairs.items()):
        ratios += [a / b for a, b in v]
        if len(v) < 3:
            continue
        by_class[kernel.split("_")[0]].append(spearman([a for a, _ in v], [b for _, b in v]))
        steered = min(v)[1]  # the second table's time of the first table's fastest
        kept.append(min(b for _, b in v) / steered)
    ratios.sort()
    return {
        "kernels": len(kept),
        "rows": sum(len(v) for v in pairs.values()),
        "spearman_within_kernel": {c: sum(v) / len(v) for c, v in sorted(by_class.items())},
        "kept_of_best": sum(kept) / len(kept) if kept else None,
        "median_ratio": ratios[len(ratios) // 2],
    }


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("first")
    ap.add_argument("second")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    r = agreement(load(a.first), load(a.second))
    if a.json:
        print(json.dumps(r, indent=1))
        return 0
    print(f"{r['rows']} paired rows, {r['kernels']} kernels")
    for c, rho in r["spearman_within_kernel"].items():
        print(f"  {c:10s} mean within-kernel Spearman {rho:.3f}")
    print(f"  share of the best kept by steering with the first table: {r['kept_of_best']:.3f}")
    print(f"  median first / second time: {r['median_ratio']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
