"""Unit tests of bench/qwen_layer/qwen_table.py: matching Emmy kernels to PyTorch counterparts,
roofline floors, the layer row and the tables. Kernel entries are shaped like `emmy tune --json`
and `emmy trace --json` output for Qwen3-Embedding-0.6B layer 0 (names, templates, ops as the hf
frontend and the passes give them)."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.environ.get("EMMY_BENCH_QWEN_DIR",
                       os.path.join(HERE, "..", "..", "bench", "qwen_layer"))
sys.path.insert(0, BENCH)
import qwen_table as qt  # noqa: E402

CEIL = {"gemm_tflops": 738.0, "copy_tbs": 4.24}

# The default grouping (every structural fork fused), as `emmy trace --json --layer 0 --seq 512`
# shows it ("name": the module name trace gives); "op" is the name `emmy tune --json` gives the
# same kernel (seen on the H200 run of 2026-11-29).
DEFAULT = [
    {"key": "ln", "op": "mean", "name": "input_layernorm", "template": "reduction", "occurrences": 2,
     "ops": "pow+mean+add+rsqrt+mul"},
    {"key": "qkv", "op": "linear", "name": "self_attn.q_proj+k_proj+v_proj", "template": "matmul", "occurrences": 1,
     "ops": "linear"},
    {"key": "qn", "op": "mean", "name": "self_attn.q_norm", "template": "reduction", "occurrences": 1,
     "ops": "pow+mean+add+rsqrt+mul+neg"},
    {"key": "kn", "op": "mean", "name": "self_attn.k_norm", "template": "reduction", "occurrences": 1,
     "ops": "pow+mean+add+rsqrt+mul+neg"},
    {"key": "att", "op": "matmul", "name": "self_attn", "template": "fallback", "occurrences": 1,
     "ops": "matmul+mul+where+softmax"},
    {"key": "o", "op": "linear", "name": "self_attn.o_proj", "template": "matmul", "occurrences": 1, "ops": "linear+add"},
    {"key": "gu", "op": "linear", "name": "mlp.gate_proj+up_proj", "template": "matmul", "occurrences": 1, "ops": "linear"},
    {"key": "act", "op": "silu", "name": "mlp.up_proj", "template": "pointwise", "occurrences": 1, "ops": "silu+mul"},
    {"key": "down", "op": "linear", "name": "mlp.down_proj", "template": "matmul", "occurrences": 1, "ops": "linear+add"},
]

# Every fork split (fuse_horizontal, fuse_attention, fuse_epilogue = split).
SPLIT = [
    {"name": "self_attn.k_proj", "template": "matmul", "ops": "linear"},
    {"name": "matmul", "template": "matmul", "ops": "matmul+mul+where"},
    {"name": "self_attn", "template": "fallback", "ops": "softmax+matmul"},
    {"name": "self_attn.o_proj", "template": "matmul", "ops": "linear"},
    {"name": "attn_residual", "template": "pointwise", "ops": "add"},
    {"name": "mlp.gate_proj", "template": "matmul", "ops": "linear"},
    {"name": "silu", "template": "pointwise", "ops": "silu+mul"},
]


def tune_report(kernels, times, assembled=None):
    """A tune report's shape: op names, best_deploy_us, no ops (those come from the trace)."""
    ks = [{"key": k["key"], "name": k["op"], "template": k["template"],
           "occurrences": k["occurrences"], "best_deploy_us": t} for k, t in zip(kernels, times)]
    total = sum(k["best_deploy_us"] * k["occurrences"] for k in ks)
    return {"kernels": ks, "best_total_us": total, "assembled_us": assembled or 0}


class Classify(unittest.TestCase):
    def test_default_grouping_roles(self):
        roles = [qt.classify(k, 1, 512).role for k in DEFAULT]
        self.assertEqual(roles, ["rmsnorm", "linear", "qk_norm_rope", "qk_norm_rope", "attention",
                                 "linear", "linear", "silu_mul", "linear"])

    def test_sibling_norms_in_one_kernel_face_both_torch_kernels(self):
        both = {"key": "qkn", "name": "self_attn.q_norm+k_norm", "template": "reduction",
                "ops": "pow+mean+add+rsqrt+mul+neg"}
        cp = qt.classify(both, 8, 512)
        self.assertEqual((cp.role, cp.key, cp.spec), ("qk_norm_rope", "qk_norm_rope_both", (24,)))
        q = qt.classify(DEFAULT[2], 8, 512)
        k = qt.classify(DEFAULT[3], 8, 512)
        self.assertEqual((q.key, k.key), ("q_norm_rope", "k_norm_rope"))
        self.assertAlmostEqual(cp.flops, q.flops + k.flops)

    def test_fused_projections_sum_their_widths(self):
        qkv = qt.classify(DEFAULT[1], 1, 512)
        self.assertEqual(qkv.spec, (1024, 2048 + 1024 + 1024, False))
        self.assertEqual(qkv.key, "linear_K1024_N4096")
        gu = qt.classify(DEFAULT[6], 8, 512)
        self.assertEqual(gu.spec, (1024, 6144, False))
        self.assertEqual(gu.flops, 2.0 * 4096 * 1024 * 6144)

    def test_residual_epilogue_from_ops_or_name(self):
        o = qt.classify(DEFAULT[5], 1, 512)
        self.assertEqual(o.spec, (2048, 1024, True))
        self.assertIn("addmm", o.label)
        # Split epilogue: the same name with ops "linear" is a plain F.linear.
        self.assertEqual(qt.classify(SPLIT[3], 1, 512).spec, (2048, 1024, False))
        # No ops (tune report without a trace): o_proj/down_proj carry the residual by default.
        no_ops = {k: v for k, v in DEFAULT[8].items() if k != "ops"}
        self.assertEqual(qt.classify(no_ops, 1, 512).spec, (3072, 1024, True))

    def test_minimum_bytes_match_the_trace_of_the_frontend(self):
        # `emmy trace --json` at B=1 S=512 reports these bytes for the two matmuls.
        self.assertEqual(qt.classify(DEFAULT[1], 1, 512).bytes, 13631488)
        self.assertEqual(qt.classify(DEFAULT[5], 1, 512).bytes, 8388608)

    def test_split_grouping_roles(self):
        roles = [qt.classify(k, 1, 2048).role for k in SPLIT]
        self.assertEqual(roles, ["linear", "scores", "softmax_pv", "linear", "add", "linear", "silu_mul"])
        self.assertEqual(qt.classify(SPLIT[0], 1, 2048).spec, (1024, 1024, False))
        self.assertEqual(qt.classify(SPLIT[5], 1, 2048).spec, (1024, 3072, False))

    def test_attention_is_causal_gqa(self):
        a = qt.classify(DEFAULT[4], 2, 1024)
        self.assertEqual(a.key, "sdpa")
        self.assertEqual(a.flops, 4.0 * 2 * 16 * 1024 * 1024 * 128 / 2)
        self.assertEqual(a.bytes, 2 * (2 * 2 * 1024 * 16 * 128 + 2 * 2 * 1024 * 8 * 128))
        # Template "attention" (a fused template) is attention whatever its ops.
        self.assertEqual(qt.classify({"name": "self_attn", "template": "attention"}, 1, 512).role, "attention")

    def test_unknown_kernel_keeps_traced_floor_inputs(self):
        cp = qt.classify({"name": "odd", "template": "fallback", "ops": "exp", "flops": 10, "bytes": 4e6},
                         1, 512)
        self.assertEqual((cp.role, cp.key, cp.bytes), ("none", "", 4e6))


class Floors(unittest.TestCase):
    def test_floor_is_the_larger_bound(self):
        # 738e6 FLOPs take 1 µs; 4.24e6 bytes take 1 µs.
        self.assertAlmostEqual(qt.floor_us(738e6 * 3, 4.24e6, 738, 4.24), 3.0)
        self.assertAlmostEqual(qt.floor_us(738e6, 4.24e6 * 5, 738, 4.24), 5.0)

    def test_layer_floor_counts_every_weight_once(self):
        flops, nbytes = qt.layer_floor_inputs(1, 512)
        weights = 1024 * 2048 + 2 * 1024 * 1024 + 2048 * 1024 + 2 * 1024 * 3072 + 3072 * 1024
        self.assertGreaterEqual(nbytes, 2 * weights)
        self.assertAlmostEqual(flops - 2.0 * 512 * weights, 4.0 * 16 * 512 * 512 * 128 / 2)
        # Doubling the batch doubles the GEMM FLOPs but not the weight bytes.
        flops2, nbytes2 = qt.layer_floor_inputs(2, 512)
        self.assertAlmostEqual(flops2, 2 * flops)
        self.assertLess(nbytes2, 2 * nbytes)


class Tables(unittest.TestCase):
    def setUp(self):
        self.traced = {k["key"]: {"name": k["name"], "ops": k["ops"], "flops": 0, "bytes": 0}
                       for k in DEFAULT}
        times = [10.0, 20.0, 5.0, 4.0, 50.0, 12.0, 25.0, 8.0, 14.0]
        self.emmy = tune_report(DEFAULT, times, assembled=150.0)
        self.torch = {"rmsnorm": {"eager": 20.0, "compile": 8.0}, "linear_K1024_N4096": {"eager": 16.0},
                      "sdpa": {"eager": 25.0}, "layer": {"eager": 400.0, "compile": 200.0}}

    def test_rows_ratio_against_the_best_pytorch(self):
        rows = qt.kernel_rows(self.emmy, self.torch, 1, 512, CEIL, self.traced)
        self.assertEqual(len(rows), len(DEFAULT))
        norm, qkv, att = rows[0], rows[1], rows[4]
        self.assertAlmostEqual(norm["ratio"], 10.0 / 8.0)  # best of eager 20, compile 8
        self.assertAlmostEqual(qkv["ratio"], 20.0 / 16.0)
        self.assertAlmostEqual(att["ratio"], 2.0)
        self.assertIsNone(rows[2]["ratio"])  # q_norm: no PyTorch time given
        for r in rows:
            self.assertGreater(r["floor_us"], 0)
            self.assertLessEqual(r["emmy_pct_floor"], 100.0 * r["floor_us"] / r["emmy_us"] + 1e-9)

    def test_the_trace_gives_module_names_to_the_op_named_kernels(self):
        rows = qt.kernel_rows(self.emmy, self.torch, 1, 512, CEIL, self.traced)
        self.assertEqual(rows[0]["name"], "input_layernorm (mean)")
        self.assertEqual(rows[1]["name"], "self_attn.q_proj+k_proj+v_proj (linear)")

    def test_without_a_trace_no_gemm_is_guessed(self):
        # Op names alone do not say which projection (hence N) a "linear" is.
        rows = qt.kernel_rows(self.emmy, self.torch, 1, 512, CEIL, None)
        self.assertEqual([r["role"] for r in rows if r["template"] == "matmul"], ["none"] * 4)
        self.assertEqual(rows[7]["role"], "silu_mul")

    def test_split_attention_sums_both_kernels_against_sdpa(self):
        scores = {"key": "sc", "op": "matmul", "name": "matmul", "template": "matmul", "occurrences": 1,
                  "ops": "matmul+mul+where"}
        pv = {"key": "pv", "op": "matmul", "name": "self_attn", "template": "fallback", "occurrences": 1,
              "ops": "softmax+matmul"}
        kernels = [DEFAULT[0], scores, pv]
        traced = {k["key"]: {"name": k["name"], "ops": k["ops"]} for k in kernels}
        emmy = tune_report(kernels, [10.0, 30.0, 40.0])
        rows = qt.kernel_rows(emmy, {"sdpa": {"eager": 35.0}}, 1, 512, CEIL, traced)
        self.assertEqual([r["role"] for r in rows], ["rmsnorm", "scores", "softmax_pv", "attention_total"])
        self.assertAlmostEqual(rows[-1]["ratio"], 70.0 / 35.0)
        md = qt.render_shape(1, 512, rows, qt.layer_row(emmy, {}, 1, 512, CEIL))
        # The summary row is not counted twice in the sum: 2 x 10 + 30 + 40.
        self.assertIn("| **Σ kernels × occurrences** | | | 90.0 |", md)

    def test_layer_target_against_torch_compile(self):
        lay = qt.layer_row(self.emmy, self.torch, 1, 512, CEIL)
        self.assertAlmostEqual(lay["ratio_compile"], 0.75)
        self.assertTrue(lay["met"])
        slower = dict(self.emmy, assembled_us=151.0)
        self.assertFalse(qt.layer_row(slower, self.torch, 1, 512, CEIL)["met"])
        # No assembled measurement: the sum of kernels stands in.
        no_assembled = dict(self.emmy, assembled_us=0)
        self.assertAlmostEqual(qt.layer_row(no_assembled, self.torch, 1, 512, CEIL)["ratio_compile"],
                               self.emmy["best_total_us"] / 200.0)
        self.assertIsNone(qt.layer_row(self.emmy, {}, 1, 512, CEIL)["met"])
        # The layer is compared by its median (PyTorch's times are medians), not by the
        # validation gap's 20th percentile in assembled_us.
        with_median = dict(self.emmy, assembled_us=140.0, assembled_median_us=151.0)
        self.assertEqual(qt.layer_row(with_median, self.torch, 1, 512, CEIL)["emmy_assembled_us"], 151.0)
        self.assertFalse(qt.layer_row(with_median, self.torch, 1, 512, CEIL)["met"])
        # The program timed end to end (one L2 flush per sample, as PyTorch's layer is) is what
        # the ratios take when the report has it; the assembled figure stays beside it.
        e2e = dict(with_median, end_to_end_us=120.0)
        lay = qt.layer_row(e2e, self.torch, 1, 512, CEIL)
        self.assertAlmostEqual(lay["ratio_compile"], 0.6)
        self.assertEqual(lay["emmy_assembled_us"], 151.0)
        self.assertTrue(lay["met"])
        md = qt.render_shape(1, 512, [], lay)
        self.assertIn("| Qwen3DecoderLayer | 120.0 | 151.0 |", md)

    def test_render_shape_has_every_kernel_and_the_layer(self):
        rows = qt.kernel_rows(self.emmy, self.torch, 1, 512, CEIL, self.traced)
        md = qt.render_shape(1, 512, rows, qt.layer_row(self.emmy, self.torch, 1, 512, CEIL))
        for k in DEFAULT:
            self.assertIn(f"| {k['name']} ({k['op']}) |", md)
        self.assertIn("B=1 S=512", md)
        self.assertIn("| Qwen3DecoderLayer | — | 150.0 |", md)
        self.assertIn("| 0.75 | ≤ 0.75 | yes |", md)
        header = md.splitlines()[2]
        self.assertEqual(header.count("|"), md.splitlines()[3].count("|"))

    def test_each_template_best_per_kernel_with_the_chosen_one_marked(self):
        qkv_key = DEFAULT[1]["key"]
        variants = [{"structural_key": qkv_key, "variants": [
            {"template": "matmul", "regime": "deploy", "status": "ok", "time_us": 16.5},
            {"template": "matmul", "regime": "deploy", "status": "ok", "time_us": 15.9},
            {"template": "matmul", "regime": "rank", "status": "ok", "time_us": 9.0},  # rank: not compared
            {"template": "cublaslt", "regime": "deploy", "status": "ok", "time_us": 11.8},
            {"template": "cublaslt", "regime": "deploy", "status": "wrong_result", "time_us": 1.0}]}]
        per = qt.best_per_template(variants)
        self.assertEqual(per, {qkv_key: {"matmul": 15.9, "cublaslt": 11.8}})
        emmy = dict(self.emmy, kernels=[dict(k) for k in self.emmy["kernels"]])
        emmy["kernels"][1]["template"] = "cublaslt"
        rows = qt.kernel_rows(emmy, self.torch, 1, 512, CEIL, self.traced, qt.QWEN3_06B, per)
        self.assertEqual(rows[1]["candidates"], "**cublaslt 11.8** · matmul 15.9")
        self.assertEqual(rows[1]["role"], "linear")  # a cublaslt kernel is still the qkv GEMM
        self.assertEqual(rows[0]["candidates"], "")  # one template only: nothing to compare
        md = qt.render_shape(1, 512, rows, qt.layer_row(emmy, self.torch, 1, 512, CEIL))
        self.assertIn("**cublaslt 11.8** · matmul 15.9", md)
        lines = md.splitlines()
        self.assertEqual(lines[2].count("|"), lines[4].count("|"))

    def test_gemm_specs_cover_projections_and_emmy_kernels(self):
        odd = {"kernels": [{"key": "x", "name": "self_attn.k_proj+v_proj", "template": "matmul"}]}
        specs = qt.gemm_specs(odd, 1, 512)
        self.assertIn((1024, 2048, False), specs)  # k+v fused, only from Emmy's kernel
        self.assertIn((1024, 4096, False), specs)
        self.assertIn((3072, 1024, True), specs)


class ModelCost(unittest.TestCase):
    def test_rerun_must_launch_nothing(self):
        first = {"status": "ok", "launches": 900, "kernels_total": 337}
        md = qt.render_model_cost(first, {"status": "ok", "launches": 0}, 420.0, 3.2, "emmy tune X")
        self.assertEqual(md.count("| yes |"), 2)
        md = qt.render_model_cost(first, {"status": "ok", "launches": 4}, 420.0, 3.2, "emmy tune X")
        self.assertIn("| ≤ 10 s, 0 launches | no |", md)
        md = qt.render_model_cost({}, {}, None, None, "emmy tune X")
        self.assertNotIn("| yes |", md)


class Sources(unittest.TestCase):
    def test_torch_driver_compiles(self):
        path = os.path.join(BENCH, "bench_torch.py")
        with open(path) as f:
            compile(f.read(), path, "exec")


if __name__ == "__main__":
    unittest.main()
