"""Unit tests of bench/search/table_from_bench.py: a search benchmark report's measured points
of one kernel as a prior table for emmy-search-replay, with the features of that kernel's rows
in another table."""

import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.environ.get("EMMY_SEARCH_BENCH_DIR", os.path.join(HERE, "..", "..", "bench", "search"))
sys.path.insert(0, BENCH)
import table_from_bench as tfb  # noqa: E402


def point(config, rank_us):
    return {"config": config, "rank_us": rank_us, "deploy_us": None, "pooled_us": None}


class TableFromBench(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        report = {"kernels": [
            {"name": "other", "modes": {"p10": {"trajectory": [point("reduction|block=1", 5.0)]}}},
            {"name": "norm", "modes": {
                "p50": {"trajectory": [point("reduction|block=256;vec=8", 6.3),
                                       point("reduction|block=128;vec=8", None),
                                       point(None, 7.0)]},
                "flat": {"runs": [{"trajectory": [point("reduction|block=256;vec=8", 6.5)]},
                                  {"trajectory": [point("reduction|block=512;vec=4", 7.1)]}]}}}]}
        self.report = os.path.join(d, "report.json")
        with open(self.report, "w") as f:
            json.dump(report, f)
        self.features = os.path.join(d, "table.jsonl")
        with open(self.features, "w") as f:
            for kernel, flops in (("k_other", 1.0), ("k_norm", 2098176.0)):
                f.write(json.dumps({"kernel": kernel, "op_class": "reduction", "dtype": "bf16",
                                    "shape": [512, 1024], "flops": flops, "bytes": 3.0,
                                    "regime": "rank", "time_us": 1.0, "knobs": {}}) + "\n")
        self.out = os.path.join(d, "out.jsonl")

    def tearDown(self):
        self.dir.cleanup()

    def test_config_labels_parse_into_template_and_knobs(self):
        self.assertEqual(tfb.parse_config("reduction|block=256;items=1;vec=8"),
                         ("reduction", {"block": 256.0, "items": 1.0, "vec": 8.0}))
        self.assertEqual(tfb.parse_config("cublaslt|"), ("cublaslt", {}))

    def test_every_measured_point_of_the_kernel_becomes_a_row_with_the_tables_features(self):
        tfb.main([self.report, "norm", "--features-from", self.features,
                  "--features-kernel", "k_norm", "--out", self.out])
        with open(self.out) as f:
            rows = [json.loads(line) for line in f]
        # Points without a rank time or a configuration are left out; runs of a baseline count.
        self.assertEqual(sorted(r["time_us"] for r in rows), [6.3, 6.5, 7.1])
        for r in rows:
            self.assertEqual((r["kernel"], r["op_class"], r["dtype"], r["regime"]),
                             ("norm", "reduction", "bf16", "rank"))
            self.assertEqual(r["flops"], 2098176.0)
        self.assertIn({"block": 512.0, "vec": 4.0}, [r["knobs"] for r in rows])

    def test_an_unknown_kernel_or_features_kernel_is_a_clear_error(self):
        with self.assertRaises(SystemExit) as e:
            tfb.main([self.report, "nope", "--features-from", self.features,
                      "--features-kernel", "k_norm", "--out", self.out])
        self.assertIn("no kernel 'nope'", str(e.exception))
        with self.assertRaises(SystemExit) as e:
            tfb.main([self.report, "norm", "--features-from", self.features,
                      "--features-kernel", "missing", "--out", self.out])
        self.assertIn("no row of kernel 'missing'", str(e.exception))


if __name__ == "__main__":
    unittest.main()
