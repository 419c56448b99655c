# Traces decoder layer 0 of a transformers Qwen3 model with torch.jit.trace, for the GPU round
# trip's structural-key check (issue 17): the same computation through the torchscript frontend
# and the hf frontend must get the same keys. No download: the config is the hf frontend's
# shipped config.json, the weights are random.
#   python trace_transformers_layer.py CONFIG_JSON OUT.pt SEQ
# OUT.pt takes hidden_states [1,SEQ,hidden], cos and sin [1,SEQ,head_dim] (bf16), as
# Qwen3Model passes them; the mask is left to sdpa's is_causal, as transformers does without
# padding. The input shapes are saved in the file for `emmy trace`.
import json
import sys
import warnings

import torch
import transformers
from transformers import Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer

warnings.filterwarnings("ignore")
config_path, out, seq = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(config_path) as f:
    config = Qwen3Config.from_dict(json.load(f))
config._attn_implementation = "sdpa"  # what a Qwen3 model uses by default
print(f"transformers {transformers.__version__}, torch {torch.__version__}, attention {config._attn_implementation}")


class Model(torch.nn.Module):
    # "layers" as in Qwen3Model, so that the module paths read "layers.0.self_attn.q_norm".
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Qwen3DecoderLayer(config, layer_idx=0)])

    def forward(self, hidden_states, cos, sin):
        out = self.layers[0](hidden_states, attention_mask=None, position_embeddings=(cos, sin))
        return out[0] if isinstance(out, tuple) else out  # transformers 4.x returns a tuple


head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
model = Model().to(torch.bfloat16).eval()
example = (
    torch.randn(1, seq, config.hidden_size, dtype=torch.bfloat16),
    torch.randn(1, seq, head_dim, dtype=torch.bfloat16),
    torch.randn(1, seq, head_dim, dtype=torch.bfloat16),
)
with torch.no_grad():
    traced = torch.jit.trace(model, example, check_trace=False)
shapes = f"1x{seq}x{config.hidden_size}:bf16,1x{seq}x{head_dim}:bf16,1x{seq}x{head_dim}:bf16"
torch.jit.save(traced, out, _extra_files={"emmy_input_shapes": shapes})
print(f"traced layer 0 into {out} ({shapes})")
