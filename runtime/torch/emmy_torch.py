"""An Emmy export (`emmy export`, docs/RUNTIME.md) as a PyTorch module.

    import emmy_torch
    m = emmy_torch.load("model.emmy")          # libemmy_torch's torch.classes.emmy.Model
    m.bind_weights(hf_model.state_dict())      # in place: the tensors are used, not copied
    y = m(hidden_states=x, cos=cos, sin=sin)   # a fresh tensor per output

A cuda export takes and returns tensors on the GPU (weights bound in place with the runtime's
bind_device, activations copied device to device into memory of the export's own, outputs copied
device to device into fresh tensors); a cpu export, tensors on the CPU. run_qwen3 runs a
transformers Qwen3 model's decoder stack (its embeddings and rotary tables computed by the model
itself) through a whole-model export.

The library is found, first hit wins: `library=` of load(), $EMMY_TORCH_LIBRARY, libemmy_torch.so
beside this file (the build tree's lib/ and an installation's lib/ hold both).
"""

from __future__ import annotations

import os
from typing import Dict, List, Mapping, Optional

import torch

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
           "f64": torch.float64, "i32": torch.int32, "i64": torch.int64, "bool": torch.bool,
           "u8": torch.uint8}
_loaded: Optional[str] = None


def load_library(library: Optional[str] = None) -> str:
    """Loads libemmy_torch once per process; returns its path."""
    global _loaded
    path = library or os.environ.get("EMMY_TORCH_LIBRARY") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "libemmy_torch.so")
    if _loaded is not None:
        if os.path.realpath(path) != os.path.realpath(_loaded):
            raise RuntimeError(f"emmy_torch: {_loaded} is loaded already; cannot load {path} too")
        return _loaded
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"emmy_torch: no libemmy_torch at {path} (build it: the CMake target emmy_torch, or "
            "scripts/libtorch-plugin.sh's build_emmy_torch; or set EMMY_TORCH_LIBRARY)")
    torch.ops.load_library(path)
    _loaded = path
    return path


def _packed_parts(name: str) -> List[str]:
    # A horizontal fusion's packed weight is one input named "a+b+c": the parts concatenated
    # along dim 0 (N of a [N, K] linear weight, or of a bias) in that order (fuse_horizontal).
    return name.split("+")


def _lookup(state_dict: Mapping[str, torch.Tensor], name: str) -> Optional[torch.Tensor]:
    # The export's name, else it without / with the "model." of a *ForCausalLM checkpoint.
    bare = name[len("model."):] if name.startswith("model.") else name
    for key in (name, bare, "model." + bare):
        if key in state_dict:
            return state_dict[key]
    return None


class EmmyModule(torch.nn.Module):
    """One loaded export. Inputs by name as the plan has them (`inputs`), weights among them."""

    def __init__(self, handle):
        super().__init__()
        self.handle = handle
        self.backend = handle.backend()
        # The runtime runs a cuda export on device $EMMY_CUDA_DEVICE (default 0), whatever
        # PyTorch's current device: its tensors and streams are taken there.
        self.device = (torch.device("cuda", int(os.environ.get("EMMY_CUDA_DEVICE") or 0))
                       if self.backend == "cuda" else torch.device("cpu"))
        self.input_names: List[str] = list(handle.input_names())
        self.output_names: List[str] = list(handle.output_names())
        # Asked once: a call into the custom class costs microseconds, and forward() would ask
        # for every input's role (a 28-layer model has 228 inputs) while the GPU waits.
        self._roles: Dict[str, str] = {n: handle.role(n) for n in self.input_names}
        self.weight_names: List[str] = [n for n in self.input_names if self._roles[n] == "weight"]
        # Inputs to give per call: neither weights nor the causal mask (filled at load).
        self.activation_names: List[str] = [
            n for n in self.input_names if self._roles[n] not in ("weight", "causal_mask")]

    def role(self, name: str) -> str:
        return self._roles[name] if name in self._roles else self.handle.role(name)

    def dtype(self, name: str) -> torch.dtype:
        return _DTYPES[self.handle.dtype(name)]

    def shape(self, name: str) -> List[int]:
        return list(self.handle.shape(name))

    def bind(self, name: str, tensor: torch.Tensor) -> None:
        """In place: the export reads `tensor`'s memory (held until bound again)."""
        self.handle.bind(name, tensor)

    def bind_weights(self, state_dict: Mapping[str, torch.Tensor], strict: bool = True) -> List[str]:
        """Binds every weight input from `state_dict`. The hf frontend names weights as the
        checkpoint does (Qwen3ForCausalLM's "model.layers.0.mlp.up_proj.weight"); a Qwen3Model's
        state_dict has them without "model.": either is found. A packed weight ("a+b+c") is the
        concatenation of its parts. Tensors are moved to the export's device and dtype where they
        are not there already (that copy is what the export then holds; a tensor already there
        is used in place). Returns the names bound; strict: a weight the state_dict lacks is an
        error naming it."""
        bound, missing = [], []
        for name in self.weight_names:
            parts = []
            for part in _packed_parts(name):
                hit = _lookup(state_dict, part)
                if hit is None:
                    missing.append(part)
                    break
                parts.append(hit)
            else:
                t = parts[0] if len(parts) == 1 else torch.cat(parts, dim=0)
                t = t.detach().to(self.device, self.dtype(name)).reshape(self.shape(name))
                self.handle.bind(name, t.contiguous())
                bound.append(name)
        if missing and strict:
            raise KeyError(f"emmy_torch: the state_dict has no {', '.join(missing[:8])}"
                           f"{' ...' if len(missing) > 8 else ''} ({len(missing)} weight(s) of "
                           f"the export missing; it has {len(state_dict)} entries)")
        return bound

    def forward(self, *args: torch.Tensor, **named: torch.Tensor):
        """Positional tensors are the activation inputs in the plan's order (activation_names),
        named ones any input by name; each is copied into the export's memory. Returns the output
        tensor, or a tuple when the export has several."""
        names = self.activation_names
        if len(args) > len(names):
            raise TypeError(f"emmy_torch: {len(args)} positional inputs, the export takes "
                            f"{len(names)} ({', '.join(names)})")
        given: Dict[str, torch.Tensor] = dict(zip(names, args))
        for k, v in named.items():
            if k in given:
                raise TypeError(f"emmy_torch: input '{k}' given twice")
            given[k] = v
        for k, v in given.items():
            self.handle.set(k, v)
        missing = list(self.handle.unbound())
        if missing:
            raise TypeError(f"emmy_torch: input(s) not given: {', '.join(missing[:8])}"
                            f"{' ...' if len(missing) > 8 else ''}")
        if self.backend == "cuda":
            # On PyTorch's current stream, no host wait: ordered like any op (the inputs were
            # copied in on that stream, the outputs are copied out on it).
            outs = self.handle.run_on(torch.cuda.current_stream(self.device).cuda_stream)
        else:
            outs = self.handle.run()
        return outs[0] if len(outs) == 1 else tuple(outs)


def load(export_dir: str, library: Optional[str] = None) -> EmmyModule:
    """Loads the export folder `export_dir` (what `emmy export --out` wrote)."""
    load_library(library)
    return EmmyModule(torch.classes.emmy.Model(os.fspath(export_dir)))


def qwen3_rotary(config, seq: int, dtype: torch.dtype, device) -> tuple:
    """cos, sin [seq, head_dim] as transformers' default rotary embedding computes them (the
    hf frontend's `cos` and `sin` inputs), for models without a rotary_emb module at hand."""
    dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64)
                                            .to(device=device, dtype=torch.float32) / dim))
    freqs = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def run_qwen3(export: EmmyModule, hf_model, input_ids: Optional[torch.Tensor] = None,
              hidden_states: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The decoder stack of a transformers Qwen3Model (or the `.model` of a Qwen3ForCausalLM)
    through `export` (weights bound already, bind_weights): its embeddings (unless the export
    starts from input_ids itself) and rotary tables computed by the model as transformers does,
    then every layer and the final norm by Emmy. Returns the final hidden states [B, S, H]."""
    model = getattr(hf_model, "model", hf_model)
    names = export.input_names
    if "input_ids" in names:
        if input_ids is None:
            raise TypeError("emmy_torch.run_qwen3: this export starts from input_ids")
        feeds = {"input_ids": input_ids}
        seq = input_ids.shape[-1]
        dtype = export.dtype("cos") if "cos" in names else torch.bfloat16
        probe = torch.empty(0, device=input_ids.device, dtype=dtype)
    else:
        if hidden_states is None:
            if input_ids is None:
                raise TypeError("emmy_torch.run_qwen3: give input_ids or hidden_states")
            hidden_states = model.embed_tokens(input_ids)
        hidden_states = hidden_states.to(export.device, export.dtype("hidden_states"))
        feeds = {"hidden_states": hidden_states}
        seq = hidden_states.shape[-2]
        probe = hidden_states
    if "cos" in names:
        position_ids = torch.arange(seq, device=probe.device).unsqueeze(0)
        rotary = getattr(model, "rotary_emb", None)
        if rotary is not None:
            cos, sin = rotary(probe, position_ids)
            cos, sin = cos[0], sin[0]
        else:
            cos, sin = qwen3_rotary(model.config, seq, export.dtype("cos"), probe.device)
        feeds["cos"] = cos.to(export.device, export.dtype("cos"))
        feeds["sin"] = sin.to(export.device, export.dtype("sin"))
    return export(**feeds)
