"""Unit tests of bench/qwen_layer/sass_summary.py on literal text: SASS and resource-usage parsing in
cuobjdump's layout, the template note of a cached source, matching the kernels a tune chose, the
selection per template, and the whole script on a cache whose cubins cannot be disassembled (no
cuobjdump: notes and launches only)."""

import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.environ.get("EMMY_BENCH_QWEN_DIR",
                       os.path.join(HERE, "..", "..", "bench", "qwen_layer"))
sys.path.insert(0, BENCH)
import sass_summary as ss  # noqa: E402

# cuobjdump -sass of a cubin with two kernels, in its layout (sm_90: one encoding line under each
# instruction), with predicated, 16-byte and TMA forms.
SASS = """
Fatbin elf code:
================
arch = sm_90a
code version = [1,8]
host = linux
compile_size = 64bit

	code for sm_90a
		Function : emmy_matmul
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                      /* 0x00000a00ff017b82 */
                                                                               /* 0x000fe20000000800 */
        /*0010*/                   LDGSTS.E.BYPASS.LTC128B.128 [R5], desc[UR6][R2.64] ;  /* 0x0000000002057fae */
        /*0020*/              @!P0 LDGSTS.E.BYPASS.LTC128B.128 [R5+0x800], desc[UR6][R2.64+0x40] ;
        /*0030*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0040*/                   LDSM.16.M88.4 R8, [R3+UR4] ;
        /*0050*/                   LDSM.16.MT88.4 R12, [R3+UR4+0x400] ;
        /*0060*/                   HMMA.16816.F32.BF16 R16, R8, R12, R16 ;
        /*0070*/                   HMMA.16816.F32.BF16 R20, R8, R14, R20 ;
        /*0080*/                   HMMA.16816.F32.BF16 R24, R10, R12, R24 ;
        /*0090*/                   STL [R1+0x4], R7 ;
        /*00a0*/                   LDL R7, [R1+0x4] ;
        /*00b0*/                   STG.E.128 desc[UR4][R2.64], R16 ;
        /*00c0*/                   STG.E desc[UR4][R2.64+0x10], R20 ;
        /*00d0*/                   EXIT ;
        /*00e0*/                   BRA 0xe0;
		..........

		Function : emmy_matmul_epilogue
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/               @P1 LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;
        /*0020*/                   LDG.E.U16 R8, desc[UR4][R2.64] ;
        /*0030*/                   UTMALDG.2D [UR8], [UR6] ;
        /*0040*/                   UBLKCP.S.G [UR4], [UR6], UR8 ;
        /*0050*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0 ;
        /*0060*/                   MUFU.EX2 R3, R3 ;
        /*0070*/                   MUFU.RCP R4, R4 ;
        /*0080*/                   EXIT ;
		..........
"""

RES_USAGE = """
Fatbin elf code:
================
arch = sm_90a
code version = [1,8]
host = linux
compile_size = 64bit

Resource usage:
 Common:
  GLOBAL:0
 Function emmy_matmul_epilogue:
  REG:24 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:560 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function emmy_matmul:
  REG:128 STACK:16 SHARED:1024 LOCAL:8 CONSTANT[0]:568 CONSTANT[2]:12 TEXTURE:0 SURFACE:0 SAMPLER:0
"""

MATMUL_SOURCE = """// emmy nvrtc 13.0 --gpu-architecture=sm_90a --std=c++17 -default-device -Xptxas=-O3
#include <cuda_bf16.h>
// template: matmul tile_m=128 tile_n=64 tile_k=32 warps=4 stages=3 mma.sync m16n8k16 bf16 warps 2x2 A:16B cp.async stages=3 ldmatrix
//@emmy scratch 4096
//@emmy launch emmy_matmul 8 16 1 128 49152
//@emmy launch emmy_matmul_epilogue 64 1 1 256 0

extern "C" __global__ void emmy_matmul() {}
"""

ATTENTION_SOURCE = """// emmy nvrtc 13.0 --gpu-architecture=sm_90a --std=c++17 -default-device -Xptxas=-O1
// template: attention block_q=64 block_kv=128 warps=8 mma.sync m16n8k16 bf16 warps=2x4 Q:16B cp.async x2
//@emmy launch emmy_attention 16 8 1 256 0
"""


class Parsing(unittest.TestCase):
    def test_sass_counts_per_function(self):
        counts = ss.parse_sass(SASS)
        self.assertEqual(list(counts), ["emmy_matmul", "emmy_matmul_epilogue"])
        mm = counts["emmy_matmul"]
        self.assertEqual(mm["LDGSTS"], 2)  # one of them predicated @!P0
        self.assertEqual(mm["HMMA"], 3)
        self.assertEqual(mm["LDSM"], 2)
        self.assertEqual(mm["BAR"], 1)
        self.assertEqual((mm["STG.128"], mm["STG"]), (1, 1))
        self.assertEqual((mm["STL"], mm["LDL"]), (1, 1))
        self.assertEqual(mm["HGMMA"], 0)
        ep = counts["emmy_matmul_epilogue"]
        self.assertEqual((ep["LDG.128"], ep["LDG"]), (1, 1))  # .128.CONSTANT is 16-byte; .U16 is not
        self.assertEqual(ep["TMA"], 2)
        self.assertEqual(ep["HGMMA"], 1)
        self.assertEqual(ep["MUFU"], 2)
        self.assertEqual(ep["HMMA"], 0)

    def test_classify_leaves_other_opcodes_out(self):
        for opcode in ("LDC", "EXIT", "BRA", "LDS.128", "STS.128", "FFMA", "HFMA2.MMA", "WARPGROUP.ARRIVE"):
            self.assertIsNone(ss.classify(opcode), opcode)
        self.assertEqual(ss.classify("LDG.E.EL.128"), "LDG.128")
        self.assertEqual(ss.classify("LDG.E.64"), "LDG")
        self.assertEqual(ss.classify("UTMASTG.2D"), "TMA")

    def test_res_usage_fields_per_function(self):
        u = ss.parse_res_usage(RES_USAGE)
        self.assertEqual(u["emmy_matmul"]["REG"], 128)
        self.assertEqual(u["emmy_matmul"]["STACK"], 16)
        self.assertEqual(u["emmy_matmul"]["SHARED"], 1024)
        self.assertEqual(u["emmy_matmul"]["LOCAL"], 8)
        self.assertEqual(u["emmy_matmul"]["CONSTANT[2]"], 12)
        self.assertEqual(u["emmy_matmul_epilogue"]["REG"], 24)
        self.assertNotIn("GLOBAL", u)

    def test_source_note_options_and_launches(self):
        s = ss.Source(MATMUL_SOURCE)
        self.assertEqual(s.template, "matmul")
        self.assertEqual(s.knobs, {"tile_m": 128, "tile_n": 64, "tile_k": 32, "warps": 4, "stages": 3})
        self.assertTrue(s.path_note.startswith("mma.sync m16n8k16 bf16 warps 2x2"))
        self.assertEqual(s.regime, "deploy")
        self.assertEqual(s.launches["emmy_matmul"], ((8, 16, 1), 128, 49152))
        self.assertEqual(s.launches["emmy_matmul_epilogue"], ((64, 1, 1), 256, 0))

    def test_knobs_stop_at_the_path_note(self):
        # attention's note repeats "warps=" for the derived warp layout; the knob is the first one.
        s = ss.Source(ATTENTION_SOURCE)
        self.assertEqual(s.knobs, {"block_q": 64, "block_kv": 128, "warps": 8})
        self.assertIn("warps=2x4", s.path_note)
        self.assertEqual(s.regime, "rank")

    def test_source_without_note(self):
        s = ss.Source("//@emmy launch k 1 1 1 32 0\n")
        self.assertIsNone(s.template)
        self.assertEqual(s.regime, "?")


class Matching(unittest.TestCase):
    def kernel(self, template, config, name="linear"):
        return ss.chosen_kernels([{"kernels": [{"name": name, "template": template, "config": config}]}])[0]

    def test_config_with_more_knobs_agrees(self):
        s = ss.Source(MATMUL_SOURCE)
        self.assertTrue(ss.agrees(s, self.kernel("matmul", "stages=3 tile_k=32 tile_m=128 tile_n=64 warps=4 layout=x")))

    def test_one_knob_differs(self):
        s = ss.Source(MATMUL_SOURCE)
        self.assertFalse(ss.agrees(s, self.kernel("matmul", "stages=2 tile_k=32 tile_m=128 tile_n=64 warps=4")))

    def test_template_differs(self):
        s = ss.Source(MATMUL_SOURCE)
        self.assertFalse(ss.agrees(s, self.kernel("attention", "tile_m=128")))

    def test_fallback_without_knobs(self):
        s = ss.Source("// template: fallback\n//@emmy launch k 1 1 1 32 0\n")
        self.assertTrue(ss.agrees(s, self.kernel("fallback", "")))
        self.assertFalse(ss.agrees(s, self.kernel("fallback", "block=256")))

    def test_the_most_specific_build_is_the_chosen_one(self):
        # The wgmma path's note names wgmma=1; the mma.sync build of the same tiles does not.
        mma = ss.Entry("a.cubin", ss.Source(MATMUL_SOURCE), 1)
        wgmma = ss.Entry("b.cubin", ss.Source(MATMUL_SOURCE.replace("stages=3 mma.sync", "stages=3 wgmma=1 tma")), 2)
        sel = ss.select([mma, wgmma], [self.kernel("matmul", "stages=3 tile_k=32 tile_m=128 tile_n=64 warps=4 wgmma=1")], 0)
        self.assertEqual([e.cubin for e in sel["matmul"]], ["b.cubin"])
        sel = ss.select([ss.Entry("a.cubin", mma.source, 1), ss.Entry("b.cubin", wgmma.source, 2)],
                        [self.kernel("matmul", "stages=3 tile_k=32 tile_m=128 tile_n=64 warps=4 wgmma=0")], 0)
        self.assertEqual([e.cubin for e in sel["matmul"]], ["a.cubin"])

    def test_interrupted_report_has_no_kernels(self):
        self.assertEqual(ss.chosen_kernels([{"status": "interrupted"}]), [])


def write_cache(directory, sources):
    """Cubins (not real ones: these tests never disassemble) with their sources beside them."""
    for i, text in enumerate(sources):
        stem = os.path.join(directory, f"{i:02d}{0:030x}")
        with open(stem + ".cubin", "wb") as f:
            f.write(b"\x7fELF")
        with open(stem + ".cu", "w") as f:
            f.write(text)
        os.utime(stem + ".cubin", (1000 + i, 1000 + i))


def matmul(tile_m, regime="-O3"):
    return MATMUL_SOURCE.replace("tile_m=128", f"tile_m={tile_m}").replace("-Xptxas=-O3", f"-Xptxas={regime}")


class Selection(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        # 0: chosen config at rank, 1: the same at deploy, 2-5: other tiles, 6: attention
        write_cache(self.dir.name, [matmul(128, "-O1"), matmul(128), matmul(32), matmul(64),
                                    matmul(256), matmul(16), ATTENTION_SOURCE])
        self.report = {"kernels": [{"name": "linear", "template": "matmul",
                                    "config": "stages=3 tile_k=32 tile_m=128 tile_n=64 warps=4"}]}

    def tearDown(self):
        self.dir.cleanup()

    def test_chosen_first_deploy_build_only_then_newest_others(self):
        entries = ss.load_cache(self.dir.name)
        self.assertEqual(len(entries), 7)
        sel = ss.select(entries, ss.chosen_kernels([self.report]), others=2)
        self.assertEqual(list(sel), ["matmul", "attention"])
        mm = sel["matmul"]
        self.assertEqual([e.chosen_by for e in mm], [["linear"], [], []])
        self.assertEqual(mm[0].source.regime, "deploy")
        # the two newest other tiles: 16 (file 5), 256 (file 4)
        self.assertEqual([e.source.knobs["tile_m"] for e in mm[1:]], [16, 256])
        self.assertEqual(len(sel["attention"]), 1)

    def test_after_and_before_keep_one_tunes_cubins(self):
        # cubin i was written at 1000 + i; reports of two earlier tunes at 1002.5 and 1005.5
        first, second = (os.path.join(self.dir.name, n) for n in ("first.json", "second.json"))
        for path, t in ((first, 1002.5), (second, 1005.5)):
            with open(path, "w") as f:
                f.write("{}")
            os.utime(path, (t, t))
        buf = io.StringIO()
        with redirect_stdout(buf):
            rc = ss.main([self.dir.name, "--after", first, "--before", second, "--cuobjdump", "/nonexistent/x"])
        self.assertEqual(rc, 0)
        self.assertIn("3 cubins with source written in the --after/--before window", buf.getvalue())  # 3, 4, 5
        buf = io.StringIO()
        with redirect_stdout(buf):
            ss.main([self.dir.name, "--after", second, "--cuobjdump", "/nonexistent/x"])
        text = buf.getvalue()
        self.assertIn("1 cubins with source written in the --after/--before window", text)  # 6
        self.assertIn("**attention**", text)
        self.assertNotIn("**matmul**", text)
        self.assertEqual(ss.main([self.dir.name, "--after", os.path.join(self.dir.name, "missing.json")]), 2)

    def test_chosen_kernel_built_before_the_window_is_still_found(self):
        # The chosen config (files 0, 1) was a cache hit in this tune: its cubin keeps its old time.
        entries = ss.load_cache(self.dir.name, after=1002.5)
        inside = [e for e in entries if e.in_window]
        earlier = [e for e in entries if not e.in_window]
        self.assertEqual((len(inside), len(earlier)), (4, 3))
        sel = ss.select(inside, ss.chosen_kernels([self.report]), 0, earlier)
        self.assertEqual([(e.chosen_by, e.in_window) for e in sel["matmul"]], [(["linear"], False)])

    def test_script_without_cuobjdump_marks_the_chosen_kernel(self):
        report = os.path.join(self.dir.name, "tune.json")
        with open(report, "w") as f:
            json.dump(self.report, f)
        buf = io.StringIO()
        with redirect_stdout(buf):
            rc = ss.main([self.dir.name, report, "--others", "1", "--cuobjdump", "/nonexistent/cuobjdump"])
        self.assertEqual(rc, 0)
        text = buf.getvalue()
        self.assertIn("cuobjdump not found", text)
        rows = [line for line in text.splitlines() if line.startswith("| **linear**")]
        # the chosen cubin's two kernels, with their launches from the plan lines
        self.assertEqual(len(rows), 2)
        self.assertIn("| emmy_matmul | deploy | 8x16x1 x 128 |", rows[0])
        self.assertIn("| emmy_matmul_epilogue | deploy | 64x1x1 x 256 |", rows[1])
        self.assertIn("tile_m=128 tile_n=64 tile_k=32 warps=4 stages=3 (mma.sync", text)

    def test_script_with_counts_from_cuobjdump_output(self):
        # cuobjdump cannot run here (CI has none): a stand-in that prints the literal outputs above
        # drives the subprocess path; test_sass_cubin.py runs the real one where it exists.
        fake = os.path.join(self.dir.name, "cuobjdump")
        with open(fake, "w") as f:
            f.write(f"#!{sys.executable}\nimport sys\n"
                    f"print({RES_USAGE!r} if sys.argv[1] == '-res-usage' else {SASS!r})\n")
        os.chmod(fake, 0o755)
        report = os.path.join(self.dir.name, "tune.json")
        with open(report, "w") as f:
            json.dump(self.report, f)
        buf = io.StringIO()
        with redirect_stdout(buf):
            self.assertEqual(ss.main([self.dir.name, report, "--others", "0", "--cuobjdump", fake]), 0)
        head = ["chosen", "cubin", "kernel", "regime", "grid x block", "REG", "stack", "smem"] + ss.COLUMNS
        rows = [dict(zip(head, (c.strip() for c in line.strip("|").split("|"))))
                for line in buf.getvalue().splitlines() if line.startswith("| **linear**")]
        self.assertEqual([r["kernel"] for r in rows], ["emmy_matmul", "emmy_matmul_epilogue"])
        mm, ep = rows
        self.assertEqual((mm["REG"], mm["stack"], mm["smem"]), ("128", "16", str(1024 + 49152)))
        self.assertEqual((mm["HMMA"], mm["LDSM"], mm["LDGSTS"], mm["STL"]), ("3", "2", "2", "1"))
        self.assertEqual((ep["REG"], ep["HGMMA"], ep["TMA"], ep["MUFU"]), ("24", "1", "2", "2"))
        self.assertNotIn("cuobjdump not found", buf.getvalue())

    def test_empty_cache_says_so(self):
        with tempfile.TemporaryDirectory() as empty:
            buf = io.StringIO()
            with redirect_stdout(buf):
                self.assertEqual(ss.main([empty]), 0)
            self.assertIn("No cubin with its source", buf.getvalue())


if __name__ == "__main__":
    unittest.main()
