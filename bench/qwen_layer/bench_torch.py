"""PyTorch side of the Qwen3-layer benchmark (issue 12), run on the GPU machine by run.sh after
Emmy has tuned each shape. Measures, in this one process:

  - the ceilings: an 8192^3 bf16 matmul (TFLOP/s) and a 1 GiB device copy (TB/s, read + write);
  - transformers' Qwen3DecoderLayer (random weights from the shipped config, sdpa attention,
    bf16), eager and torch.compile, whole layer;
  - per-kernel counterparts: every projection with F.linear / torch.addmm (cuBLAS) at its shape,
    the fused-projection shapes Emmy's groupings use, RMSNorm, q/k norm + RoPE, SiLU*mul and the
    residual add eager and compiled, SDPA (causal, GQA), and the split attention's two halves;

then joins them with Emmy's `emmy tune --json` reports (qwen_table.py) and writes the tables.

Timing matches emmy-cuda-worker (plugins/backends/cuda/worker/worker_main.cpp): the op is
captured into a CUDA graph, warmed up, and each sample is: L2 flush (write a buffer of
max(2 x L2, 128 MiB)), event, one graph replay, event, synchronize; the median is reported.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen_table as qt  # noqa: E402


class Timer:
    def __init__(self, samples: int, warmup: int = 5, flush: bool = True):
        self.samples, self.warmup = samples, warmup
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0)
        n = max(2 * l2, 128 << 20) // 4
        self.flush_buf = torch.empty(n, dtype=torch.int32, device="cuda") if flush else None

    @staticmethod
    def _capture(fn):
        """fn warmed up on a side stream (as graph capture requires), then captured."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        return g

    def _replay_us(self, g, i: int, start, stop) -> float:
        """One timed replay of g after an L2 flush (fill value i, so no fill is a no-op)."""
        if self.flush_buf is not None:
            self.flush_buf.fill_(i)
        start.record()
        g.replay()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) * 1000.0

    def graph_us(self, fn) -> float:
        """Median µs of one CUDA-graph replay of fn, L2 flushed before each sample."""
        g = self._capture(fn)
        for _ in range(self.warmup):
            g.replay()
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = [self._replay_us(g, i, start, stop) for i in range(self.samples)]
        del g
        return statistics.median(times)

    def interleaved_graph_us(self, fns, samples: int) -> list:
        """Each of fns captured into a CUDA graph (as graph_us), then their replays interleaved
        sample by sample, the order reversed every other sample (A B, B A, A B, ...), each
        sample after an L2 flush: every fn's samples see the same stretch of the GPU's clocks and
        temperature, and each follows the others as often as itself. Returns the samples (µs)
        per fn, in fns' order."""
        graphs = [self._capture(fn) for fn in fns]
        for g in graphs:
            for _ in range(self.warmup):
                g.replay()
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = [[] for _ in graphs]
        for i in range(samples):
            order = range(len(graphs)) if i % 2 == 0 else reversed(range(len(graphs)))
            for k in order:
                times[k].append(self._replay_us(graphs[k], i, start, stop))
        del graphs
        return times

    def stream_us(self, fn) -> float:
        """The same, with fn launched on the stream (no graph): for ops a graph changes."""
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(self.warmup):
            fn()
        times = []
        for i in range(self.samples):
            if self.flush_buf is not None:
                self.flush_buf.fill_(i)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1000.0)
        return statistics.median(times)


def ceilings(timer: Timer) -> dict:
    """bf16 GEMM TFLOP/s at 8192^3 and copy TB/s (bytes read + written) of a 1 GiB tensor."""
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    t_mm = timer.graph_us(lambda: torch.matmul(a, b))
    src = torch.empty(1 << 29, device="cuda", dtype=torch.bfloat16).normal_()  # 1 GiB
    dst = torch.empty_like(src)
    # A memcpy captured in a graph becomes a memcpy node, which ran at 2.6 TB/s on the H200
    # (copy engine, it seems); the same copy on a stream and an SM kernel (x * 1) reach more.
    # The ceiling is the best of the three; all are kept in results.json.
    copies = {"graph_memcpy": timer.graph_us(lambda: dst.copy_(src)),
              "stream_memcpy": timer.stream_us(lambda: dst.copy_(src)),
              "graph_kernel": timer.graph_us(lambda: torch.mul(src, 1, out=dst))}
    t_cp = min(copies.values())
    del a, b, src, dst
    return {"gemm_tflops": 2.0 * n ** 3 / (t_mm * 1e-6) / 1e12, "gemm_us": t_mm,
            "copy_tbs": 2.0 * (1 << 30) / (t_cp * 1e-6) / 1e12, "copy_us": t_cp,
            "copy_variants_tbs": {k: 2.0 * (1 << 30) / (t * 1e-6) / 1e12 for k, t in copies.items()}}


def load_layer(config_path: str):
    from transformers import Qwen3Config
    from transformers.models.qwen3 import modeling_qwen3 as mq
    with open(config_path) as f:
        cfg = Qwen3Config(**json.load(f))
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    layer = mq.Qwen3DecoderLayer(cfg, layer_idx=0).to("cuda", torch.bfloat16).eval()
    rope = mq.Qwen3RotaryEmbedding(config=cfg).to("cuda")
    return cfg, layer, rope, mq


def layer_call(layer, x, pos, cos_sin):
    out = layer(x, attention_mask=None, position_ids=pos, position_embeddings=cos_sin)
    return out[0] if isinstance(out, tuple) else out


def rope_apply(x, cos, sin):
    """transformers' apply_rotary_pos_emb for one tensor [B,H,S,D], cos/sin [B,S,D]."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    half = x.shape[-1] // 2
    rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rot * sin


def compiled(fn):
    return torch.compile(fn, dynamic=False)


def measure_shape(timer, b, s, cfg, sizes, layer, rope, mq, linear_specs, log) -> dict:
    """key -> {"eager": us, "compile": us} for one shape."""
    dev, dt = "cuda", torch.bfloat16
    hid, h, kvh, d, inter = (sizes[k] for k in ("hidden", "heads", "kv_heads", "head_dim", "intermediate"))
    m = b * s
    res: dict = {}

    def put(key, kind, fn):
        t0 = time.time()
        try:
            res.setdefault(key, {})[kind] = timer.graph_us(fn)
            log(f"  {key:<28} {kind:<8} {res[key][kind]:9.2f} us  ({time.time() - t0:.1f} s)")
        except Exception as e:  # a failing counterpart must not hide the others
            log(f"  {key:<28} {kind:<8} FAILED: {type(e).__name__}: {str(e)[:300]}")

    x = torch.randn(b, s, hid, device=dev, dtype=dt)
    pos = torch.arange(s, device=dev).unsqueeze(0).expand(b, -1)
    with torch.inference_mode():
        cos, sin = rope(x, pos)
        # Whole layer.
        put("layer", "eager", lambda: layer_call(layer, x, pos, (cos, sin)))
        t0 = time.time()
        layer_c = compiled(layer)
        put("layer", "compile", lambda: layer_call(layer_c, x, pos, (cos, sin)))
        log(f"  (layer compile + measure {time.time() - t0:.1f} s)")
        # GEMMs: every (K, N, residual) Emmy's reports and the standard projections need.
        for k, n, residual in sorted(linear_specs):
            a = torch.randn(m, k, device=dev, dtype=dt)
            w = torch.randn(n, k, device=dev, dtype=dt) * k ** -0.5
            key = f"linear_K{k}_N{n}" + ("_res" if residual else "")
            if residual:
                r = torch.randn(m, n, device=dev, dtype=dt)
                put(key, "eager", lambda a=a, w=w, r=r: torch.addmm(r, a, w.t()))
            else:
                put(key, "eager", lambda a=a, w=w: F.linear(a, w))
        # RMSNorm over the hidden size.
        norm = mq.Qwen3RMSNorm(hid, eps=cfg.rms_norm_eps).to(dev, dt)
        xs = torch.randn(b, s, hid, device=dev, dtype=dt)
        put("rmsnorm", "eager", lambda: norm(xs))
        norm_c = compiled(norm)
        put("rmsnorm", "compile", lambda: norm_c(xs))
        # q/k norm + RoPE, from the projection's output [B,S,heads*D] to rotated heads [B,H,S,D].
        for which, heads in (("q", h), ("k", kvh)):
            hn = mq.Qwen3RMSNorm(d, eps=cfg.rms_norm_eps).to(dev, dt)
            proj = torch.randn(b, s, heads * d, device=dev, dtype=dt)

            def qk(proj=proj, hn=hn, heads=heads):
                y = hn(proj.view(b, s, heads, d)).transpose(1, 2)
                return rope_apply(y, cos, sin)
            put(f"{which}_norm_rope", "eager", qk)
            put(f"{which}_norm_rope", "compile", compiled(qk))
        # Emmy's q_norm and k_norm in one kernel (fuse_siblings) against PyTorch's two, summed.
        for kind in ("eager", "compile"):
            both = [res.get(f"{w}_norm_rope", {}).get(kind) for w in ("q", "k")]
            if all(both):
                res.setdefault("qk_norm_rope_both", {})[kind] = both[0] + both[1]
        # Attention: SDPA causal GQA; and the split form's halves (eager).
        q = torch.randn(b, h, s, d, device=dev, dtype=dt)
        kk = torch.randn(b, kvh, s, d, device=dev, dtype=dt)
        v = torch.randn(b, kvh, s, d, device=dev, dtype=dt)
        put("sdpa", "eager", lambda: F.scaled_dot_product_attention(q, kk, v, is_causal=True, enable_gqa=True))
        krep = kk.repeat_interleave(h // kvh, dim=1)
        vrep = v.repeat_interleave(h // kvh, dim=1)
        mask = torch.ones(s, s, device=dev, dtype=torch.bool).tril()
        neg = torch.tensor(float("-inf"), device=dev, dtype=dt)
        put("scores", "eager", lambda: torch.where(mask, torch.matmul(q, krep.transpose(-1, -2)) * d ** -0.5, neg))
        sc = torch.where(mask, torch.matmul(q, krep.transpose(-1, -2)) * d ** -0.5, neg)
        put("softmax_pv", "eager", lambda: torch.matmul(torch.softmax(sc.float(), -1).to(dt), vrep))
        del sc
        # Elementwise parts: SiLU(gate) * up from the fused gate/up output, residual add.
        gu = torch.randn(m, 2 * inter, device=dev, dtype=dt)

        def silu_mul():
            g, u = gu[:, :inter], gu[:, inter:]
            return F.silu(g) * u
        put("silu_mul", "eager", silu_mul)
        put("silu_mul", "compile", compiled(silu_mul))
        ra, rb = torch.randn(m, hid, device=dev, dtype=dt), torch.randn(m, hid, device=dev, dtype=dt)
        put("residual_add", "eager", lambda: ra + rb)
        put("residual_add", "compile", compiled(lambda: ra + rb))
    return res


def load_traces(emmy_dir: str, b: int, s: int) -> dict:
    """structural key -> `emmy trace --json` distinct-kernel entry, over every traced grouping."""
    out = {}
    for p in sorted(glob.glob(os.path.join(emmy_dir, f"trace-b{b}-s{s}-*.json"))):
        try:
            with open(p) as f:
                for k in json.load(f).get("distinct", []):
                    out.setdefault(k["key"], k)
        except (OSError, ValueError):
            pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="1x512,1x2048,8x512", help="BxS list")
    ap.add_argument("--emmy-dir", required=True, help="folder with tune-bB-sS.json and trace-*.json")
    ap.add_argument("--config", required=True, help="the model's config.json")
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--out", required=True, help="folder for tables.md and results.json")
    args = ap.parse_args()

    def log(msg):
        print(msg, flush=True)

    os.makedirs(args.out, exist_ok=True)
    log(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    try:
        import transformers
        log(f"transformers {transformers.__version__}")
    except ImportError:
        pass
    timer = Timer(args.samples)
    ceil = ceilings(timer)
    log(qt.render_ceilings(ceil) + "  copy variants (TB/s): " +
        ", ".join(f"{k} {v:.2f}" for k, v in ceil["copy_variants_tbs"].items()))
    cfg, layer, rope, mq = load_layer(args.config)
    with open(args.config) as f:
        sizes = qt.config_from_json(json.load(f))
    results = {"ceilings": ceil, "samples": args.samples, "l2_flush": True, "shapes": []}
    md = ["## Qwen3 layer vs PyTorch", "", qt.render_ceilings(ceil)]
    for shape in [x for x in args.shapes.split(",") if x]:
        b, s = (int(v) for v in shape.lower().split("x"))
        emmy_path = os.path.join(args.emmy_dir, f"tune-b{b}-s{s}.json")
        emmy = {}
        if os.path.exists(emmy_path):
            with open(emmy_path) as f:
                emmy = json.load(f)
        traced = load_traces(args.emmy_dir, b, s)
        specs = qt.gemm_specs(emmy, b, s, sizes, traced)
        log(f"== B={b} S={s}: {len(emmy.get('kernels', []))} Emmy kernels, {len(traced)} traced keys")
        torch_times = measure_shape(timer, b, s, cfg, sizes, layer, rope, mq, specs, log)
        variants_path = os.path.join(args.emmy_dir, f"variants-b{b}-s{s}.json")
        variants = []
        if os.path.exists(variants_path):
            with open(variants_path) as f:
                variants = json.load(f)
        rows = qt.kernel_rows(emmy, torch_times, b, s, ceil, traced, sizes,
                              qt.best_per_template(variants))
        lay = qt.layer_row(emmy, torch_times, b, s, ceil, sizes)
        table = qt.render_shape(b, s, rows, lay)
        log(table)
        md.append(table)
        results["shapes"].append({"batch": b, "seq": s, "emmy": emmy, "torch": torch_times,
                                  "rows": rows, "layer": lay})
    with open(os.path.join(args.out, "tables.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
