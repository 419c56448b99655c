"""Unit tests of bench/search/search_metrics.py: the figures of a search trajectory against a
reference best, and the table. Trajectories are shaped like the `searches[].trajectory` lists of
`emmy tune --json`."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.environ.get("EMMY_SEARCH_BENCH_DIR", os.path.join(HERE, "..", "..", "bench", "search"))
sys.path.insert(0, BENCH)
import search_metrics as sm  # noqa: E402


def traj(*times, cached=()):
    """A trajectory from rank times (None: a failed candidate)."""
    return [{"rank_us": t, "deploy_us": None, "cached": i in cached} for i, t in enumerate(times)]


class Figures(unittest.TestCase):
    def test_best_skips_failures_and_bad_values(self):
        self.assertEqual(sm.best_us(traj(None, 12.0, 10.0, None, 11.0)), 10.0)
        self.assertIsNone(sm.best_us(traj(None, None)))
        self.assertIsNone(sm.best_us([]))
        self.assertEqual(sm.best_us([{"rank_us": 0}, {"rank_us": -1}, {"rank_us": 5.0}]), 5.0)

    def test_evaluations_to_within_three_percent_counts_from_one(self):
        t = traj(20.0, None, 10.4, 10.2, 9.0)
        self.assertEqual(sm.evaluations_to_within(t, 10.0), 4)   # 10.2 <= 10.3, 10.4 is not
        self.assertEqual(sm.evaluations_to_within(t, 9.0), 5)
        self.assertEqual(sm.evaluations_to_within(t, 20.0), 1)
        self.assertIsNone(sm.evaluations_to_within(t, 5.0))
        self.assertEqual(sm.evaluations_to_within(t, 10.0, within_pct=5), 3)

    def test_kernel_figures(self):
        f = sm.kernel_figures(traj(20.0, None, 10.2, 11.0, cached={3}), 10.0)
        self.assertEqual(f["evaluations"], 4)
        self.assertEqual(f["benchmarks"], 3)
        self.assertEqual(f["failures"], 1)
        self.assertEqual(f["best_us"], 10.2)
        self.assertAlmostEqual(f["pct_of_ref"], 100 * 10.0 / 10.2)
        self.assertEqual(f["to_within"], 3)
        none = sm.kernel_figures(traj(None), 10.0)
        self.assertIsNone(none["pct_of_ref"])
        self.assertIsNone(none["to_within"])

    def test_several_runs_are_averaged_and_a_run_never_within_counts_its_budget(self):
        f = sm.runs_figures([traj(20.0, 10.2, 11.0), traj(12.0, 11.0, 10.9), traj(10.0, 30.0, 30.0)],
                            10.0)
        self.assertEqual(f["runs"], 3)
        self.assertEqual(f["evaluations"], 3)
        self.assertEqual(f["best_us"], 10.0)
        self.assertAlmostEqual(f["pct_of_ref"], (100 * 10.0 / 10.2 + 100 * 10.0 / 10.9 + 100.0) / 3)
        # Within 3 % after 2, never (its 3 evaluations), after 1.
        self.assertAlmostEqual(f["to_within"], (2 + 3 + 1) / 3)
        self.assertEqual(f["never"], 1)
        self.assertEqual([p["to_within"] for p in f["per_run"]], [2, None, 1])
        self.assertEqual(sm.cell(f), f"{f['pct_of_ref']:.1f} % · 2.0/3 (3 runs, 1 never)")
        none = sm.runs_figures([traj(20.0), traj(30.0)], 10.0)
        self.assertIsNone(none["to_within"])
        self.assertEqual(none["never"], 2)
        self.assertEqual(sm.cell(none), "41.7 % · never/1 (2 runs, 2 never)")  # (50 + 33.3) / 2
        with self.assertRaises(ValueError):
            sm.runs_figures([], 10.0)

    def test_the_reference_is_the_lowest_time_of_any_run(self):
        self.assertEqual(sm.reference_of([traj(12.0, 11.0), traj(None, 10.5), traj(None), []]), 10.5)
        self.assertIsNone(sm.reference_of([traj(None), []]))


class Regimes(unittest.TestCase):
    def test_deploy_figures_read_the_deploy_times(self):
        t = [{"rank_us": 20.0, "deploy_us": 5.0, "cached": False},
             {"rank_us": 10.0, "deploy_us": None, "cached": False},
             {"rank_us": 12.0, "deploy_us": 4.0, "cached": False}]
        self.assertEqual(sm.times(t, "deploy"), [5.0, None, 4.0])
        self.assertEqual(sm.best_us(t, "deploy"), 4.0)
        self.assertEqual(sm.best_us(t, "rank"), 10.0)
        f = sm.kernel_figures(t, 4.0, "deploy")
        self.assertEqual(f["to_within"], 3)
        self.assertEqual(f["failures"], 0)  # a point without a deploy time is not a failure
        self.assertEqual(sm.reference_of([t], "deploy"), 4.0)


class Pooled(unittest.TestCase):
    def test_each_configuration_takes_the_median_of_its_deploy_measurements(self):
        def pt(config, deploy, cached=False):
            return {"rank_us": 1.0, "deploy_us": deploy, "cached": cached, "config": config}
        # Configuration a measured 10.0, 10.6 and 10.3 in three runs, b 11.0 once; c never
        # re-measured at deploy; a cached repeat of a run's sample is not a new one; a point
        # without a key (an older report, a declared refusal) is not pooled.
        runs = [[pt("a", 10.0), pt("b", 11.0), pt("c", None)],
                [pt("a", 10.6), pt("a", 10.6, cached=True)],
                [pt("a", 10.3), pt("", 3.0)]]
        pooled = sm.pool(runs)
        self.assertEqual(pooled, {"a": 10.3, "b": 11.0})
        sm.add_pooled(runs, pooled)
        self.assertEqual(sm.times(runs[0], "pooled"), [10.3, 11.0, None])
        self.assertEqual(sm.times(runs[1], "pooled"), [10.3, 10.3])
        self.assertEqual(sm.times(runs[2], "pooled"), [10.3, None])
        self.assertEqual(sm.reference_of(runs, "pooled"), 10.3)
        # Run 2 found a at its first evaluation. Against the luckiest sample of a (10.0), its own
        # (10.6) is never within 3 %; pooled, a is what it is in every run.
        self.assertIsNone(sm.kernel_figures(runs[1], 10.0, "deploy")["to_within"])
        self.assertEqual(sm.kernel_figures(runs[1], 10.3, "pooled")["to_within"], 1)

    def test_an_old_report_without_configurations_has_no_pooled_figures(self):
        runs = [[{"rank_us": 5.0, "deploy_us": 5.0, "cached": False}]]
        sm.add_pooled(runs, sm.pool(runs))
        self.assertIsNone(sm.reference_of(runs, "pooled"))
        self.assertEqual(sm.times(runs[0], "pooled"), [None])


def mode(trajectory, refs):
    """A mode's entry as search_bench.py keeps it: figures under each regime's name."""
    m = {"trajectory": trajectory, "evaluations": len(trajectory)}
    for r in sm.REGIMES:
        m[r] = sm.kernel_figures(trajectory, refs[r], r)
    return m


class Table(unittest.TestCase):
    def result(self):
        refs = {"rank": 10.0, "deploy": 10.0, "pooled": None}  # no configurations: no pooled

        def dep(*ts):  # the same times at both regimes
            return [{"rank_us": x, "deploy_us": x, "cached": False} for x in ts]
        k = {"name": "matmul_256", "reference_us": refs, "modes": {
            "p50": mode(dep(12.0, 10.1, 11.0), refs),
            "flat": mode(dep(13.0, 12.0, 11.0), refs),
            "random": {"error": "exit 1, status failed: x"},
            "ref": mode(dep(12.0, 10.0) + dep(*([11.0] * 28)), refs),
        }}
        return {"kernels": [k]}

    def test_cells_say_pct_reach_and_count(self):
        modes = self.result()["kernels"][0]["modes"]
        self.assertEqual(sm.cell(modes["p50"]["deploy"]), "99.0 % · 2/3")
        self.assertEqual(sm.cell(modes["flat"]["rank"]), "90.9 % · never/3")
        self.assertEqual(sm.cell(sm.figures_of(modes["random"], "rank")), "failed")
        self.assertEqual(sm.cell({"error": "skipped: past --deadline"}), "skipped")
        self.assertEqual(sm.cell(None), "—")

    def test_markdown_has_a_row_per_kernel_and_regime_and_a_summary_per_mode(self):
        md = sm.markdown(self.result())
        row = "| matmul_256 | 10.00 | 99.0 % · 2/3 | 90.9 % · never/3 | failed | 100.0 % · 2/30 |"
        self.assertEqual(md.count(row), 2, md)  # deploy, then rank
        self.assertLess(md.index(sm.REGIME_TITLES["deploy"]), md.index(sm.REGIME_TITLES["rank"]))
        self.assertNotIn("patience 10", md)  # a mode that did not run has no column
        s = sm.summary(self.result()["kernels"], "deploy")
        self.assertEqual(set(s), {"p50", "flat", "ref"})
        self.assertEqual(s["flat"]["never_within"], 1)
        self.assertEqual(s["flat"]["mean_to_within"], 3)  # never: counts its whole budget
        self.assertAlmostEqual(s["p50"]["min_pct_of_ref"], 100 * 10.0 / 10.1)
        # p50 within 3 % at its 2nd evaluation, flat never (its whole budget of 3): 2 / 3.
        self.assertAlmostEqual(s["p50"]["to_within_vs_flat"], 2 / 3)
        self.assertIsNone(s["flat"]["to_within_vs_flat"])
        self.assertIn("| 0.67 × |", md)

    def test_the_ratio_to_flat_counts_only_the_kernels_flat_ran(self):
        refs = {"rank": 10.0, "deploy": 10.0, "pooled": None}

        def dep(*ts):
            return [{"rank_us": x, "deploy_us": x, "cached": False} for x in ts]
        both = {"name": "a", "reference_us": refs, "modes": {
            "p50": mode(dep(10.0), refs), "flat": mode(dep(12.0, 12.0, 10.0, 11.0), refs)}}
        p50_only = {"name": "b", "reference_us": refs, "modes": {
            "p50": mode(dep(12.0, 12.0, 12.0, 12.0, 10.0), refs)}}
        s = sm.summary([both, p50_only], "deploy")
        self.assertEqual(s["p50"]["kernels"], 2)
        self.assertAlmostEqual(s["p50"]["to_within_vs_flat"], 1 / 3)  # kernel a alone: 1 / 3


if __name__ == "__main__":
    unittest.main()
