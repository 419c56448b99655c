"""bench/prior/rank_deploy_agreement.py on literal tables: the figures it reports, and bad input."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.environ.get("EMMY_PRIOR_BENCH_DIR", "bench/prior"))
import rank_deploy_agreement as rda  # noqa: E402


def row(kernel, knob, t):
    return json.dumps({"kernel": kernel, "op_class": "matmul", "knobs": {"mr": knob},
                       "time_us": t, "regime": "rank"})


class Agreement(unittest.TestCase):
    def write(self, lines):
        f = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
        f.write("\n".join(lines) + "\n")
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_same_order_is_one_and_keeps_the_best(self):
        a = {("matmul_a", "1"): 1.0, ("matmul_a", "2"): 2.0, ("matmul_a", "3"): 3.0}
        b = {k: 10 * v for k, v in a.items()}
        r = rda.agreement(a, b)
        self.assertAlmostEqual(r["spearman_within_kernel"]["matmul"], 1.0)
        self.assertAlmostEqual(r["kept_of_best"], 1.0)
        self.assertAlmostEqual(r["median_ratio"], 0.1)

    def test_reversed_order_is_minus_one_and_keeps_the_worst(self):
        a = {("matmul_a", "1"): 1.0, ("matmul_a", "2"): 2.0, ("matmul_a", "3"): 3.0}
        b = {("matmul_a", "1"): 30.0, ("matmul_a", "2"): 20.0, ("matmul_a", "3"): 10.0}
        r = rda.agreement(a, b)
        self.assertAlmostEqual(r["spearman_within_kernel"]["matmul"], -1.0)
        # Steering by the first table deploys the 30 us configuration; the best is 10 us.
        self.assertAlmostEqual(r["kept_of_best"], 10.0 / 30.0)

    def test_ties_take_average_ranks(self):
        self.assertEqual(rda.ranks([5.0, 1.0, 5.0]), [1.5, 0.0, 1.5])

    def test_rows_pair_by_kernel_and_knobs_from_files(self):
        first = self.write([row("matmul_a", 1, 1.0), row("matmul_a", 2, 2.0),
                            row("matmul_a", 3, 3.0), row("matmul_b", 1, 5.0)])
        second = self.write([row("matmul_a", 3, 1.0), row("matmul_a", 2, 2.0),
                             row("matmul_a", 1, 3.0)])
        out = subprocess.run([sys.executable, rda.__file__, first, second, "--json"],
                             capture_output=True, text=True, check=True).stdout
        r = json.loads(out)
        self.assertEqual(r["rows"], 3)  # matmul_b has no partner
        self.assertEqual(r["kernels"], 1)
        self.assertAlmostEqual(r["spearman_within_kernel"]["matmul"], -1.0)

    def test_a_bad_line_is_named(self):
        bad = self.write([row("matmul_a", 1, 1.0), "{\"kernel\": 3}"])
        p = subprocess.run([sys.executable, rda.__file__, bad, bad], capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(bad + ":2: not a prior row", p.stderr)

    def test_tables_without_common_rows_are_refused(self):
        a = self.write([row("matmul_a", 1, 1.0)])
        b = self.write([row("matmul_b", 1, 1.0)])
        p = subprocess.run([sys.executable, rda.__file__, a, b], capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("no (kernel, knobs) row in common", p.stderr)


if __name__ == "__main__":
    unittest.main()
