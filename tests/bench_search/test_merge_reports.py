"""bench/search/search_bench.py --recompute with several reports: the calls of one device session
(each within the device tool's 600 s) merged into one benchmark whose summary is over all their
kernels, and reports that are not one benchmark refused by name; and the machine a report names
(its GPU on a cuda suite), which merging compares. Literal reports; nothing runs."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.environ.get("EMMY_SEARCH_BENCH_DIR", os.path.join(HERE, "..", "..", "bench", "search"))
sys.path.insert(0, BENCH)
import search_bench as sb  # noqa: E402

SETTINGS = {"modes": ["p50", "flat"], "baseline_runs": 1, "first": "defaults", "search": "mcts",
            "patiences": [10, 50], "within_pct": 3.0, "samples": None, "warmup": None,
            "prior_checkpoint": None, "extra": [], "seed": 0}


def point(t, config):
    return {"rank_us": t, "deploy_us": t, "cached": False, "config": config}


def kernel(name, p50, flat):
    """A kernel whose p50 and flat runs measured these times, configurations named by time."""
    return {"name": name, "modes": {
        "p50": {"trajectory": [point(t, f"c{t}") for t in p50]},
        "flat": {"trajectory": [point(t, f"c{t}") for t in flat]}}}


def report(*kernels, suite="cuda", machine="gpu box", **settings):
    return {"suite": suite, "machine": machine, "started_utc": "2026-12-06 14:47:13",
            "command": "search_bench.py ...", "settings": dict(SETTINGS, **settings),
            "kernels": list(kernels), "wall_s": 100.0}


class Merge(unittest.TestCase):
    def test_the_summary_is_over_the_kernels_of_every_report(self):
        a = report(kernel("k1", [10.0, 9.0], [12.0, 11.0, 9.1]))
        b = report(kernel("k2", [5.0], [6.0, 5.0]), kernel("k3", [2.0, 2.1], [3.0, 2.0]))
        merged = sb.merge_reports([("a.json", a), ("b.json", b)])
        self.assertEqual([k["name"] for k in merged["kernels"]], ["k1", "k2", "k3"])
        self.assertEqual([m["file"] for m in merged["merged_from"]], ["a.json", "b.json"])
        self.assertEqual(merged["wall_s"], 200.0)
        with tempfile.TemporaryDirectory() as out:
            sb.finish(merged, out)
            with open(os.path.join(out, "search_bench.json")) as f:
                written = json.load(f)
            with open(os.path.join(out, "search_bench.md")) as f:
                table = f.read()
        rank = written["summary"]["rank"]
        self.assertEqual(rank["p50"]["kernels"], 3)
        # p50 within 3 % after 2, 1 and 1 evaluations; flat after 3, 2 and 2.
        self.assertAlmostEqual(rank["p50"]["mean_to_within"], 4 / 3)
        self.assertAlmostEqual(rank["flat"]["mean_to_within"], 7 / 3)
        # Each kernel keeps its own reference: the lowest time of its own runs.
        refs = {k["name"]: k["reference_us"]["rank"] for k in written["kernels"]}
        self.assertEqual(refs, {"k1": 9.0, "k2": 5.0, "k3": 2.0})
        self.assertIn("merged: a.json + b.json", table)
        for name in ("k1", "k2", "k3"):
            self.assertIn(f"| {name} |", table)

    def test_reports_that_are_not_one_benchmark_are_refused_by_name(self):
        a = report(kernel("k1", [1.0], [1.0]))
        cases = [
            (report(kernel("k1", [2.0], [2.0])), "kernel k1 is also in a.json"),
            (report(kernel("k2", [1.0], [1.0]), baseline_runs=2), "setting baseline_runs is 2"),
            (report(kernel("k2", [1.0], [1.0]), modes=["p50"]), "setting modes"),
            (report(kernel("k2", [1.0], [1.0]), suite="cpu"), "suite 'cpu'"),
            (report(kernel("k2", [1.0], [1.0]), machine="other"), "machine 'other'"),
        ]
        for b, why in cases:
            with self.subTest(why=why):
                with self.assertRaises(ValueError) as e:
                    sb.merge_reports([("a.json", a), ("b.json", b)])
                self.assertIn("b.json", str(e.exception))
                self.assertIn(why, str(e.exception))

    def test_a_kernel_measured_again_replaces_its_earlier_runs_only_when_asked(self):
        a = report(kernel("k1", [10.0, 9.0], [12.0, 9.1]), kernel("k2", [5.0], [6.0, 5.0]))
        b = report(kernel("k2", [4.0, 3.0], [3.5, 3.1]))
        with self.assertRaises(ValueError):
            sb.merge_reports([("a.json", a), ("b.json", b)])
        merged = sb.merge_reports([("a.json", a), ("b.json", b)], later_replaces=True)
        self.assertEqual([k["name"] for k in merged["kernels"]], ["k1", "k2"])
        self.assertEqual(merged["replaced"], [{"kernel": "k2", "file": "a.json", "by": "b.json"}])
        self.assertIn("k2 of a.json replaced by b.json's", merged["command"])
        with tempfile.TemporaryDirectory() as out:
            sb.finish(merged, out)
            with open(os.path.join(out, "search_bench.json")) as f:
                written = json.load(f)
        # k2's reference and figures are b.json's alone: none of a.json's runs of it remain.
        refs = {k["name"]: k["reference_us"]["rank"] for k in written["kernels"]}
        self.assertEqual(refs, {"k1": 9.0, "k2": 3.0})
        self.assertEqual(written["summary"]["rank"]["p50"]["kernels"], 2)

    def test_the_command_line_merges_and_names_an_unreadable_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            files = []
            for i, k in enumerate([kernel("k1", [3.0], [3.0, 2.0]), kernel("k2", [4.0], [4.0])]):
                files.append(os.path.join(tmp, f"r{i}.json"))
                with open(files[-1], "w") as f:
                    json.dump(report(k), f)
            script = os.path.join(BENCH, "search_bench.py")
            out = os.path.join(tmp, "out")
            ok = subprocess.run([sys.executable, "-B", script, "--recompute", *files, "--out", out],
                                capture_output=True, text=True, timeout=60)
            self.assertEqual(ok.returncode, 0, ok.stderr)
            with open(os.path.join(out, "search_bench.json")) as f:
                self.assertEqual(len(json.load(f)["kernels"]), 2)
            missing = os.path.join(tmp, "missing.json")
            bad = subprocess.run([sys.executable, "-B", script, "--recompute", files[0], missing,
                                  "--out", out], capture_output=True, text=True, timeout=60)
            self.assertEqual(bad.returncode, 2)
            self.assertIn(f"--recompute {missing}", bad.stderr)
            again = os.path.join(tmp, "again.json")
            with open(again, "w") as f:
                json.dump(report(kernel("k1", [1.5], [1.5])), f)
            twice = [sys.executable, "-B", script, "--recompute", *files, again, "--out", out]
            refused = subprocess.run(twice, capture_output=True, text=True, timeout=60)
            self.assertEqual(refused.returncode, 2)
            self.assertIn("kernel k1 is also in", refused.stderr)
            replaced = subprocess.run(twice + ["--later-replaces"], capture_output=True, text=True,
                                      timeout=60)
            self.assertEqual(replaced.returncode, 0, replaced.stderr)
            with open(os.path.join(out, "search_bench.json")) as f:
                ks = {k["name"]: k for k in json.load(f)["kernels"]}
            self.assertEqual(ks["k1"]["reference_us"]["rank"], 1.5)


class MachineDescription(unittest.TestCase):
    """A cuda suite's report names its GPU, so that reports of two kinds of GPU never merge.
    nvidia-smi is a stand-in script here (no GPU in CI); the GPU round trip runs the real one."""

    def with_path(self, path, kernels):
        old = os.environ.get("PATH", "")
        os.environ["PATH"] = path
        try:
            return sb.machine_description(kernels)
        finally:
            os.environ["PATH"] = old

    def test_a_cuda_suite_names_the_gpu_and_a_cpu_suite_does_not_ask(self):
        with tempfile.TemporaryDirectory() as bin_dir:
            smi = os.path.join(bin_dir, "nvidia-smi")
            with open(smi, "w") as f:
                f.write("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 580.159.04'\n")
            os.chmod(smi, 0o755)
            cuda = self.with_path(bin_dir, [{"name": "k", "backend": "cuda"}])
            self.assertTrue(cuda.endswith(", GPU NVIDIA H100 80GB HBM3, 580.159.04"), cuda)
            cpu = self.with_path(bin_dir, [{"name": "k", "backend": "cpu"}, {"name": "j"}])
            self.assertNotIn("GPU", cpu)
            self.assertIn(" cpus", cpu)
            empty = tempfile.mkdtemp(dir=bin_dir)  # no nvidia-smi on the path
            self.assertTrue(self.with_path(empty, [{"backend": "cuda"}]).endswith(
                ", no GPU found by nvidia-smi"))


if __name__ == "__main__":
    unittest.main()
