"""Pure part of the Qwen3-layer benchmark (issue 12): which PyTorch counterpart each Emmy kernel
is compared with, the roofline floor of each kernel and of the layer, and the markdown tables.

No torch, no GPU: bench_torch.py measures, this module only computes and formats, so that
tests/bench_qwen/test_qwen_table.py can check it on any machine.

Matching Emmy kernels to PyTorch counterparts
---------------------------------------------
`emmy tune --json` lists each distinct kernel of the best grouping with its structural `key`,
`name` (an op name: "linear", "mean", "matmul", "silu", "add"), `template` and `occurrences`.
The match goes through the key: run.sh runs `emmy trace --json` for every combination of the
structural forks (fuse_horizontal, fuse_attention, fuse_epilogue: fuse/split each), which lists
every kernel any grouping can have with its key, ops, FLOPs, bytes and a module name. The hf
frontend names graph nodes after the Hugging Face module that made them (`self_attn.q_proj`,
`mlp.down_proj`, `input_layernorm`, ...); trace names a kernel after its first node, and a
horizontally fused matmul joins the names of its parts (`self_attn.q_proj+k_proj+v_proj`,
`mlp.gate_proj+up_proj`). Kernels with the same structural key
are one entry (both RMSNorms are `input_layernorm` x2; split k_proj and v_proj are
`self_attn.k_proj` x2). The mapping, by template first and name second:

  template matmul, name has *_proj      -> F.linear at [M,K]x[K,N] (cuBLAS); N is the sum of the
                                           joined projections; ops with "add" (residual fused in
                                           the epilogue) -> torch.addmm(residual, x, W^T)
  template matmul, ops matmul+...where   -> attention scores of the split form: q @ k^T (cuBLAS,
                                           batched), scaled and causally masked, eager
  template attention / fallback, ops with matmul before softmax
                                         -> fused attention: SDPA, causal, GQA (enable_gqa)
  ops starting with softmax (+matmul)    -> split attention's second half: softmax(s) @ v, eager
  template reduction, name *layernorm    -> Qwen3RMSNorm over the hidden size (eager, compiled)
  template reduction, q_norm / k_norm    -> per-head RMSNorm + RoPE (eager, compiled)
  template pointwise, ops silu+mul       -> F.silu(gate) * up (eager, compiled)
  template pointwise, ops add            -> residual add (eager, compiled)
  anything else                          -> no counterpart (row shows Emmy and its floor only)

Roofline floor: max(FLOPs / GEMM ceiling, bytes / copy bandwidth), both ceilings measured in the
same run (8192^3 bf16 matmul; a large device copy counting bytes read + written). Bytes are the
minimum traffic: every input read once, every output written once, bf16 (2 bytes). Attention's
FLOPs are the causal half of 4*B*heads*S^2*head_dim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BF16 = 2  # bytes per element

# Templates that compute a kernel's GEMM: Emmy's generated one and library calls competing with it
# in the search (issue 20: the cublaslt template of the cuda backend).
MATMUL_TEMPLATES = ("matmul", "cublaslt")

# Qwen3-0.6B / Qwen3-Embedding-0.6B decoder-layer sizes (plugins/frontends/hf/configs).
QWEN3_06B = {
    "hidden": 1024,
    "heads": 16,
    "kv_heads": 8,
    "head_dim": 128,
    "intermediate": 3072,
}


def config_from_json(cfg: dict) -> dict:
    """The sizes this module needs, from a Hugging Face config.json dict."""
    heads = cfg["num_attention_heads"]
    return {
        "hidden": cfg["hidden_size"],
        "heads": heads,
        "kv_heads": cfg.get("num_key_value_heads", heads),
        "head_dim": cfg.get("head_dim", cfg["hidden_size"] // heads),
        "intermediate": cfg["intermediate_size"],
    }


def proj_io(cfg: dict) -> dict:
    """(K, N) of every projection of the layer."""
    h, q = cfg["hidden"], cfg["heads"] * cfg["head_dim"]
    kv, i = cfg["kv_heads"] * cfg["head_dim"], cfg["intermediate"]
    return {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, i),
        "up_proj": (h, i),
        "down_proj": (i, h),
    }


@dataclass(frozen=True)
class Counterpart:
    """What an Emmy kernel is compared with, and its roofline inputs."""

    role: str     # linear, scores, attention, softmax_pv, rmsnorm, qk_norm_rope, silu_mul, add, none
    key: str      # measurement key in bench_torch.py's results ("linear_K1024_N4096_res")
    label: str    # human-readable counterpart ("F.linear 512x1024x4096 (cuBLAS)")
    flops: float
    bytes: float
    spec: tuple = ()  # role parameters bench_torch.py needs to build the op


def _proj_parts(name: str) -> list[str]:
    """'self_attn.q_proj+k_proj+v_proj' -> ['q_proj', 'k_proj', 'v_proj']."""
    tail = name.split(".")[-1] if "." in name else name
    return re.findall(r"[a-z]+_proj", tail)


def linear_counterpart(m: int, k: int, n: int, residual: bool) -> Counterpart:
    flops = 2.0 * m * k * n
    nbytes = BF16 * (m * k + k * n + m * n + (m * n if residual else 0))
    what = "torch.addmm(res, x, W^T)" if residual else "F.linear"
    return Counterpart("linear", f"linear_K{k}_N{n}" + ("_res" if residual else ""),
                       f"{what} {m}x{k}x{n} (cuBLAS)", flops, nbytes, (k, n, residual))


def attention_counterpart(b: int, s: int, cfg: dict) -> Counterpart:
    h, kvh, d = cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    flops = 4.0 * b * h * s * s * d / 2  # causal: half of QK^T and PV
    nbytes = BF16 * (2 * b * s * h * d + 2 * b * s * kvh * d)  # q, out; k, v
    return Counterpart("attention", "sdpa", f"SDPA causal GQA {b}x{h}/{kvh}x{s}x{d}", flops, nbytes)


def classify(kernel: dict, b: int, s: int, cfg: dict = QWEN3_06B) -> Counterpart:
    """The PyTorch counterpart of one kernel of `emmy tune --json` at batch b, sequence s."""
    name = kernel.get("module") or kernel.get("name", "")
    templ = kernel.get("template", "")
    ops = kernel.get("ops") or ""  # present in `emmy trace --json`, not in the tune report
    m = b * s
    hid, hd = cfg["hidden"], cfg["head_dim"]
    h, kvh, inter = cfg["heads"], cfg["kv_heads"], cfg["intermediate"]
    parts = _proj_parts(name)
    io = proj_io(cfg)
    if templ in MATMUL_TEMPLATES and parts and all(p in io for p in parts):
        k = io[parts[0]][0]
        n = sum(io[p][1] for p in parts)
        # o_proj and down_proj carry the residual add in their epilogue unless fuse_epilogue split
        # them; the tune report has no ops, so the name decides when ops are absent.
        residual = ("add" in ops.split("+")) if ops else parts[0] in ("o_proj", "down_proj")
        cp = linear_counterpart(m, k, n, residual)
        if "silu" in ops:
            # gate_proj with silu(gate) * up in its epilogue (gate and up split): it also reads
            # up's output; cuBLAS has no such epilogue, so the counterpart stays the plain GEMM.
            cp = Counterpart(cp.role, cp.key, cp.label + " (Emmy adds silu*up)", cp.flops,
                             cp.bytes + BF16 * m * n, cp.spec)
        return cp
    if ops.startswith("softmax"):
        flops = 2.0 * b * h * s * s * hd
        nbytes = BF16 * (b * h * s * s + b * s * kvh * hd + b * s * h * hd)
        return Counterpart("softmax_pv", "softmax_pv", f"softmax(s) @ v, eager {b}x{h}x{s}x{s}",
                           flops, nbytes)
    # Fused attention: q@k^T ... softmax ... @v in one kernel (fuse_attention's "fused" option);
    # without ops (no trace), the frontend's "self_attn" kernel of a non-matmul template.
    fused_ops = "matmul" in ops and "softmax" in ops and ops.find("matmul") < ops.find("softmax")
    if templ == "attention" or (templ not in MATMUL_TEMPLATES and (fused_ops or (name == "self_attn" and not ops))):
        return attention_counterpart(b, s, cfg)
    if templ in MATMUL_TEMPLATES and "where" in ops:
        flops = 2.0 * b * h * s * s * hd
        nbytes = BF16 * (b * s * h * hd + b * s * kvh * hd + b * h * s * s)
        return Counterpart("scores", "scores", f"q @ k^T * scale, masked, eager {b}x{h}x{s}x{s}",
                           flops, nbytes)
    if templ == "reduction" and name.endswith("layernorm"):
        return Counterpart("rmsnorm", "rmsnorm", f"Qwen3RMSNorm {m}x{hid}", 4.0 * m * hid,
                           BF16 * (2 * m * hid + hid))
    if templ == "reduction" and "q_norm" in name and "k_norm" in name:
        # q_norm and k_norm in one kernel (fuse_siblings): against both PyTorch kernels' sum.
        e = m * (h + kvh) * hd
        nbytes = BF16 * (2 * e + 2 * hd + 2 * 2 * m * hd)
        return Counterpart("qk_norm_rope", "qk_norm_rope_both",
                           f"q_norm + RoPE and k_norm + RoPE {m}x({h}+{kvh})x{hd}", 8.0 * e, nbytes,
                           (h + kvh,))
    if templ == "reduction" and (name.endswith("q_norm") or name.endswith("k_norm")):
        heads = h if name.endswith("q_norm") else kvh
        e = m * heads * hd
        # read the projection's output, write the rotated heads; weight; cos and sin [B,S,D]
        nbytes = BF16 * (2 * e + hd + 2 * m * hd)
        which = "q" if heads == h else "k"
        return Counterpart("qk_norm_rope", f"{which}_norm_rope",
                           f"{which}_norm + RoPE {m}x{heads}x{hd}", 8.0 * e, nbytes, (heads,))
    if templ == "pointwise" and ("silu" in ops or name in ("silu", "mlp.up_proj", "mlp.act_fn")):
        return Counterpart("silu_mul", "silu_mul", f"F.silu(gate) * up {m}x{inter}", 2.0 * m * inter,
                           BF16 * 3 * m * inter)
    if templ == "pointwise" and (ops == "add" or "residual" in name):
        return Counterpart("add", "residual_add", f"residual add {m}x{hid}", 1.0 * m * hid,
                           BF16 * 3 * m * hid)
    return Counterpart("none", "", "", float(kernel.get("flops", 0)), float(kernel.get("bytes", 0)))


def layer_floor_inputs(b: int, s: int, cfg: dict = QWEN3_06B) -> tuple[float, float]:
    """(FLOPs, minimum bytes) of the whole layer: every weight read once, the hidden state read
    once and written once, cos/sin read once; the GEMMs plus causal attention."""
    m = b * s
    weights = sum(k * n for k, n in proj_io(cfg).values())
    norms = 2 * cfg["hidden"] + 2 * cfg["head_dim"]
    gemm_flops = 2.0 * m * weights
    attn = attention_counterpart(b, s, cfg).flops
    nbytes = BF16 * (weights + norms + 2 * m * cfg["hidden"] + 2 * m * cfg["head_dim"])
    return gemm_flops + attn, float(nbytes)


def floor_us(flops: float, nbytes: float, gemm_tflops: float, copy_tbs: float) -> float:
    """Roofline floor in microseconds: max(FLOPs / GEMM ceiling, bytes / copy bandwidth)."""
    compute = flops / (gemm_tflops * 1e12) * 1e6
    memory = nbytes / (copy_tbs * 1e12) * 1e6
    return max(compute, memory)


def _fmt(x, digits=1):
    return "—" if x is None or x == 0 else f"{x:.{digits}f}"


def _ratio(a, b):
    return None if not a or not b else a / b


def _pct(floor, t):
    return None if not floor or not t else 100.0 * floor / t


def enrich(kernel: dict, traced: dict | None) -> dict:
    """The tune report's kernel entry plus ops, flops and bytes from `emmy trace --json` (by key)."""
    info = dict(kernel)
    t = (traced or {}).get(kernel.get("key", ""))
    if t:
        for field in ("ops", "flops", "bytes"):
            info.setdefault(field, t.get(field))
        info.setdefault("module", t.get("name"))
    return info


def gemm_specs(emmy: dict, b: int, s: int, cfg: dict = QWEN3_06B, traced: dict | None = None) -> set:
    """(K, N, residual) of every GEMM to time with cuBLAS: each projection alone, the
    horizontally fused q+k+v and gate+up, o/down with the residual in the epilogue, and whatever
    Emmy's kernels are."""
    io = proj_io(cfg)
    specs = {(k, n, False) for k, n in io.values()}
    specs.add((cfg["hidden"], io["q_proj"][1] + 2 * io["k_proj"][1], False))
    specs.add((cfg["hidden"], 2 * cfg["intermediate"], False))
    specs |= {(*io["o_proj"], True), (*io["down_proj"], True)}
    for k in emmy.get("kernels", []):
        cp = classify(enrich(k, traced), b, s, cfg)
        if cp.role == "linear":
            specs.add(cp.spec)
    return specs


def best_per_template(variants: list) -> dict:
    """structural key -> {template: best deploy µs} from `emmy eval variants --json` groups: what
    each competing template (generated matmul, cublaslt, ...) reached for the kernel."""
    out: dict = {}
    for group in variants or []:
        key = group.get("structural_key", "")
        for row in group.get("variants", []):
            if row.get("regime") != "deploy" or row.get("status") != "ok":
                continue
            t, us = row.get("template", ""), row.get("time_us")
            if not t or not us:
                continue
            best = out.setdefault(key, {})
            best[t] = min(us, best.get(t, us))
    return out


def _candidates(per_template: dict | None, key: str, chosen: str) -> str:
    """"matmul 16.5 · **cublaslt 11.8**": each template's best for the kernel, the chosen bold."""
    best = (per_template or {}).get(key, {})
    if len(best) < 2:
        return ""
    return " · ".join((f"**{t} {us:.1f}**" if t == chosen else f"{t} {us:.1f}")
                      for t, us in sorted(best.items(), key=lambda kv: kv[1]))


def kernel_rows(emmy: dict, torch_times: dict, b: int, s: int, ceilings: dict,
                traced: dict | None = None, cfg: dict = QWEN3_06B,
                per_template: dict | None = None) -> list[dict]:
    """One row per Emmy kernel: times, counterpart, ratio Emmy / best PyTorch, floor; with
    per_template (best_per_template), each competing template's best time for the kernel.

    emmy: `emmy tune --json` report; torch_times: key -> {"eager": us, "compile": us} (either may
    be missing); traced: structural key -> `emmy trace --json` entry (ops, flops, bytes), used to
    refine the classification (ops) and as the floor of kernels with no counterpart.
    """
    rows = []
    for k in emmy.get("kernels", []):
        info = enrich(k, traced)
        cp = classify(info, b, s, cfg)
        emmy_us = k.get("best_deploy_us") or k.get("best_rank_us") or 0
        times = torch_times.get(cp.key, {}) if cp.key else {}
        eager, compiled = times.get("eager"), times.get("compile")
        best = min([x for x in (eager, compiled) if x], default=None)
        fl = floor_us(cp.flops, cp.bytes, ceilings["gemm_tflops"], ceilings["copy_tbs"])
        rows.append({
            "name": (f"{info['module']} ({k.get('name', '')})" if info.get("module")
                     else k.get("name", "")),
            "template": k.get("template", ""),
            "candidates": _candidates(per_template, k.get("key", ""), k.get("template", "")),
            "occurrences": int(k.get("occurrences", 1)), "emmy_us": emmy_us,
            "counterpart": cp.label, "role": cp.role, "torch_eager_us": eager,
            "torch_compile_us": compiled, "ratio": _ratio(emmy_us, best), "floor_us": fl,
            "emmy_pct_floor": _pct(fl, emmy_us), "torch_pct_floor": _pct(fl, best),
        })
    # Split attention (scores kernel + softmax-and-PV kernel): their sum against SDPA, the target.
    split = [r for r in rows if r["role"] in ("scores", "softmax_pv")]
    if len(split) == 2:
        sdpa = torch_times.get("sdpa", {}).get("eager")
        cp = attention_counterpart(b, s, cfg)
        fl = floor_us(cp.flops, cp.bytes, ceilings["gemm_tflops"], ceilings["copy_tbs"])
        total = sum(r["emmy_us"] * r["occurrences"] for r in split)
        rows.append({"name": "attention, split (scores + softmax·v kernels)", "template": "",
                     "candidates": "", "occurrences": 1,
                     "emmy_us": total, "counterpart": cp.label, "role": "attention_total",
                     "torch_eager_us": sdpa, "torch_compile_us": None, "ratio": _ratio(total, sdpa),
                     "floor_us": fl, "emmy_pct_floor": _pct(fl, total), "torch_pct_floor": _pct(fl, sdpa),
                     "summary": True})
    return rows


def layer_row(emmy: dict, torch_times: dict, b: int, s: int, ceilings: dict,
              cfg: dict = QWEN3_06B, target: float = 0.75) -> dict:
    flops, nbytes = layer_floor_inputs(b, s, cfg)
    fl = floor_us(flops, nbytes, ceilings["gemm_tflops"], ceilings["copy_tbs"])
    layer = torch_times.get("layer", {})
    # The assembled graph's median, like PyTorch's times; assembled_us is the validation gap's
    # 20th percentile (reports before it was added have the median there).
    assembled = emmy.get("assembled_median_us") or emmy.get("assembled_us") or None
    # The same program timed as PyTorch's layer is (one L2 flush per sample, the kernels back to
    # back): what the ratios compare when the report has it. The assembled figure flushes before
    # each kernel, denying Emmy the reuse between neighbours that PyTorch's figures keep.
    end_to_end = emmy.get("end_to_end_us") or None
    total = emmy.get("best_total_us") or None
    emmy_us = end_to_end or assembled or total
    compiled = layer.get("compile")
    ratio = _ratio(emmy_us, compiled)
    return {
        "emmy_end_to_end_us": end_to_end,
        "emmy_assembled_us": assembled, "emmy_sum_us": total, "eager_us": layer.get("eager"),
        "compile_us": compiled, "ratio_compile": ratio, "ratio_eager": _ratio(emmy_us, layer.get("eager")),
        "target": target, "met": None if ratio is None else ratio <= target,
        "floor_us": fl, "emmy_pct_floor": _pct(fl, emmy_us),
        "compile_pct_floor": _pct(fl, compiled),
    }


def render_shape(b: int, s: int, rows: list[dict], layer: dict) -> str:
    """Markdown for one shape: the per-kernel table and the whole-layer table."""
    out = [f"### B={b} S={s} (M={b * s})", "",
           "| kernel | template | × | Emmy µs | each template's best µs | PyTorch counterpart "
           "| eager/cuBLAS µs | compile µs "
           "| Emmy / PyTorch | floor µs | Emmy % of floor | PyTorch % of floor |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append(f"| {r['name']} | {r['template']} | {r['occurrences']} | {_fmt(r['emmy_us'])} "
                   f"| {r.get('candidates') or '—'} "
                   f"| {r['counterpart'] or '—'} | {_fmt(r['torch_eager_us'])} "
                   f"| {_fmt(r['torch_compile_us'])} | {_fmt(r['ratio'], 2)} | {_fmt(r['floor_us'])} "
                   f"| {_fmt(r['emmy_pct_floor'], 0)} | {_fmt(r['torch_pct_floor'], 0)} |")
    kernels = [r for r in rows if not r.get("summary")]
    emmy_sum = sum(r["emmy_us"] * r["occurrences"] for r in kernels)
    floor_sum = sum(r["floor_us"] * r["occurrences"] for r in kernels)
    out.append(f"| **Σ kernels × occurrences** | | | {_fmt(emmy_sum)} | | | | | | {_fmt(floor_sum)} "
               f"| {_fmt(_pct(floor_sum, emmy_sum), 0)} | |")
    met = {None: "—", True: "yes", False: "no"}[layer["met"]]
    out += ["",
            "| whole layer | Emmy end to end µs | Emmy assembled (each kernel flushed) µs "
            "| Emmy Σ kernels µs | eager µs | torch.compile µs "
            "| Emmy / compile | target | met | Emmy / eager | floor µs | Emmy % of floor "
            "| compile % of floor |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            f"| Qwen3DecoderLayer | {_fmt(layer.get('emmy_end_to_end_us'))} "
            f"| {_fmt(layer['emmy_assembled_us'])} | {_fmt(layer['emmy_sum_us'])} "
            f"| {_fmt(layer['eager_us'])} | {_fmt(layer['compile_us'])} | {_fmt(layer['ratio_compile'], 2)} "
            f"| ≤ {layer['target']:.2f} | {met} | {_fmt(layer['ratio_eager'], 2)} | {_fmt(layer['floor_us'])} "
            f"| {_fmt(layer['emmy_pct_floor'], 0)} | {_fmt(layer['compile_pct_floor'], 0)} |", ""]
    return "\n".join(out)


def render_ceilings(ceilings: dict) -> str:
    return (f"Ceilings measured in this run: bf16 GEMM 8192³ {ceilings['gemm_tflops']:.0f} TFLOP/s, "
            f"device copy {ceilings['copy_tbs']:.2f} TB/s (bytes read + written).\n")


def render_model_cost(first: dict, rerun: dict, wall_first_s: float | None,
                      wall_rerun_s: float | None, command: str) -> str:
    """Issue 12 item 3: the whole model tuned from an empty database, then its re-run.
    Targets: first run <= 600 s, re-run <= 10 s with 0 launches."""
    def ok(cond):
        return "—" if cond is None else ("yes" if cond else "no")
    launches = rerun.get("launches") if rerun else None
    first_ok = None if wall_first_s is None or not first else (
        wall_first_s <= 600 and first.get("status", "ok") == "ok")
    rerun_ok = None if wall_rerun_s is None or launches is None else (wall_rerun_s <= 10 and launches == 0)
    lines = ["### Tuning cost: the whole model", "", f"`{command}`", "",
             "| run | wall s | status | kernels | distinct | built | measured | cache hits | launches "
             "| Σ kernels µs | target | met |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, rep, wall, target, met in (("empty database", first, wall_first_s, "≤ 600 s", first_ok),
                                          ("re-run", rerun, wall_rerun_s, "≤ 10 s, 0 launches", rerun_ok)):
        rep = rep or {}
        lines.append(f"| {label} | {_fmt(wall)} | {rep.get('status', '—')} | {rep.get('kernels_total', '—')} "
                     f"| {rep.get('kernels_distinct', '—')} | {rep.get('candidates_built', '—')} "
                     f"| {rep.get('candidates_measured', '—')} | {rep.get('cache_hits', '—')} "
                     f"| {rep.get('launches', '—')} | {_fmt(rep.get('best_total_us'))} | {target} | {ok(met)} |")
    return "\n".join(lines) + "\n"


def _load_json(path: str) -> dict:
    import json
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def render_results(results: dict, reports: dict, cfg: dict = QWEN3_06B) -> str:
    """The tables again from bench_torch.py's results.json and run.sh's emmy-reports.json (for
    re-rendering a run's output here, without a GPU)."""
    ceil = results["ceilings"]
    md = [render_ceilings(ceil)]
    for sh in results["shapes"]:
        b, s = sh["batch"], sh["seq"]
        traced = {}
        for name, rep in sorted(reports.items()):
            if name.startswith(f"trace-b{b}-s{s}-"):
                for k in rep.get("distinct", []):
                    traced.setdefault(k["key"], k)
        emmy = reports.get(f"tune-b{b}-s{s}.json", sh.get("emmy", {}))
        per_template = best_per_template(reports.get(f"variants-b{b}-s{s}.json", []))
        rows = kernel_rows(emmy, sh["torch"], b, s, ceil, traced, cfg, per_template)
        md.append(render_shape(b, s, rows, layer_row(emmy, sh["torch"], b, s, ceil, cfg)))
    return "\n".join(md)


if __name__ == "__main__":
    import sys
    usage = ("usage: qwen_table.py model-cost FIRST.json RERUN.json WALL_FIRST_S WALL_RERUN_S COMMAND\n"
             "       qwen_table.py render RESULTS.json EMMY_REPORTS.json")
    if len(sys.argv) == 7 and sys.argv[1] == "model-cost":  # run.sh, after the whole-model tunes
        def wall(v):
            try:
                return float(v)
            except ValueError:
                return None
        print(render_model_cost(_load_json(sys.argv[2]), _load_json(sys.argv[3]), wall(sys.argv[4]),
                                wall(sys.argv[5]), sys.argv[6]))
    elif len(sys.argv) == 4 and sys.argv[1] == "render":
        print(render_results(_load_json(sys.argv[2]), _load_json(sys.argv[3])))
    else:
        sys.exit(usage)
