"""Pure part of the search benchmark (issue 24, item 1): what a kernel's search trajectory says
against a reference best, and the markdown tables. No emmy, no timing: search_bench.py runs the
tunes, this module only computes and formats, so that tests/bench_search can check it on any
machine.

A trajectory is the `trajectory` list of one entry of `searches` in `emmy tune --json`: one
point per candidate the kernel's inner search evaluated, in the order evaluated, each with its
rank time (`rank_us`, null when the candidate failed or was refused), its deploy time when it
was re-measured at deploy (`deploy_us`: candidates within 15 % of the best rank time so far are),
and whether it was served from the database (`cached`).

Three regimes, three sets of figures (REGIMES):
  deploy  what the tune delivers: a kernel is deployed as the configuration with the lowest
          deploy time among those re-measured at deploy. After evaluation i, the search would
          deliver the best deploy time among points 1..i.
  rank    what the search steers by: the rank time of every candidate. Rank builds are not
          deploy builds (cpu: -O2 -march=native against -O3 -march=native; until 2026-12-05
          rank was -O1, which ordered the matmul's configurations unlike deploy), so a search
          can do well on one and not the other.
  pooled  deploy, with each configuration at the median of every deploy measurement of it in the
          benchmark (all modes and runs of the kernel; points carry their configuration's key,
          `config`, in reports since 2026-12-05): one sample of a configuration is noisy, and
          the deploy reference, the lowest of hundreds of samples, is the luckiest of them, so
          "within 3 %" of it can be a matter of luck when the configurations near the best are
          within the noise of each other (cuBLASLt's algorithms on the H100, 2026-12-05). A
          point the search did not re-measure at deploy has no pooled time, as in deploy.
Figures per kernel, mode and regime:
  evaluations   candidates evaluated (the points of the trajectory): the search's budget
  benchmarks    of those, the ones that ran (not cached)
  best_us       the lowest time of the trajectory in that regime
  pct_of_ref    reference_us / best_us * 100: how close the search came to the reference best
  to_within     the 1-based number of evaluations after which the best so far is within
                `within_pct` % (3) of the reference best; None when it never is
A baseline mode run several times (flat and random with --baseline-runs K: seeds seed..seed+K-1,
since one run of a search that breaks ties or draws at random is one sample of how many
evaluations it needs) has the mean of its runs' figures, its runs' own figures under `per_run`,
and `never`, how many of its runs were never within 3 % (those count their whole budget in the
mean `to_within`, which is None only when no run got there).
The reference best of a kernel in a regime is the lowest time any run of the benchmark measured
for it (the reference run, 10 times p50's budget or exhaustive, nearly always), so that no mode
reads above 100 % merely because the reference run's own sample of a configuration was noisier.
"""

from __future__ import annotations

import math
import statistics

WITHIN_PCT = 3.0
REGIMES = ("deploy", "rank", "pooled")
REGIME_TITLES = {
    "deploy": "Delivered: the deploy time of the configuration each search would deploy",
    "rank": "Steered by: the rank time of the candidates each search measured",
    "pooled": "Delivered, pooled: each configuration at the median of every deploy measurement of "
              "it in the benchmark",
}
# The modes of a benchmark, in the order they run and appear in the table.
# r10 and r50 are p10 and p50 with `--search mcts-remaining`, so that one run compares the two
# searches on the same kernels against the same reference.
MODES = ("p10", "p50", "r10", "r50", "flat", "random", "ref")
MODE_TITLES = {
    "p10": "mcts, patience 10",
    "p50": "mcts, patience 50",
    "r10": "mcts-remaining, patience 10",
    "r50": "mcts-remaining, patience 50",
    "flat": "flat prior at p50's count",
    "random": "random at p50's count",
    "ref": "reference",
}


def times(trajectory: list[dict], regime: str = "rank") -> list[float | None]:
    """The time of each evaluation in `regime`, None where there is none (a failure; a candidate
    not re-measured at deploy)."""
    return [point_time(p, regime) for p in trajectory]


def point_time(p: dict, regime: str) -> float | None:
    """One point's time in `regime`, None where it has none."""
    t = p.get(regime + "_us")
    return float(t) if isinstance(t, (int, float)) and math.isfinite(t) and t > 0 else None


def pool(trajectories: list[list[dict]]) -> dict[str, float]:
    """Configuration key -> the median of its deploy measurements over `trajectories` (a cached
    point repeats a measurement of its run, not a new one: left out)."""
    samples: dict[str, list[float]] = {}
    for t in trajectories:
        for p in t:
            d = point_time(p, "deploy")
            if p.get("config") and d is not None and not p.get("cached"):
                samples.setdefault(p["config"], []).append(d)
    return {c: statistics.median(v) for c, v in samples.items()}


def add_pooled(trajectories: list[list[dict]], pooled: dict[str, float]) -> None:
    """Sets each point's `pooled_us`: its configuration's pooled time where the point was
    re-measured at deploy, else None."""
    for t in trajectories:
        for p in t:
            has = point_time(p, "deploy") is not None and p.get("config") in pooled
            p["pooled_us"] = pooled[p["config"]] if has else None


def rank_times(trajectory: list[dict]) -> list[float | None]:
    return times(trajectory, "rank")


def best_us(trajectory: list[dict], regime: str = "rank") -> float | None:
    ts = [t for t in times(trajectory, regime) if t is not None]
    return min(ts) if ts else None


def evaluations_to_within(trajectory: list[dict], reference_us: float,
                          within_pct: float = WITHIN_PCT, regime: str = "rank") -> int | None:
    """1-based count of evaluations until one is within `within_pct` % of `reference_us`."""
    limit = reference_us * (1 + within_pct / 100)
    for i, t in enumerate(times(trajectory, regime)):
        if t is not None and t <= limit:
            return i + 1
    return None


def kernel_figures(trajectory: list[dict], reference_us: float | None,
                   regime: str = "rank") -> dict:
    """The figures of one kernel's search in one mode and regime (see the module's docstring)."""
    best = best_us(trajectory, regime)
    fig = {
        "evaluations": len(trajectory),
        "benchmarks": sum(1 for p in trajectory if not p.get("cached")),
        "failures": sum(1 for t in rank_times(trajectory) if t is None),
        "best_us": best,
        "pct_of_ref": None,
        "to_within": None,
    }
    if best is not None and reference_us:
        fig["pct_of_ref"] = 100.0 * reference_us / best
        fig["to_within"] = evaluations_to_within(trajectory, reference_us, regime=regime)
    return fig


def runs_figures(trajectories: list[list[dict]], reference_us: float | None,
                 regime: str = "rank") -> dict:
    """The figures of several runs of one mode (seeds apart): the mean of each run's, with the
    runs' own under `per_run` (see the module's docstring)."""
    runs = [kernel_figures(t, reference_us, regime) for t in trajectories]
    if not runs:
        raise ValueError("runs_figures needs at least one run")

    def mean(values):
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else None

    reached = [f["to_within"] for f in runs if f["to_within"] is not None]
    bests = [f["best_us"] for f in runs if f["best_us"] is not None]
    return {
        "runs": len(runs),
        "evaluations": mean(f["evaluations"] for f in runs),
        "benchmarks": mean(f["benchmarks"] for f in runs),
        "failures": mean(f["failures"] for f in runs),
        "best_us": min(bests) if bests else None,
        "pct_of_ref": mean(f["pct_of_ref"] for f in runs),
        # A run never within counts its whole budget; None only when no run got there.
        "to_within": mean(f["to_within"] if f["to_within"] is not None else f["evaluations"]
                          for f in runs) if reached else None,
        "never": sum(1 for f in runs if f["to_within"] is None),
        "per_run": runs,
    }


def reference_of(trajectories: list[list[dict]], regime: str = "rank") -> float | None:
    """The reference best: the lowest time of all the given trajectories in `regime`."""
    bests = [b for b in (best_us(t, regime) for t in trajectories) if b is not None]
    return min(bests) if bests else None


def cell(fig: dict | None) -> str:
    """'97.3 % · 12/50': % of the reference reached, evaluations to within 3 %, evaluations."""
    if not fig:
        return "—"
    if fig.get("error"):
        return "failed" if not fig["error"].startswith("skipped") else "skipped"
    pct = "—" if fig.get("pct_of_ref") is None else f"{fig['pct_of_ref']:.1f} %"
    if "runs" not in fig:
        reach = "never" if fig.get("to_within") is None else str(fig["to_within"])
        return f"{pct} · {reach}/{fig['evaluations']}"
    # The mean of several runs: '83.4 % · 6.5/86 (3 runs, 1 never)'.
    reach = "never" if fig.get("to_within") is None else f"{fig['to_within']:.1f}"
    never = f", {fig['never']} never" if fig.get("never") else ""
    return f"{pct} · {reach}/{fig['evaluations']:g} ({fig['runs']} runs{never})"


def figures_of(mode_result: dict, regime: str) -> dict | None:
    """A mode's figures in `regime` (search_bench.py keeps them under the regime's name), or
    the mode itself when it failed (its `error` says why)."""
    if mode_result.get("error"):
        return mode_result
    return mode_result.get(regime)


def summary(kernels: list[dict], regime: str = "deploy") -> dict:
    """Per mode over kernels: the lowest % of the reference reached, the mean evaluations to
    within 3 % (a kernel that never got there counts its whole budget, and is counted apart), the
    mean evaluations, and `to_within_vs_flat`: its evaluations to within 3 % summed over the
    kernels flat also ran, over flat's sum on them (issue 24's target: at most 0.5 for p50; None
    for flat itself or without flat)."""
    out, reach_of = {}, {}
    for mode in MODES:
        named = [(k["name"], figures_of(k["modes"][mode], regime))
                 for k in kernels if mode in k.get("modes", {})]
        named = [(n, f) for n, f in named if f and not f.get("error")]
        if not named:
            continue
        figs = [f for _, f in named]
        pcts = [f["pct_of_ref"] for f in figs if f.get("pct_of_ref") is not None]
        reach_of[mode] = {n: f["to_within"] if f.get("to_within") is not None else f["evaluations"]
                          for n, f in named}
        reach = list(reach_of[mode].values())
        out[mode] = {
            "kernels": len(figs),
            "min_pct_of_ref": min(pcts) if pcts else None,
            "mean_to_within": sum(reach) / len(reach),
            "never_within": sum(1 for f in figs if f.get("to_within") is None),
            "mean_evaluations": sum(f["evaluations"] for f in figs) / len(figs),
        }
    flat = reach_of.get("flat", {})
    for mode, figures in out.items():
        common = [n for n in reach_of[mode] if n in flat] if mode != "flat" else []
        flat_sum = sum(flat[n] for n in common)
        figures["to_within_vs_flat"] = (sum(reach_of[mode][n] for n in common) / flat_sum
                                        if common and flat_sum > 0 else None)
    return out


def titles(settings: dict | None) -> dict:
    """MODE_TITLES with the patiences a run used (settings["patiences"], when not 10 and 50) and
    the search of its prior-guided modes (settings["search"]; reports before it was recorded:
    mcts)."""
    t = dict(MODE_TITLES)
    short, long_ = (settings or {}).get("patiences") or (10, 50)
    search = (settings or {}).get("search") or "mcts"
    t["p10"] = f"{search}, patience {short}"
    t["p50"] = f"{search}, patience {long_}"
    t["r10"] = f"mcts-remaining, patience {short}"
    t["r50"] = f"mcts-remaining, patience {long_}"
    if long_ != 50:
        t["flat"] = t["flat"].replace("p50", f"patience {long_}")
        t["random"] = t["random"].replace("p50", f"patience {long_}")
    return t


def markdown(result: dict) -> str:
    """The tables of a benchmark result (search_bench.py's JSON): per regime, one row per
    kernel, then one per mode over the kernels."""
    modes = [m for m in MODES if any(m in k.get("modes", {}) for k in result["kernels"])]
    names = titles(result.get("settings"))
    lines = [
        f"Each cell: % of the reference best reached · evaluations until the best so far is within "
        f"{WITHIN_PCT:g} % of it / evaluations made (\"never\": not within it).",
    ]
    for regime in REGIMES:
        lines += [
            "",
            f"{REGIME_TITLES[regime]}:",
            "",
            "| kernel | reference µs | " + " | ".join(names[m] for m in modes) + " |",
            "| --- | --- | " + " | ".join("---" for _ in modes) + " |",
        ]
        for k in result["kernels"]:
            ref = (k.get("reference_us") or {}).get(regime)
            lines.append(f"| {k['name']} | {'—' if ref is None else f'{ref:.2f}'} | " + " | ".join(
                cell(figures_of(k["modes"][m], regime)) if m in k.get("modes", {}) else "—"
                for m in modes) + " |")
        s = summary(result["kernels"], regime)
        if not s:
            continue
        lines += ["", "| mode | kernels | lowest % of reference | mean evaluations to within "
                  f"{WITHIN_PCT:g} % | never within | mean evaluations | to within {WITHIN_PCT:g} % "
                  "against flat |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for m in modes:
            if m not in s:
                continue
            f = s[m]
            low = "—" if f["min_pct_of_ref"] is None else f"{f['min_pct_of_ref']:.1f} %"
            vs = f.get("to_within_vs_flat")
            lines.append(f"| {names[m]} | {f['kernels']} | {low} | {f['mean_to_within']:.1f} | "
                         f"{f['never_within']} | {f['mean_evaluations']:.1f} | "
                         f"{'—' if vs is None else f'{vs:.2f} ×'} |")
    return "\n".join(lines) + "\n"
