"""The PyTorch op (runtime/torch: libemmy_torch + emmy_torch.py) on cpu exports made here by the
real `emmy tune` + `emmy export` (issue 22, item 3): a matmul, one Qwen3 layer and a two-layer
Qwen3 model of a tiny config, each loaded from Python through torch.ops.load_library and compared
with PyTorch's own result (qwen3_reference.py: the model in plain torch ops), weights bound by
their names from a state_dict; in-place binding, copies per call and the errors for bad input.

Run by ctest (runtime_torch_test) with EMMY (the binary), EMMY_TORCH_LIBRARY and PYTHONPATH (the
build's lib/, where emmy_torch.py is) set; a fresh EMMY_HOME per test class.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import torch

import emmy_torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen3_reference as ref  # noqa: E402

EMMY = os.environ.get("EMMY", "emmy")
# Fast, deterministic tunes: the point here is the op, not the search.
TUNE = ["--backend", "cpu", "--patience", "1", "--samples", "3", "--warmup", "1",
        "--prior", "roofline", "--no-progress"]
TINY = {"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "intermediate_size": 128, "vocab_size": 97, "rms_norm_eps": 1e-6, "rope_theta": 1000000,
        "hidden_act": "silu", "attention_bias": False, "tie_word_embeddings": True}
MATMUL = "torch.matmul(torch.randn(48,64), torch.randn(64,32))"


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.nn.functional.cosine_similarity(a.double().flatten(), b.double().flatten(),
                                                 dim=0).item()


def _has_transformers() -> bool:
    try:
        import transformers  # noqa: F401
        return True
    except ImportError:
        return False


class Home:
    """A temporary EMMY_HOME and the emmy commands run in it."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="emmy-torch-test-")
        self.env = dict(os.environ, EMMY_HOME=self.dir, EMMY_DB=os.path.join(self.dir, "tuning.db"))

    def emmy(self, *args: str) -> str:
        r = subprocess.run([EMMY, *args], env=self.env, capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError(f"emmy {' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r.stdout

    def tune_and_export(self, name: str, *source: str) -> str:
        out = os.path.join(self.dir, name)
        self.emmy("tune", *source, *TUNE)
        self.emmy("export", *source, "--backend", "cpu", "--out", out)
        return out

    def tiny_config(self) -> str:
        folder = os.path.join(self.dir, "tiny-qwen3")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(TINY, f)
        return folder

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class MatmulOp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.home = Home()
        cls.path = cls.home.tune_and_export("mm.emmy", "--code", MATMUL)

    @classmethod
    def tearDownClass(cls):
        cls.home.remove()

    def test_matches_torch_and_copies_per_call(self):
        m = emmy_torch.load(self.path)
        self.assertEqual(m.backend, "cpu")
        self.assertEqual(m.activation_names, ["arg0", "arg1"])
        self.assertEqual(m.shape("arg0"), [48, 64])
        self.assertEqual(m.output_names and m.shape(m.output_names[0]), [48, 32])
        g = torch.Generator().manual_seed(1)
        for _ in range(2):  # a second call with other inputs: each call's inputs are copied in
            a, b = torch.randn(48, 64, generator=g), torch.randn(64, 32, generator=g)
            y = m(a, b)
            self.assertEqual(y.shape, (48, 32))
            self.assertEqual(y.dtype, torch.float32)
            torch.testing.assert_close(y, a @ b, rtol=1e-4, atol=1e-4)
        # set copies: changing the caller's tensor afterwards changes nothing
        a, b = torch.randn(48, 64, generator=g), torch.randn(64, 32, generator=g)
        expected = a @ b
        m.handle.set("arg0", a)
        m.handle.set("arg1", b)
        a.zero_()
        torch.testing.assert_close(m.handle.run()[0], expected, rtol=1e-4, atol=1e-4)
        # run_on(stream) is the cuda form: a cpu export names what to call instead
        with self.assertRaisesRegex(RuntimeError, r"run_on\(stream\) runs a cuda export; this one is cpu"):
            m.handle.run_on(0)

    def test_bind_is_in_place_and_outputs_are_fresh(self):
        m = emmy_torch.load(self.path)
        a, b = torch.randn(48, 64), torch.randn(64, 32)
        m.bind("arg1", b)
        y1 = m(arg0=a)
        b.mul_(2)  # the export reads b's memory: the next run sees the change
        y2 = m(arg0=a)
        torch.testing.assert_close(y2, 2 * (a @ (b / 2)), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(y1, a @ (b / 2), rtol=1e-4, atol=1e-4)  # y1 is its own copy
        # a strided tensor is made contiguous for the binding
        bt = torch.randn(32, 64).t()
        m.bind("arg1", bt)
        torch.testing.assert_close(m(arg0=a), a @ bt, rtol=1e-4, atol=1e-4)

    def test_bad_input_is_named(self):
        m = emmy_torch.load(self.path)
        with self.assertRaisesRegex(RuntimeError, r"'arg0' is f32 in the export, the tensor is (Double|double)"):
            m(torch.randn(48, 64, dtype=torch.float64), torch.randn(64, 32))
        with self.assertRaisesRegex(RuntimeError, r"'arg1' has shape \[64, 32\] in the export, the tensor \[32, 32\]"):
            m(torch.randn(48, 64), torch.randn(32, 32))
        with self.assertRaisesRegex(RuntimeError, "no input or output named 'x'.*arg0, arg1"):
            m.handle.set("x", torch.randn(2))
        with self.assertRaisesRegex(TypeError, "not given: arg1"):
            emmy_torch.load(self.path)(torch.randn(48, 64))
        with self.assertRaisesRegex(TypeError, "3 positional inputs, the export takes 2"):
            m(torch.randn(48, 64), torch.randn(64, 32), torch.randn(1))
        with self.assertRaisesRegex(RuntimeError, "no such file"):
            emmy_torch.load(os.path.join(self.home.dir, "missing.emmy"))


class Qwen3Op(unittest.TestCase):
    """One layer and the whole (two-layer) model of a tiny Qwen3 config, f32 at seq 8."""

    @classmethod
    def setUpClass(cls):
        cls.home = Home()
        cls.config = cls.home.tiny_config()
        cls.cfg = ref.Config(os.path.join(cls.config, "config.json"))
        cls.weights = ref.random_weights(cls.cfg, torch.float32)
        opts = ["--seq", "8", "--dtype", "f32"]
        cls.layer = cls.home.tune_and_export("layer1.emmy", cls.config, "--layer", "1", *opts)
        cls.model = cls.home.tune_and_export("model.emmy", cls.config, *opts)

    @classmethod
    def tearDownClass(cls):
        cls.home.remove()

    def test_layer_matches_torch(self):
        m = emmy_torch.load(self.layer)
        self.assertEqual(m.activation_names, ["hidden_states", "cos", "sin"])
        bound = m.bind_weights(self.weights)
        self.assertEqual(len(bound), len(m.weight_names))
        # named as the checkpoint (Qwen3ForCausalLM's "model."), bound from Qwen3Model's names
        self.assertTrue(all(n.startswith("model.layers.1.") for n in m.weight_names), m.weight_names)
        x = torch.randn(1, 8, self.cfg.hidden_size, generator=torch.Generator().manual_seed(2))
        cos, sin = ref.rotary(self.cfg, 8, torch.float32)
        y = m(hidden_states=x, cos=cos, sin=sin)
        expected = ref.layer(self.cfg, self.weights, 1, x, cos, sin)
        self.assertEqual(y.shape, expected.shape)
        torch.testing.assert_close(y, expected, rtol=1e-3, atol=1e-3)
        # emmy_torch's own rotary tables are the reference's
        c2, s2 = emmy_torch.qwen3_rotary(self.cfg, 8, torch.float32, "cpu")
        torch.testing.assert_close(c2, cos)
        torch.testing.assert_close(s2, sin)

    def test_whole_model_through_run_qwen3(self):
        t0 = time.perf_counter()
        m = emmy_torch.load(self.model)
        m.bind_weights(self.weights)
        loaded = time.perf_counter() - t0
        names = set(n.removeprefix("model.") for w in m.weight_names for n in w.split("+"))
        expected_names = {n for n in self.weights if n != "embed_tokens.weight"}
        self.assertEqual(names, expected_names)  # every weight of both layers and the final norm
        hf_like = ref.Qwen3Like(self.cfg, self.weights)
        ids = torch.randint(0, self.cfg.vocab_size, (1, 8), generator=torch.Generator().manual_seed(3))
        y = emmy_torch.run_qwen3(m, hf_like, input_ids=ids)
        expected = ref.model(self.cfg, self.weights, hf_like.embed_tokens(ids))
        torch.testing.assert_close(y, expected, rtol=1e-3, atol=1e-3)
        self.assertGreater(cosine(y, expected), 0.99999)
        print(f"\nwhole tiny model: load + bind {loaded * 1e3:.1f} ms", file=sys.stderr)

    def test_state_dict_names_with_a_prefix_and_missing_ones(self):
        m = emmy_torch.load(self.layer)
        prefixed = {"model." + k: v for k, v in self.weights.items()}  # Qwen3ForCausalLM's names
        self.assertEqual(len(m.bind_weights(prefixed)), len(m.weight_names))
        partial = {k: v for k, v in self.weights.items() if "mlp.down_proj" not in k}
        with self.assertRaisesRegex(KeyError, "model.layers.1.mlp.down_proj.weight"):
            m.bind_weights(partial)
        # bf16 weights are converted to the export's f32 (and that copy held)
        m2 = emmy_torch.load(self.layer)
        m2.bind_weights({k: v.to(torch.bfloat16) for k, v in self.weights.items()})
        self.assertEqual(m2.handle.unbound(), ["hidden_states", "cos", "sin"])

    @unittest.skipUnless(_has_transformers(), "transformers not installed (CI: Debian has none)")
    def test_transformers_qwen3model(self):
        from transformers import Qwen3Config, Qwen3Model
        hf = Qwen3Model(Qwen3Config(**TINY)).eval()
        missing, unexpected = hf.load_state_dict(self.weights, strict=False)
        self.assertEqual(unexpected, [])
        m = emmy_torch.load(self.model)
        m.bind_weights(hf.state_dict())
        ids = torch.randint(0, self.cfg.vocab_size, (1, 8))
        with torch.no_grad():
            expected = hf(input_ids=ids).last_hidden_state
        y = emmy_torch.run_qwen3(m, hf, input_ids=ids)
        self.assertGreater(cosine(y, expected), 0.9999)


if __name__ == "__main__":
    unittest.main()
