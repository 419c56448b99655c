"""bench/qwen_layer/sass_summary.py on a real cubin: nvcc builds data/mma_probe.cu for sm_90a, and
the counts that cuobjdump's output gives must show the instructions the probe was written to
contain. Registered only where CMake found both nvcc and cuobjdump (EMMY_NVCC, EMMY_CUOBJDUMP)."""

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.environ.get("EMMY_BENCH_QWEN_DIR",
                       os.path.join(HERE, "..", "..", "bench", "qwen_layer"))
sys.path.insert(0, BENCH)
import sass_summary as ss  # noqa: E402

NVCC = os.environ.get("EMMY_NVCC") or shutil.which("nvcc")
CUOBJDUMP = os.environ.get("EMMY_CUOBJDUMP") or ss.find_cuobjdump()
PROBE = os.path.join(HERE, "data", "mma_probe.cu")


class RealCubin(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        # A cache entry as the cuda backend leaves one: <hash>.cubin with <hash>.cu beside it.
        stem = os.path.join(cls.dir.name, "5a55" * 8)
        shutil.copy(PROBE, stem + ".cu")
        subprocess.run([NVCC, "-cubin", "-arch=sm_90a", "-O3", "-o", stem + ".cubin", PROBE], check=True)
        cls.cubin = stem + ".cubin"

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_counts_show_the_mma_sync_path(self):
        usage, counts, error = ss.disassemble(CUOBJDUMP, self.cubin)
        self.assertIsNone(error)
        self.assertEqual(list(counts), ["mma_probe"])
        c = counts["mma_probe"]
        self.assertGreaterEqual(c["HMMA"], 1)
        self.assertGreaterEqual(c["LDSM"], 1)
        self.assertGreaterEqual(c["LDGSTS"], 1)
        # (its 16-byte global loads may come out as LDG.E.128 or be folded by ptxas: not asserted)
        self.assertGreaterEqual(c["BAR"], 1)
        self.assertGreaterEqual(c["MUFU"], 1)
        self.assertEqual(c["HGMMA"], 0)
        self.assertEqual(c["TMA"], 0)
        self.assertEqual(c["LDL"] + c["STL"], 0)
        u = usage["mma_probe"]
        self.assertGreater(u["REG"], 0)
        # The probe's static tile, plus the 1 KiB per block that sm_90 reserves (seen on the H200:
        # cuobjdump reported 1536 for the 512-byte tile).
        self.assertIn(u["SHARED"], (32 * 8 * 2, 32 * 8 * 2 + 1024))
        self.assertEqual(u["STACK"], 0)

    def test_script_marks_the_chosen_probe_with_its_counts(self):
        report = os.path.join(self.dir.name, "tune.json")
        with open(report, "w") as f:
            json.dump({"kernels": [{"name": "probe", "template": "matmul",
                                    "config": "stages=1 tile_k=16 tile_m=16 tile_n=8 warps=1"}]}, f)
        buf = io.StringIO()
        with redirect_stdout(buf):
            self.assertEqual(ss.main([self.dir.name, report, "--cuobjdump", CUOBJDUMP]), 0)
        rows = [r for r in buf.getvalue().splitlines() if r.startswith("| **probe** |")]
        self.assertEqual(len(rows), 1, buf.getvalue())
        cells = [c.strip() for c in rows[0].strip("|").split("|")]
        head = ["chosen", "cubin", "kernel", "regime", "grid x block", "REG", "stack", "smem"] + ss.COLUMNS
        row = dict(zip(head, cells))
        self.assertEqual(row["kernel"], "mma_probe")
        self.assertEqual(row["regime"], "deploy")
        self.assertIn(row["smem"], ("512", "1536"))  # sm_90 reserves 1 KiB per block
        self.assertGreaterEqual(int(row["HMMA"]), 1)
        self.assertGreater(int(row["REG"]), 0)


if __name__ == "__main__":
    unittest.main()
