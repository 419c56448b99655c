"""A Qwen3 decoder in plain PyTorch ops, written from transformers' modeling_qwen3 (RMSNorm in
f32, per-head q/k RMSNorm, rotary tables, grouped-query causal attention with softmax in f32,
SiLU-gated MLP), as the independent reference of the PyTorch-op tests: transformers is not
installed on the CI machine. Weights are a dict named as transformers' Qwen3Model state_dict."""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F


class Config:
    def __init__(self, path: str):
        with open(path) as f:
            j = json.load(f)
        self.hidden_size = j["hidden_size"]
        self.num_hidden_layers = j["num_hidden_layers"]
        self.num_attention_heads = j["num_attention_heads"]
        self.num_key_value_heads = j.get("num_key_value_heads") or self.num_attention_heads
        self.head_dim = j.get("head_dim") or self.hidden_size // self.num_attention_heads
        self.intermediate_size = j["intermediate_size"]
        self.vocab_size = j["vocab_size"]
        self.rms_norm_eps = j.get("rms_norm_eps", 1e-6)
        self.rope_theta = j.get("rope_theta", 10000.0)


def random_weights(cfg: Config, dtype: torch.dtype, seed: int = 0) -> dict:
    """Every weight of the model, random (norm weights around 1, projections scaled 1/sqrt(in))."""
    g = torch.Generator().manual_seed(seed)
    h, d, inter = cfg.hidden_size, cfg.head_dim, cfg.intermediate_size
    nq, nkv = cfg.num_attention_heads * d, cfg.num_key_value_heads * d

    def lin(n, k):
        return (torch.randn(n, k, generator=g) / k ** 0.5).to(dtype)

    def norm(n):
        return (1.0 + 0.1 * torch.randn(n, generator=g)).to(dtype)

    w = {"embed_tokens.weight": torch.randn(cfg.vocab_size, h, generator=g).to(dtype),
         "norm.weight": norm(h)}
    for i in range(cfg.num_hidden_layers):
        p = f"layers.{i}."
        w.update({p + "input_layernorm.weight": norm(h), p + "post_attention_layernorm.weight": norm(h),
                  p + "self_attn.q_proj.weight": lin(nq, h), p + "self_attn.k_proj.weight": lin(nkv, h),
                  p + "self_attn.v_proj.weight": lin(nkv, h), p + "self_attn.o_proj.weight": lin(h, nq),
                  p + "self_attn.q_norm.weight": norm(d), p + "self_attn.k_norm.weight": norm(d),
                  p + "mlp.gate_proj.weight": lin(inter, h), p + "mlp.up_proj.weight": lin(inter, h),
                  p + "mlp.down_proj.weight": lin(h, inter)})
    return w


def rms_norm(x, w, eps):
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary(cfg: Config, seq: int, dtype):
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2).float() / cfg.head_dim))
    freqs = torch.outer(torch.arange(seq).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def layer(cfg: Config, w: dict, i: int, x, cos, sin):
    p, eps = f"layers.{i}.", cfg.rms_norm_eps
    b, s, _ = x.shape
    nh, nkv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
    q = F.linear(h, w[p + "self_attn.q_proj.weight"]).view(b, s, nh, d)
    k = F.linear(h, w[p + "self_attn.k_proj.weight"]).view(b, s, nkv, d)
    v = F.linear(h, w[p + "self_attn.v_proj.weight"]).view(b, s, nkv, d)
    q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps).transpose(1, 2)
    k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps).transpose(1, 2)
    v = v.transpose(1, 2)
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    k, v = k.repeat_interleave(nh // nkv, dim=1), v.repeat_interleave(nh // nkv, dim=1)
    scores = (q @ k.transpose(-1, -2)) * d ** -0.5
    causal = torch.ones(s, s, dtype=torch.bool).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    attn = torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v
    x = x + F.linear(attn.transpose(1, 2).reshape(b, s, nh * d), w[p + "self_attn.o_proj.weight"])
    h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
    m = F.silu(F.linear(h, w[p + "mlp.gate_proj.weight"])) * F.linear(h, w[p + "mlp.up_proj.weight"])
    return x + F.linear(m, w[p + "mlp.down_proj.weight"])


def model(cfg: Config, w: dict, hidden_states):
    """Every layer, then the final norm: Qwen3Model's last_hidden_state from its embeddings."""
    cos, sin = rotary(cfg, hidden_states.shape[1], hidden_states.dtype)
    x = hidden_states
    for i in range(cfg.num_hidden_layers):
        x = layer(cfg, w, i, x, cos, sin)
    return rms_norm(x, w["norm.weight"], cfg.rms_norm_eps)


class Qwen3Like(torch.nn.Module):
    """What emmy_torch.run_qwen3 reads of a transformers model: config, embed_tokens (no
    rotary_emb: run_qwen3 then computes the tables itself)."""

    def __init__(self, cfg: Config, w: dict):
        super().__init__()
        self.config = cfg
        self.embed_tokens = torch.nn.Embedding.from_pretrained(w["embed_tokens.weight"])
