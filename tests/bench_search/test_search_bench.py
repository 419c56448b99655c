"""bench/search/search_bench.py end to end on a one-kernel cpu suite at tiny patience: the
real emmy, backend, compiler and database. Asserts the structure and the counts (the flat and
random runs evaluate exactly the patience run's count, the reference ten times it or the whole
space), never timings: the figures are noisy, their consistency is not."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.environ.get("EMMY_SEARCH_BENCH_DIR", os.path.join(HERE, "..", "..", "bench", "search"))
EMMY = os.environ.get("EMMY_BIN", "build/bin/emmy")
sys.path.insert(0, BENCH)
import search_metrics as sm  # noqa: E402
from table_from_bench import parse_config  # noqa: E402

SUITE = [{"name": "silu_mul_32x64",
          "code": "torch.nn.functional.silu(torch.randn(32,64)) * torch.randn(32,64)"}]


class SearchBenchOneKernel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        suite = os.path.join(cls.tmp.name, "suite.json")
        with open(suite, "w") as f:
            json.dump(SUITE, f)
        cls.out = os.path.join(cls.tmp.name, "out")
        cls.proc = subprocess.run(
            [sys.executable, "-B", os.path.join(BENCH, "search_bench.py"), "--suite", suite,
             "--emmy", EMMY, "--out", cls.out, "--work", os.path.join(cls.tmp.name, "work"),
             "--samples", "3", "--warmup", "1", "--short-patience", "1", "--long-patience", "2",
             "--ref-factor", "3", "--baseline-runs", "2", "--modes", ",".join(sm.MODES),
             "--export-rows", os.path.join(cls.tmp.name, "rows")],
            capture_output=True, text=True, timeout=540)
        try:
            with open(os.path.join(cls.out, "search_bench.json")) as f:
                cls.result = json.load(f)
        except (OSError, ValueError):
            cls.result = None

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stdout[-3000:] + self.proc.stderr[-3000:])
        self.assertIsNotNone(self.result, "no search_bench.json")
        self.kernel = self.result["kernels"][0]
        self.modes = self.kernel["modes"]

    def test_every_mode_ran_from_its_own_home(self):
        self.assertEqual(len(self.result["kernels"]), 1)
        self.assertEqual(list(self.modes), list(sm.MODES))
        for name, m in self.modes.items():
            self.assertNotIn("error", m, name)
            self.assertGreater(len(m["trajectory"]), 0, name)
            # Fresh homes: nothing is served from another run's database.
            self.assertEqual(m["benchmarks"], m["evaluations"], name)
            self.assertGreater(m["launches"], 0, name)
        self.assertEqual(self.kernel["kernel_name"], "silu")
        self.assertRegex(self.kernel["key"], "^[0-9a-f]{16,}$")

    def test_the_modes_are_what_they_say(self):
        m = self.modes
        for name in ("p10", "p50", "ref"):
            self.assertEqual(m[name]["search"], "mcts-ranked", name)
            self.assertNotEqual(m[name]["prior"], "flat", name)
        for name in ("r10", "r50"):
            self.assertEqual(m[name]["search"], "mcts-remaining", name)
            self.assertNotEqual(m[name]["prior"], "flat", name)
        self.assertEqual(m["r10"]["command"][m["r10"]["command"].index("--patience") + 1], "1")
        self.assertEqual(m["flat"]["prior"], "flat")
        self.assertEqual(m["flat"]["search"], "mcts-ranked")  # emmy tune's default; no prior to rank by
        self.assertEqual(m["random"]["search"], "random")
        self.assertIn("--patience", m["p10"]["command"])
        self.assertEqual(m["p10"]["command"][m["p10"]["command"].index("--patience") + 1], "1")
        self.assertIn(m["p50"]["stopped"], ("patience", "exhausted"))

    def test_flat_and_random_used_exactly_the_patience_runs_budget(self):
        n = self.modes["p50"]["evaluations"]
        for name in ("flat", "random"):
            m = self.modes[name]
            self.assertEqual(m["budget"], n, name)
            self.assertEqual(m["evaluations"], n, name)
            self.assertEqual(m["stopped"], "budget", name)
        ref = self.modes["ref"]
        self.assertEqual(ref["budget"], 3 * n)
        # Three times the budget, or the whole space (a pointwise kernel has 18 configurations).
        self.assertTrue(ref["evaluations"] == 3 * n or ref["stopped"] == "exhausted", ref["stopped"])
        self.assertLessEqual(ref["evaluations"], 3 * n)

    def test_the_figures_follow_from_the_trajectories(self):
        for regime in sm.REGIMES:
            ref = self.kernel["reference_us"][regime]
            # Every mode re-measures at least its first success at deploy: both regimes have times.
            self.assertEqual(ref, min(m[regime]["best_us"] for m in self.modes.values()), regime)
            # Each run's own figures: a mode's one run, or each of a baseline's runs.
            runs = [(name, m["trajectory"], m[regime]) for name, m in self.modes.items()
                    if "runs" not in m]
            runs += [(f"{name} seed {r['seed']}", r["trajectory"], m[regime]["per_run"][i])
                     for name, m in self.modes.items() if "runs" in m
                     for i, r in enumerate(m["runs"])]
            for name, trajectory, f in runs:
                times = sm.times(trajectory, regime)
                self.assertEqual(f["evaluations"], len(times))
                self.assertEqual(f["best_us"], min(t for t in times if t is not None), name)
                # The reference is the lowest time of every run: by construction none is above 100 %.
                self.assertLessEqual(f["pct_of_ref"], 100.0 + 1e-9, name)
                k = f["to_within"]
                if k is None:
                    self.assertTrue(all(t is None or t > ref * 1.03 for t in times), name)
                else:
                    self.assertLessEqual(times[k - 1], ref * 1.03, name)
                    self.assertTrue(all(t is None or t > ref * 1.03 for t in times[:k - 1]), name)

    def test_points_name_their_configuration_so_that_the_pooled_figures_exist(self):
        for name, m in self.modes.items():
            for p in m["trajectory"]:
                if p["rank_us"] is not None:
                    self.assertIn("|", p["config"], name)  # "<template>|<knobs>"
        self.assertIsNotNone(self.kernel["reference_us"]["pooled"])

    def test_baselines_ran_once_per_seed_from_their_own_homes(self):
        for name in ("flat", "random"):
            m = self.modes[name]
            self.assertEqual([r["seed"] for r in m["runs"]], [0, 1], name)
            for r in m["runs"]:
                self.assertNotIn("error", r, name)
                self.assertEqual(r["command"][r["command"].index("--seed") + 1], str(r["seed"]))
                self.assertEqual(len(r["trajectory"]), self.modes["p50"]["evaluations"], name)
                self.assertGreater(r["launches"], 0, name)  # a fresh home each: nothing cached
            # The mode's own fields are its first run's; its figures the mean of both runs.
            self.assertEqual(m["trajectory"], m["runs"][0]["trajectory"])
            for regime in sm.REGIMES:
                f = m[regime]
                self.assertEqual(f["runs"], 2)
                pcts = [p["pct_of_ref"] for p in f["per_run"]]
                self.assertAlmostEqual(f["pct_of_ref"], sum(pcts) / 2)
                self.assertEqual(f["best_us"], min(p["best_us"] for p in f["per_run"]))
        for name in ("p10", "p50", "ref"):
            self.assertNotIn("runs", self.modes[name], name)

    def test_every_run_whose_prior_learns_exports_what_it_measured(self):
        rows_dir = os.path.join(self.tmp.name, "rows")
        runs = [(name, m) for name, m in self.modes.items() if "runs" not in m]
        runs += [(name if r["seed"] == 0 else f"{name}.s{r['seed']}", r)
                 for name, m in self.modes.items() if "runs" in m for r in m["runs"]]
        for tag, run in runs:
            table = os.path.join(rows_dir, f"silu_mul_32x64.{tag}.jsonl")
            if run["prior"] == "flat":  # keeps no checkpoint, so no rows
                self.assertFalse(os.path.exists(table), tag)
                continue
            with open(table) as f:
                rows = [json.loads(line) for line in f]
            rank = [tuple(sorted(r["knobs"].items())) for r in rows if r["regime"] == "rank"]
            configs = []
            for p in run["trajectory"]:
                if p["rank_us"] is None:
                    continue
                configs.append(tuple(sorted(parse_config(p["config"])[1].items())))
            # Every configuration the search timed is a rank row of the table, once.
            self.assertGreater(len(configs), 0, tag)
            for c in configs:
                self.assertEqual(rank.count(c), 1, (tag, c))
            self.assertTrue(all(r["time_us"] > 0 for r in rows), tag)

    def test_the_table_has_the_kernel_and_every_mode(self):
        with open(os.path.join(self.out, "search_bench.md")) as f:
            md = f.read()
        rows = [line for line in md.splitlines() if line.startswith("| silu_mul_32x64 |")]
        self.assertEqual(len(rows), len(sm.REGIMES), md)
        for row in rows:
            self.assertEqual(row.count("|"), 2 + len(sm.MODES) + 1)
        for title in ("mcts-ranked, patience 1", "mcts-ranked, patience 2", "flat prior", "random", "reference"):
            self.assertIn(title, md)

    def test_an_export_folder_that_cannot_be_made_is_a_usage_error(self):
        blocker = os.path.join(self.tmp.name, "a_file")
        with open(blocker, "w") as f:
            f.write("not a folder")
        r = subprocess.run([sys.executable, "-B", os.path.join(BENCH, "search_bench.py"), "--emmy", EMMY,
                            "--out", os.path.join(self.tmp.name, "bad_rows"),
                            "--export-rows", os.path.join(blocker, "rows")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--export-rows", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "bad_rows", "search_bench.json")))

    def test_a_bad_mode_is_a_usage_error(self):
        r = subprocess.run([sys.executable, "-B", os.path.join(BENCH, "search_bench.py"), "--modes",
                            "p50,annealing", "--emmy", EMMY, "--out", os.path.join(self.tmp.name, "bad")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("annealing", r.stderr)


if __name__ == "__main__":
    unittest.main()
