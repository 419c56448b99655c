"""Writes the .pt2 fixtures of the pt2 frontend's tests (issue 25) with torch.export.

Run on a machine with PyTorch 2.11 and transformers (the GPU machine of
scripts/gpu-roundtrip.sh):  python3 tests/frontends/pt2/make_fixtures.py OUT_DIR
Each fixture is small (random weights, tiny sizes) so that it can live in the repository;
`manifest.json` beside them records the PyTorch version, each fixture's inputs and the
reference outputs' shapes, and a few output values for numerical checks.
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(out_dir, exist_ok=True)
torch.manual_seed(0)
manifest = {"torch": torch.__version__, "fixtures": {}}


class Mlp(nn.Module):
    def __init__(self, d=32, h=64):
        super().__init__()
        self.gate = nn.Linear(d, h, bias=False)
        self.up = nn.Linear(d, h, bias=False)
        self.down = nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x)) + x


class RmsNorm(nn.Module):
    def __init__(self, d=32, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d))
        self.eps = eps

    def forward(self, x):
        v = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(v + self.eps)).to(x.dtype) * self.weight


class Attention(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class MatmulSoftmax(nn.Module):
    def forward(self, a, b):
        return torch.softmax(torch.matmul(a, b), dim=-1)


def save(name, module, args, dynamic_shapes=None, note=""):
    module.eval()
    with torch.no_grad():
        ep = torch.export.export(module, args, dynamic_shapes=dynamic_shapes)
        ref = module(*args)
    path = os.path.join(out_dir, name + ".pt2")
    torch.export.save(ep, path)
    outs = ref if isinstance(ref, (tuple, list)) else (ref,)
    manifest["fixtures"][name] = {
        "file": name + ".pt2",
        "bytes": os.path.getsize(path),
        "inputs": [{"shape": list(a.shape), "dtype": str(a.dtype)} for a in args],
        "outputs": [{"shape": list(o.shape), "dtype": str(o.dtype),
                     "first": [float(x) for x in o.float().flatten()[:4]]} for o in outs],
        "ops": sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function"}),
        "note": note,
    }
    print(name, os.path.getsize(path), "bytes", manifest["fixtures"][name]["ops"])


save("matmul_softmax", MatmulSoftmax(), (torch.randn(16, 24), torch.randn(24, 8)))
save("mlp_f32", Mlp(), (torch.randn(2, 8, 32),))
save("mlp_bf16", Mlp().to(torch.bfloat16), (torch.randn(2, 8, 32, dtype=torch.bfloat16),))
save("rmsnorm_bf16", RmsNorm().to(torch.bfloat16), (torch.randn(4, 32, dtype=torch.bfloat16),))
save("sdpa_causal", Attention(), tuple(torch.randn(1, 2, 16, 8) for _ in range(3)))
seq = torch.export.Dim("seq", min=2, max=4096)
save("mlp_dynamic_seq", Mlp(), (torch.randn(1, 8, 32),), dynamic_shapes=({1: seq},),
     note="dimension 1 of the input is dynamic (seq)")

try:
    from transformers import Qwen3Config
    from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer, Qwen3RotaryEmbedding

    class Layer(nn.Module):
        def __init__(self, attn):
            super().__init__()
            cfg = Qwen3Config(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                              num_key_value_heads=2, head_dim=16, num_hidden_layers=1,
                              vocab_size=128, max_position_embeddings=256)
            cfg._attn_implementation = attn
            self.layer = Qwen3DecoderLayer(cfg, 0)
            self.rope = Qwen3RotaryEmbedding(cfg)

        def forward(self, x):
            pos = torch.arange(x.shape[1]).unsqueeze(0)
            cos, sin = self.rope(x, pos)
            mask = torch.full((x.shape[1], x.shape[1]), float("-inf")).triu(1)[None, None]
            out = self.layer(x, attention_mask=mask, position_embeddings=(cos, sin), position_ids=pos)
            return out[0] if isinstance(out, tuple) else out

    for attn in ("sdpa", "eager"):
        save("qwen3_layer_tiny_" + attn, Layer(attn), (torch.randn(1, 8, 64),),
             note="transformers Qwen3DecoderLayer, tiny random config, attn " + attn)
except Exception as e:  # transformers missing or changed: the other fixtures still stand
    print("qwen3 layer fixtures skipped:", repr(e))
    manifest["qwen3_layer_error"] = repr(e)

with open(os.path.join(out_dir, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
print("torch", torch.__version__)
