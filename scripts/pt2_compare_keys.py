# The pt2 frontend's structural-key check on the GPU machine (issue 25): transformers'
# Qwen3DecoderLayer at the real size of Qwen3-Embedding-0.6B (the hf frontend's shipped
# config.json, random weights, bf16), exported with torch.export for sdpa and for eager attention,
# then `emmy trace <file>.pt2 --json` against `emmy trace Qwen/Qwen3-Embedding-0.6B --layer 0
# --json`: the same computation must give the same kernels and keys.
#   /opt/torch/.venv/bin/python3 scripts/pt2_compare_keys.py EMMY_BIN OUT_DIR [SEQ]
# The layer takes hidden_states [1,SEQ,hidden], cos and sin [1,SEQ,head_dim], as Qwen3Model
# passes them (as scripts/trace_transformers_layer.py does for the torchscript frontend); the
# causal mask is built in forward as an additive -inf mask, which both attentions take.
# Prints "keys identical (sdpa): True" and "keys identical (eager): True"; exits 1 on a mismatch.
import json
import os
import tempfile
import subprocess
import sys
import warnings

import torch
import transformers
from transformers import Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer

warnings.filterwarnings("ignore")
emmy, out_dir = sys.argv[1], sys.argv[2]
seq = int(sys.argv[3]) if len(sys.argv) > 3 else 128
here = os.path.dirname(os.path.abspath(__file__))
config_path = os.path.join(here, "..", "plugins/frontends/hf/configs/Qwen/Qwen3-Embedding-0.6B/config.json")
os.makedirs(out_dir, exist_ok=True)
print(f"transformers {transformers.__version__}, torch {torch.__version__}, seq {seq}")


def export(attn):
    with open(config_path) as f:
        config = Qwen3Config.from_dict(json.load(f))
    config._attn_implementation = attn
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads

    class Model(torch.nn.Module):
        # "layers" as in Qwen3Model, so that the module paths read "layers.0.self_attn.q_norm".
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([Qwen3DecoderLayer(config, layer_idx=0)])

        def forward(self, hidden_states, cos, sin):
            s = hidden_states.shape[1]
            mask = torch.full((s, s), float("-inf"), dtype=hidden_states.dtype).triu(1)[None, None]
            out = self.layers[0](hidden_states, attention_mask=mask, position_embeddings=(cos, sin))
            return out[0] if isinstance(out, tuple) else out

    model = Model().to(torch.bfloat16).eval()
    args = (torch.randn(1, seq, config.hidden_size, dtype=torch.bfloat16),
            torch.randn(1, seq, head_dim, dtype=torch.bfloat16),
            torch.randn(1, seq, head_dim, dtype=torch.bfloat16))
    with torch.no_grad():
        ep = torch.export.export(model, args)
    # The archive (the layer's weights, ~30 MB) stays out of out_dir, which travels back from the
    # GPU machine under a size limit: only the reports go there.
    path = os.path.join(tempfile.gettempdir(), f"emmy_qwen3_layer0_{attn}.pt2")
    torch.export.save(ep, path)
    print(f"exported layer 0 ({attn}) into {path}: {os.path.getsize(path)} bytes")
    return path


def kernels(args, log):
    r = subprocess.run([emmy, "trace", *args, "--json"], capture_output=True, text=True)
    with open(log, "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        print(f"emmy trace {' '.join(args)} failed (see {log}):\n{r.stderr[-2000:]}")
        return None
    return {d["key"]: d for d in json.loads(r.stdout)["distinct"]}


ok = True
for attn in ("sdpa", "eager"):
    # The hf frontend's --attention says which of transformers' attentions it builds: sdpa (the
    # scores in f32) or eager (the scores rounded to bf16).
    hf = kernels(["Qwen/Qwen3-Embedding-0.6B", "--layer", "0", "--seq", str(seq), "--dtype", "bf16",
                  "--attention", attn], os.path.join(out_dir, f"pt2-keys-hf-{attn}.json"))
    exported = kernels([export(attn)], os.path.join(out_dir, f"pt2-keys-{attn}.json"))
    if exported is None or hf is None:
        print(f"keys identical ({attn}): False")
        ok = False
        continue
    for key in sorted(set(exported) | set(hf), key=lambda k: (hf.get(k) or exported.get(k))["name"]):
        e, h = exported.get(key), hf.get(key)
        print(f"{key[:16]}  hf {h['name'] if h else '-':34} pt2 {e['name'] if e else '-':34} "
              f"nodes {h['nodes'] if h else '-'}/{e['nodes'] if e else '-'}")
    same = set(exported) == set(hf)
    print(f"distinct kernels ({attn}): pt2 {len(exported)}, hf {len(hf)}")
    print(f"keys identical ({attn}): {same}")
    ok = ok and same
sys.exit(0 if ok else 1)
