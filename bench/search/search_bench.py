"""The search benchmark (issue 24, item 1): how close `emmy tune`'s search comes to the best
configuration of each kernel of a fixed suite, and after how many benchmarks, beside a flat prior
and random search at the same budget. Python 3 standard library only.

    search_bench.py --suite cpu|cuda|FILE.json [--kernels a,b] [--modes p10,p50,r10,r50,flat,random,ref]
                    [--out DIR] [--work DIR] [--emmy PATH] [--samples N] [--warmup N]
                    [--ref-factor F | --ref-patience N] [--budget N] [--seed N]
                    [--tune-timeout S] [--deadline S] [--baseline-runs K]
                    [--first defaults|prior|prior-then-defaults] [--search mcts|mcts-remaining|mcts-ranked]
                    [--prior-checkpoint FILE] [--extra ARG]...

For each kernel of the suite (an inline PyTorch expression, `emmy tune --code`), one tune per
mode, each in a fresh home (its own EMMY_HOME and database: no cache hits across runs, a cold
compile cache, and no prior checkpoint, so the default mlp prior starts from the pretrained state
shipped for the backend and device where there is one (cpu on x86_64, cuda on an H200: README,
"Pretrained priors"), else as the roofline model, and learns from this run's measurements;
--prior-checkpoint FILE copies a checkpoint into every home instead):
  p10     emmy tune --patience 10                 (the default search: MCTS, mlp prior)
  p50     emmy tune --patience 50                 (the default patience)
  r10     emmy tune --patience 10 --search mcts-remaining   (p10 and p50 with the search that
  r50     emmy tune --patience 50 --search mcts-remaining    values a tried branch by what is
                                                              left untried below it)
  flat    emmy tune --prior flat --budget N       (MCTS with no prior)
  random  emmy tune --search random --budget N    (uniformly random candidates)
  ref     emmy tune --budget F*N                  (the reference: F = --ref-factor, default
                                                   10 times p50's budget, exhaustive where the
                                                   space is smaller; --ref-patience R instead
                                                   runs emmy tune --patience R)
N is the number of candidates p50 evaluated for the kernel, so flat and random get exactly its
budget (--budget N gives it when p50 is not among the modes). --baseline-runs K runs flat and
random K times each (seeds --seed to --seed + K - 1, homes MODE, MODE.sSEED): one run of a search
that breaks ties or draws at random is one sample of how many evaluations it needs, and their
figures are the mean of the K runs. --first (default prior-then-defaults, emmy tune's) is
given to p10, p50 and ref; flat has no favourite, so it starts from the backend's untuned
configuration whatever --first says, and random takes none: the "half the evaluations of flat"
comparison is against the flat prior as it runs by default. Every run: --no-validate (the assembled graph is not what is compared), --seed, and small
--samples/--warmup where asked. The figures (search_metrics.py) come from each run's JSON report
(`searches`: every evaluation's rank time in order).

Writes OUT/search_bench.md (the table), OUT/search_bench.json (every figure, trajectory and exact
command) and OUT/search_bench.log, rewritten after every run so that a run cut short by the
device tool's limit still leaves what it measured; --deadline S starts no tune after S seconds
and interrupts one still running at S + 60 s (its mode then shows failed). --export-rows DIR
writes each run's measured rows as a prior table DIR/KERNEL.TAG.jsonl (README). Suites: SUITES below; a JSON file may give its own
([{"name": ..., "code": ..., "backend": "cpu"}, ...]).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import search_metrics as sm  # noqa: E402


def _cuda(*shape: int) -> str:
    return f"torch.randn({','.join(map(str, shape))},dtype=torch.bfloat16,device='cuda')"


def _rmsnorm(rows: int, cols: int, t) -> str:
    # Qwen3's RMSNorm ops (pow, mean, add, rsqrt, mul by the weight); a --code expression cannot
    # name a value twice, so x comes in through two inputs of the same shape.
    return f"{t(rows, cols)} * torch.rsqrt({t(rows, cols)}.pow(2).mean(-1, keepdim=True) + 1e-6) * {t(cols)}"


def _cpu(*shape: int) -> str:
    return f"torch.randn({','.join(map(str, shape))})"


def _linear(m: int, k: int, n: int, t) -> str:
    return f"torch.nn.functional.linear({t(m, k)}, {t(n, k)})"


def _sdpa(b: int, hq: int, hkv: int, s: int, d: int, t) -> str:
    gqa = ", enable_gqa=True" if hq != hkv else ""
    return (f"torch.nn.functional.scaled_dot_product_attention({t(b, hq, s, d)}, {t(b, hkv, s, d)}, "
            f"{t(b, hkv, s, d)}, is_causal=True{gqa})")


def _qwen(b: int, s: int) -> list[dict]:
    """The distinct kernels of a Qwen3-0.6B layer at batch b, sequence s (M = b * s rows)."""
    m, t = b * s, _cuda
    tag = f"b{b}s{s}"
    return [
        {"name": f"qkv_{tag}", "code": _linear(m, 1024, 4096, t)},
        {"name": f"o_proj_{tag}", "code": _linear(m, 2048, 1024, t)},
        {"name": f"gate_up_{tag}", "code": _linear(m, 1024, 6144, t)},
        {"name": f"down_{tag}", "code": _linear(m, 3072, 1024, t)},
        {"name": f"rmsnorm_{tag}", "code": _rmsnorm(m, 1024, t)},
        {"name": f"sdpa_{tag}", "code": _sdpa(b, 16, 8, s, 128, t)},
    ]


SUITES = {
    # Runs on the 2-core development machine in minutes (f32, the cpu backend).
    "cpu": [
        {"name": "matmul_256", "code": f"torch.matmul({_cpu(256, 256)}, {_cpu(256, 256)})"},
        {"name": "rmsnorm_256x1024", "code": _rmsnorm(256, 1024, _cpu)},
        {"name": "silu_mul_256x1024",
         "code": f"torch.nn.functional.silu({_cpu(256, 1024)}) * {_cpu(256, 1024)}"},
        # Attention written out (softmax(q k^T / 8) v, not causal): this machine's LibTorch 1.13
        # has no scaled_dot_product_attention to compile --code with.
        {"name": "attention_1x4x128x64",
         "code": f"torch.matmul(torch.softmax(torch.matmul({_cpu(1, 4, 128, 64)}, {_cpu(1, 4, 64, 128)}) "
                 f"* 0.125, -1), {_cpu(1, 4, 128, 64)})"},
    ],
    # The Qwen3 layer's distinct kernels, bf16 on the GPU, at B=1 S=512 and B=8 S=512.
    "cuda": _qwen(1, 512) + _qwen(8, 512),
}
DEFAULT_BACKEND = {"cpu": "cpu", "cuda": "cuda"}

# Modes that --baseline-runs repeats with further seeds: searches that break ties or draw at
# random, whose one run is one sample of how many evaluations they need.
BASELINES = ("flat", "random")

# emmy tune options that EMMY_* variables would set: each run gives its own.
TUNE_ENV = ("EMMY_PATIENCE", "EMMY_BUDGET", "EMMY_SEARCH", "EMMY_FIRST", "EMMY_PRIOR", "EMMY_SEED",
            "EMMY_SAMPLES", "EMMY_WARMUP", "EMMY_JSON", "EMMY_DB", "EMMY_HOME")


def load_suite(spec: str) -> tuple[list[dict], str]:
    if spec in SUITES:
        return [dict(k, backend=k.get("backend", DEFAULT_BACKEND[spec])) for k in SUITES[spec]], spec
    with open(spec) as f:
        kernels = json.load(f)
    if not isinstance(kernels, list) or not all(isinstance(k, dict) and "name" in k and "code" in k
                                                for k in kernels):
        raise SystemExit(f"{spec}: a suite file is a JSON list of {{\"name\", \"code\"[, \"backend\"]}}")
    return [dict(k, backend=k.get("backend", "cpu")) for k in kernels], os.path.basename(spec)


# emmy tune's --search when none is given: mode_args passes --search only for another.
DEFAULT_SEARCH = "mcts-ranked"
# emmy tune's --first when none is given (with --prior flat it starts from the defaults).
DEFAULT_FIRST = "prior-then-defaults"


def mode_args(mode: str, budget: int | None, ref_factor: float, ref_patience: int,
              patiences: tuple[int, int] = (10, 50), first: str = DEFAULT_FIRST,
              search: str = DEFAULT_SEARCH) -> list[str]:
    # --first prior and --search mcts-remaining are for the prior-guided modes; flat has no prior
    # to start from or value untried configurations by, and random takes neither.
    start = ["--first", first] if first != DEFAULT_FIRST else []
    if search != DEFAULT_SEARCH:
        start += ["--search", search]
    if mode in ("p10", "r10", "p50", "r50"):
        remaining = (["--search", "mcts-remaining"]
                     if mode[0] == "r" and search == DEFAULT_SEARCH else [])
        return ["--patience", str(patiences[mode.endswith("50")])] + start + remaining
    if mode == "flat":
        return ["--prior", "flat", "--budget", str(budget)]
    if mode == "random":
        return ["--search", "random", "--budget", str(budget)]
    if mode == "ref":
        if ref_patience:
            return ["--patience", str(ref_patience)] + start
        return ["--budget", str(max(1, round(ref_factor * budget)))] + start
    raise ValueError(mode)


def home_env(home: str) -> dict:
    """The environment of an emmy command in `home`: its own home and database, and none of the
    EMMY_* variables that would set a tune's options."""
    env = {k: v for k, v in os.environ.items() if k not in TUNE_ENV}
    env["EMMY_HOME"] = home
    env["EMMY_DB"] = os.path.join(home, "tuning.db")
    return env


def run_tune(cmd: list[str], home: str, timeout: float, log) -> tuple[dict | None, str, float]:
    """Runs one tune in `home`; returns (its JSON report or None, why not, wall seconds)."""
    env = home_env(home)
    report = cmd[cmd.index("--json") + 1]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)  # emmy keeps what it measured and writes its report
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        out += f"\n(timed out after {timeout:g} s)"
    wall = time.monotonic() - start
    log("\n".join(out.strip().splitlines()[-6:]))
    try:
        with open(report) as f:
            r = json.load(f)
    except (OSError, ValueError) as e:
        return None, f"exit {proc.returncode}, no report ({e})", wall
    if proc.returncode != 0 or r.get("status") != "ok":
        return r, f"exit {proc.returncode}, status {r.get('status')}", wall
    return r, "", wall


def primary_key(report: dict) -> str | None:
    """The kernel of the best grouping that takes the most time (the suite's kernel)."""
    ks = report.get("kernels") or []
    if not ks:
        return None
    return max(ks, key=lambda k: (k.get("best_deploy_us") or 0) * k.get("occurrences", 1))["key"]


def trace_of(report: dict | None, key: str | None) -> dict | None:
    for s in (report or {}).get("searches", []):
        if s.get("key") == key:
            return s
    return None


def figures(kernel: dict) -> None:
    """Fills kernel['reference_us'] (per regime) and each mode's figures (under each regime's
    name) from the runs' trajectories."""
    def runs_of(m: dict) -> list[list[dict]]:
        # A mode run several times (--baseline-runs): every run that has a trajectory.
        if "runs" in m:
            return [r["trajectory"] for r in m["runs"] if r.get("trajectory")]
        return [m["trajectory"]] if m.get("trajectory") else []

    trajs = [t for m in kernel["modes"].values() for t in runs_of(m)]
    sm.add_pooled(trajs, sm.pool(trajs))
    kernel["reference_us"] = {r: sm.reference_of(trajs, r) for r in sm.REGIMES}
    for m in kernel["modes"].values():
        for stale in ("best_us", "pct_of_ref", "to_within", "failures"):  # an older file's
            m.pop(stale, None)
        if "trajectory" in m:
            m["evaluations"] = len(m["trajectory"])
            m["benchmarks"] = sum(1 for p in m["trajectory"] if not p.get("cached"))
            for r in sm.REGIMES:
                if "runs" in m:
                    m[r] = sm.runs_figures(runs_of(m), kernel["reference_us"][r], r)
                else:
                    m[r] = sm.kernel_figures(m["trajectory"], kernel["reference_us"][r], r)


def gpu_names() -> str | None:
    """What nvidia-smi says the GPUs are ("NVIDIA H100 80GB HBM3, 580.159.04"), or None."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = [line.strip() for line in r.stdout.splitlines() if line.strip()]
    return "; ".join(names) if r.returncode == 0 and names else None


def machine_description(kernels: list[dict]) -> str:
    """The host, and for a suite with cuda kernels the GPU: a report's figures are the GPU's (the
    device tool's hosts are all named `vm`), and reports merge only where this is the same."""
    machine = f"{platform.node()} {platform.machine()}, {os.cpu_count()} cpus"
    if any(k.get("backend") == "cuda" for k in kernels):
        gpus = gpu_names()
        machine += f", GPU {gpus}" if gpus else ", no GPU found by nvidia-smi"
    return machine


# Settings that change what a mode measures: reports that differ in one are not one benchmark.
MERGE_SETTINGS = ("modes", "baseline_runs", "first", "search", "patiences", "within_pct",
                  "samples", "warmup", "prior_checkpoint", "extra")


def merge_reports(reports: list[tuple[str, dict]], later_replaces: bool = False) -> dict:
    """One report of the kernels of several (the calls of one device session, each within the
    device tool's time limit): every kernel keeps its own runs and reference, and the summary is
    then over all of them. Raises ValueError, naming the file, where they are not one benchmark:
    another suite or machine, a setting of MERGE_SETTINGS that differs, or a kernel twice. With
    `later_replaces` a kernel twice is taken from the later report (given later), its earlier runs
    dropped and named under `replaced` (a kernel measured again after its space changed, so that
    its runs and reference are one session's, never a mix). A single report is returned as it is."""
    (first_name, first), rest = reports[0], reports[1:]
    if not rest:
        return first
    seen = {}
    replaced = []
    for name, r in reports:
        for field in ("suite", "machine"):
            if r.get(field) != first.get(field):
                raise ValueError(f"{name}: {field} {r.get(field)!r}, not {first.get(field)!r} "
                                 f"as in {first_name}")
        for key in MERGE_SETTINGS:
            a, b = first.get("settings", {}).get(key), r.get("settings", {}).get(key)
            if a != b:
                raise ValueError(f"{name}: setting {key} is {b!r}, not {a!r} as in {first_name}")
        for k in r["kernels"]:
            if k["name"] in seen:
                if not later_replaces:
                    raise ValueError(f"{name}: kernel {k['name']} is also in {seen[k['name']]}")
                replaced.append({"kernel": k["name"], "file": seen[k["name"]], "by": name})
            seen[k["name"]] = name
    merged = dict(first)
    # Each kernel from the last report that has it, in the order the reports give them.
    merged["kernels"] = [k for name, r in reports for k in r["kernels"] if seen[k["name"]] == name]
    if replaced:
        merged["replaced"] = replaced
    merged["merged_from"] = [{"file": name, "started_utc": r.get("started_utc"),
                              "command": r.get("command"), "wall_s": r.get("wall_s")}
                             for name, r in reports]
    merged["wall_s"] = sum(m["wall_s"] or 0 for m in merged["merged_from"])
    merged["command"] = "merged: " + " + ".join(name for name, _ in reports) + "".join(
        f"; {x['kernel']} of {x['file']} replaced by {x['by']}'s" for x in replaced)
    return merged


def finish(result: dict, out: str) -> None:
    """The figures, summaries and both files of `result`."""
    for k in result["kernels"]:
        figures(k)
    result["summary"] = {r: sm.summary(result["kernels"], r) for r in sm.REGIMES}
    with open(os.path.join(out, "search_bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(out, "search_bench.md"), "w") as f:
        f.write(f"Suite {result['suite']}, {result['machine']}; {result['command']}\n\n")
        f.write(sm.markdown(result))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--suite", default=os.environ.get("EMMY_SEARCH_SUITE", "cpu"),
                    help="cpu, cuda or a JSON file (default cpu; EMMY_SEARCH_SUITE)")
    ap.add_argument("--kernels", default=os.environ.get("EMMY_SEARCH_KERNELS", ""),
                    help="comma list of suite kernel names to run (default all; EMMY_SEARCH_KERNELS)")
    ap.add_argument("--modes", default=os.environ.get("EMMY_SEARCH_MODES", "p10,p50,flat,random,ref"),
                    help="comma list of " + ",".join(sm.MODES) +
                         " (EMMY_SEARCH_MODES; default p10,p50,flat,random,ref)")
    ap.add_argument("--emmy", default=os.environ.get("EMMY_SEARCH_EMMY", "build/bin/emmy"))
    ap.add_argument("--out", default=os.environ.get("OUT", "search-bench-out"))
    ap.add_argument("--work", default="", help="homes and reports (default: a temporary folder)")
    ap.add_argument("--samples", type=int, default=int(os.environ.get("EMMY_SEARCH_SAMPLES", 0)),
                    help="--samples of every tune (0: emmy's default)")
    ap.add_argument("--warmup", type=int, default=int(os.environ.get("EMMY_SEARCH_WARMUP", -1)),
                    help="--warmup of every tune (-1: emmy's default)")
    ap.add_argument("--ref-factor", type=float, default=float(os.environ.get("EMMY_SEARCH_REF_FACTOR", 10)),
                    help="the reference evaluates this many times p50's budget (default 10; "
                         "EMMY_SEARCH_REF_FACTOR)")
    ap.add_argument("--ref-patience", type=int, default=int(os.environ.get("EMMY_SEARCH_REF_PATIENCE", 0)),
                    help="the reference runs at this patience instead (0: use --ref-factor; "
                         "EMMY_SEARCH_REF_PATIENCE)")
    ap.add_argument("--budget", type=int, default=0,
                    help="the budget of flat, random and (times --ref-factor) ref when p50 is not run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--first", choices=("defaults", "prior", "prior-then-defaults"),
                    default=os.environ.get("EMMY_SEARCH_FIRST", DEFAULT_FIRST),
                    help="emmy tune --first of the prior-guided modes (p10, p50, ref): what each "
                         "kernel's search evaluates first (default " + DEFAULT_FIRST + "; EMMY_SEARCH_FIRST)")
    ap.add_argument("--search", choices=("mcts", "mcts-remaining", "mcts-ranked"),
                    default=os.environ.get("EMMY_SEARCH_SEARCH", DEFAULT_SEARCH),
                    help="emmy tune --search of the prior-guided modes (p10, p50, ref): "
                         "mcts-remaining values a tried branch by the best configuration left "
                         "untried below it, mcts-ranked the same with every estimate calibrated "
                         "by the prior's error over all the search's measurements (default "
                         "mcts-ranked, emmy tune's; mcts values a tried branch by what was "
                         "measured there; EMMY_SEARCH_SEARCH)")
    ap.add_argument("--baseline-runs", type=int,
                    default=int(os.environ.get("EMMY_SEARCH_BASELINE_RUNS", 1)),
                    help="run flat and random this many times, with seeds --seed, --seed + 1, ...; "
                         "their figures are the mean over the runs (default 1; "
                         "EMMY_SEARCH_BASELINE_RUNS)")
    ap.add_argument("--short-patience", type=int, default=10,
                    help="the patience of mode p10 (default 10; smaller only to test the driver)")
    ap.add_argument("--long-patience", type=int, default=50,
                    help="the patience of mode p50 (default 50, emmy's default)")
    ap.add_argument("--tune-timeout", type=float, default=float(os.environ.get("EMMY_SEARCH_TUNE_TIMEOUT", 600)),
                    help="seconds per tune before it is interrupted (its report then has status "
                         "interrupted and the mode shows failed)")
    ap.add_argument("--deadline", type=float, default=float(os.environ.get("EMMY_SEARCH_DEADLINE", 0)),
                    help="seconds after which no further tune starts, and at which + 60 s a running "
                         "one is interrupted (0: none; EMMY_SEARCH_DEADLINE)")
    ap.add_argument("--prior-checkpoint", default="",
                    help="copy this mlp checkpoint into every home (default: none, the prior starts "
                         "from nothing)")
    ap.add_argument("--extra", action="append", default=[],
                    help="one more argument for every tune (repeatable), e.g. --extra=--timeout=5")
    ap.add_argument("--export-rows", default=os.environ.get("EMMY_SEARCH_EXPORT_ROWS", ""),
                    metavar="DIR",
                    help="after each tune, write the rows its prior learned (every measurement of "
                         "the run, `emmy eval prior --export`) to DIR/KERNEL.TAG.jsonl: a prior "
                         "table of what the benchmark measured, to train on (bench/prior/README.md); "
                         "a flat prior keeps no rows (EMMY_SEARCH_EXPORT_ROWS)")
    ap.add_argument("--recompute", nargs="+", default=[], metavar="JSON",
                    help="run nothing: recompute the figures and tables of an earlier "
                         "search_bench.json into --out; several (each its own kernels, e.g. the "
                         "calls of one device session) are merged into one report, whose summary "
                         "is over all their kernels")
    ap.add_argument("--later-replaces", action="store_true",
                    help="with --recompute: a kernel in several reports is taken from the last "
                         "one given (e.g. measured again after its space changed); without it "
                         "that is refused")
    args = ap.parse_args()
    if args.recompute:
        reports = []
        for name in args.recompute:
            try:
                with open(name) as f:
                    reports.append((name, json.load(f)))
            except (OSError, ValueError) as e:
                ap.error(f"--recompute {name}: {e}")
        try:
            earlier = merge_reports(reports, later_replaces=args.later_replaces)
        except ValueError as e:
            ap.error(f"--recompute: {e}")
        os.makedirs(args.out, exist_ok=True)
        finish(earlier, args.out)
        with open(os.path.join(args.out, "search_bench.md")) as f:
            print(f.read())
        return 0

    kernels, suite_name = load_suite(args.suite)
    if args.kernels:
        wanted = [w for w in args.kernels.split(",") if w]
        unknown = [w for w in wanted if w not in {k["name"] for k in kernels}]
        if unknown:
            ap.error(f"--kernels: not in suite {suite_name}: {', '.join(unknown)} "
                     f"(it has {', '.join(k['name'] for k in kernels)})")
        kernels = [k for k in kernels if k["name"] in wanted]
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in sm.MODES]
    if bad or not modes:
        ap.error(f"--modes: {', '.join(bad) or 'none given'}; choose from {', '.join(sm.MODES)}")
    modes = [m for m in sm.MODES if m in modes]  # budgets come from p50: it runs first
    if not os.access(args.emmy, os.X_OK):
        ap.error(f"--emmy {args.emmy} is not an executable")
    if args.ref_factor <= 0 or args.ref_patience < 0 or args.budget < 0:
        ap.error("--ref-factor must be positive, --ref-patience and --budget at least 0")
    if args.baseline_runs < 1:
        ap.error("--baseline-runs must be at least 1")
    if args.short_patience < 1 or args.long_patience < 1:
        ap.error("--short-patience and --long-patience must be at least 1")
    if args.prior_checkpoint and not os.path.isfile(args.prior_checkpoint):
        ap.error(f"--prior-checkpoint {args.prior_checkpoint} is not a file")
    if args.export_rows:
        # Made now, so that a path that cannot be a folder is refused before any tune runs.
        try:
            os.makedirs(args.export_rows, exist_ok=True)
        except OSError as e:
            ap.error(f"--export-rows {args.export_rows}: {e.strerror or e}")

    os.makedirs(args.out, exist_ok=True)
    work = args.work or tempfile.mkdtemp(prefix="emmy-search-bench.")
    os.makedirs(work, exist_ok=True)
    log_path = os.path.join(args.out, "search_bench.log")
    logf = open(log_path, "a")

    def log(msg: str) -> None:
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    started = time.monotonic()
    result = {
        "suite": suite_name,
        "machine": machine_description(kernels),
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "command": " ".join([sys.argv[0]] + sys.argv[1:]),
        "settings": {"modes": modes, "samples": args.samples or None,
                     "warmup": None if args.warmup < 0 else args.warmup,
                     "ref_factor": None if args.ref_patience else args.ref_factor,
                     "ref_patience": args.ref_patience or None, "seed": args.seed,
                     "baseline_runs": args.baseline_runs, "first": args.first, "search": args.search,
                     "patiences": [args.short_patience, args.long_patience],
                     "prior_checkpoint": args.prior_checkpoint or None, "extra": args.extra,
                     "within_pct": sm.WITHIN_PCT},
        "kernels": [],
    }

    def save() -> None:
        result["wall_s"] = time.monotonic() - started
        finish(result, args.out)

    log(f"== search benchmark: suite {suite_name} ({len(kernels)} kernels), modes {','.join(modes)}, "
        f"emmy {args.emmy}, work {work}")
    def export_rows(name: str, tag: str, home: str, report: dict | None) -> None:
        """The rows the tune's prior learned, as a prior table: DIR/NAME.TAG.jsonl. A run
        interrupted or failed still keeps what it measured; a prior that keeps no checkpoint
        (flat) has no rows to give."""
        prior = (report or {}).get("prior")
        if not prior or not os.path.exists(os.path.join(home, "priors", f"{prior}.ckpt")):
            log(f"   no rows exported: prior {prior or '?'} kept no checkpoint")
            return
        table = os.path.join(args.export_rows, f"{name}.{tag}.jsonl")
        proc = subprocess.run([args.emmy, "eval", "prior", "--prior", prior, "--export", table],
                              env=home_env(home), capture_output=True, text=True)
        # A failed export is logged and the benchmark goes on: its figures do not depend on it.
        log("   " + (proc.stdout.strip() or proc.stderr.strip() or f"exit {proc.returncode}"))

    def tune_once(kern: dict, entry: dict, mode: str, budget: int | None, seed: int,
                  tag: str) -> dict:
        """One tune of `kern` in `mode` with `seed`, from a fresh home named by `tag`: its run
        record (command, wall_s, prior, search, budget, launches; trajectory and stopped, or the
        error that left it without them)."""
        run: dict = {"seed": seed}
        home = os.path.join(work, kern["name"], tag)
        shutil.rmtree(home, ignore_errors=True)
        os.makedirs(home)
        if args.prior_checkpoint:
            os.makedirs(os.path.join(home, "priors"))
            shutil.copy(args.prior_checkpoint, os.path.join(home, "priors", "mlp.ckpt"))
        report_path = os.path.join(work, kern["name"], f"{tag}.json")
        cmd = [args.emmy, "tune", "--code", kern["code"], "--backend", kern["backend"],
               "--no-progress", "--no-validate", "--seed", str(seed)]
        if args.samples:
            cmd += ["--samples", str(args.samples)]
        if args.warmup >= 0:
            cmd += ["--warmup", str(args.warmup)]
        cmd += mode_args(mode, budget, args.ref_factor, args.ref_patience,
                         (args.short_patience, args.long_patience), args.first,
                         args.search) + args.extra + [
            "--json", report_path]
        run["command"] = cmd[:-2]  # the report's path is the runner's
        log(f"-- {kern['name']} {tag}: {' '.join(cmd)}")
        timeout = args.tune_timeout
        if args.deadline:
            timeout = min(timeout, args.deadline + 60 - (time.monotonic() - started))
        report, why, wall = run_tune(cmd, home, timeout, log)
        run["wall_s"] = wall
        if report:
            for field in ("prior", "search", "budget", "launches"):
                run[field] = report.get(field)
        if args.export_rows:
            export_rows(kern["name"], tag, home, report)
        if why:
            run["error"] = why
            log(f"   failed: {why}")
            return run
        if entry["key"] is None:
            entry["key"] = primary_key(report)
        trace = trace_of(report, entry["key"])
        if trace is None:
            run["error"] = f"kernel {entry['key']} was not tuned by this run"
            log(f"   {run['error']}")
            return run
        entry["kernel_name"] = trace.get("name")
        run["stopped"] = trace.get("stopped")
        run["trajectory"] = trace.get("trajectory", [])
        log(f"   {len(run['trajectory'])} evaluations, best rank {sm.best_us(run['trajectory'])} us, "
            f"best deploy {sm.best_us(run['trajectory'], 'deploy')} us, stopped by {run['stopped']}, "
            f"{wall:.1f} s")
        return run

    for kern in kernels:
        entry = {"name": kern["name"], "code": kern["code"], "backend": kern["backend"], "key": None,
                 "kernel_name": None, "modes": {}}
        result["kernels"].append(entry)
        budget = args.budget or None
        for mode in modes:
            m = entry["modes"].setdefault(mode, {})
            if args.deadline and time.monotonic() - started > args.deadline:
                m["error"] = "skipped: past --deadline"
                log(f"-- {kern['name']} {mode}: skipped (past --deadline {args.deadline:g} s)")
                continue
            if (mode in ("flat", "random") or (mode == "ref" and not args.ref_patience)) and budget is None:
                m["error"] = "skipped: no p50 run to take the budget from"
                log(f"-- {kern['name']} {mode}: skipped (needs p50's count)")
                continue
            repeats = args.baseline_runs if mode in BASELINES else 1
            runs = []
            for i in range(repeats):
                if i and args.deadline and time.monotonic() - started > args.deadline:
                    log(f"-- {kern['name']} {mode}: {repeats - i} runs skipped (past --deadline)")
                    break
                runs.append(tune_once(kern, entry, mode, budget, args.seed + i,
                                      mode if i == 0 else f"{mode}.s{args.seed + i}"))
                save()
            # The first run that worked is the mode's (as with one run); every run is kept beside
            # it, and the figures are the mean of those that worked (search_metrics.runs_figures).
            ok = [r for r in runs if "error" not in r]
            m.update(ok[0] if ok else runs[0])
            if repeats > 1:
                m["runs"] = runs
            if "error" in m:
                save()
                continue
            if mode == "p50":
                budget = len(m["trajectory"])
            save()
    save()
    logf.close()
    with open(os.path.join(args.out, "search_bench.md")) as f:
        print(f.read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
