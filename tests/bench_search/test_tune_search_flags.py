"""`emmy tune`'s search flags the benchmark compares with (--prior flat, --search random,
--budget N, --first): documented in --help, and a bad value is a usage error (exit 2) that names
the flag, before anything is loaded or written; and the benchmark passes --first to the
prior-guided modes only."""

import os
import subprocess
import sys
import tempfile
import unittest

EMMY = os.environ.get("EMMY_BIN", "build/bin/emmy")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("EMMY_SEARCH_BENCH_DIR",
                                  os.path.join(HERE, "..", "..", "bench", "search")))
import search_bench as sb  # noqa: E402
CODE = "torch.matmul(torch.randn(8,8), torch.randn(8,8))"


class TuneSearchFlags(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.home.cleanup()

    def tune(self, *args):
        env = {k: v for k, v in os.environ.items() if not k.startswith("EMMY_")}
        env["EMMY_HOME"] = self.home.name
        return subprocess.run([EMMY, "tune", "--code", CODE, "--backend", "cpu", *args], env=env,
                              capture_output=True, text=True, timeout=60)

    def assertUsageError(self, args, says):
        r = self.tune(*args)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(says, r.stderr)
        self.assertEqual(os.listdir(self.home.name), [], "nothing is written for a usage error")

    def test_help_documents_the_flags(self):
        r = subprocess.run([EMMY, "tune", "--help"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0)
        for text in ("--search", "mcts-remaining", "mcts-ranked", "--budget", "flat: no prior", "random",
                     "--first"):
            # Boost wraps the help at its own column: compare with the wrapping undone.
            self.assertIn(text, " ".join(r.stdout.split()))

    def test_an_unknown_search_is_refused(self):
        self.assertUsageError(["--search", "annealing"], "--search 'annealing' is not mcts-ranked, mcts, mcts-remaining or random")

    def test_an_unknown_first_is_refused(self):
        self.assertUsageError(["--first", "best"], "--first 'best' is not defaults, prior or prior-then-defaults")

    def test_the_benchmark_gives_first_to_the_prior_guided_modes_only(self):
        for mode in ("p10", "p50", "ref"):
            args = sb.mode_args(mode, 20, 10, 0, first="prior")
            self.assertEqual(args[-2:], ["--first", "prior"], mode)
            self.assertNotIn("--first", sb.mode_args(mode, 20, 10, 0), mode)
            # emmy tune's default is prior-then-defaults: the old start is asked for by name.
            self.assertEqual(sb.mode_args(mode, 20, 10, 0, first="defaults")[-2:],
                             ["--first", "defaults"], mode)
        for mode in ("flat", "random"):
            self.assertNotIn("--first", sb.mode_args(mode, 20, 10, 0, first="prior"), mode)

    def test_the_benchmark_gives_the_remaining_estimate_to_the_prior_guided_modes_only(self):
        for mode in ("p10", "p50", "ref"):
            args = sb.mode_args(mode, 20, 10, 0, search="mcts-remaining")
            self.assertEqual(args[-2:], ["--search", "mcts-remaining"], mode)
        self.assertEqual(sb.mode_args("random", 20, 10, 0, search="mcts-remaining")[:2],
                         ["--search", "random"])
        self.assertNotIn("--search", sb.mode_args("flat", 20, 10, 0, search="mcts-remaining"))

    def test_r10_and_r50_are_p10_and_p50_with_the_remaining_estimate(self):
        for r, p in (("r10", "p10"), ("r50", "p50")):
            self.assertEqual(sb.mode_args(r, 20, 10, 0),
                             sb.mode_args(p, 20, 10, 0) + ["--search", "mcts-remaining"], r)
            self.assertEqual(sb.mode_args(r, 20, 10, 0, first="prior"),
                             sb.mode_args(p, 20, 10, 0, first="prior") + ["--search", "mcts-remaining"], r)
            # Asked for everywhere already: said once.
            self.assertEqual(sb.mode_args(r, 20, 10, 0, search="mcts-remaining"),
                             sb.mode_args(p, 20, 10, 0, search="mcts-remaining"), r)

    def test_a_budget_below_one_is_refused(self):
        self.assertUsageError(["--budget", "0"], "--budget 0 is not a positive number")
        self.assertUsageError(["--budget", "-3"], "--budget -3 is not a positive number")

    def test_a_budget_and_a_patience_are_not_both_given(self):
        self.assertUsageError(["--budget", "5", "--patience", "10"], "give --patience or --budget, not both")
        # Also when the patience comes from the environment: it was asked for all the same.
        env_run = subprocess.run(
            [EMMY, "tune", "--code", CODE, "--backend", "cpu", "--budget", "5"],
            env={**{k: v for k, v in os.environ.items() if not k.startswith("EMMY_")},
                 "EMMY_HOME": self.home.name, "EMMY_PATIENCE": "7"},
            capture_output=True, text=True, timeout=60)
        self.assertEqual(env_run.returncode, 2, env_run.stderr)

    def test_the_flat_prior_takes_no_options(self):
        self.assertUsageError(["--prior", "flat", "--prior-option", "lr=0.1"], "--prior flat has no options")


if __name__ == "__main__":
    unittest.main()
