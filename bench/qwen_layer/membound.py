"""The memory-bound kernels of a Qwen3 layer at 8192 x 1024 bf16 (issue 19): Emmy's tuned kernel
against a device copy of the same bytes, PyTorch eager and torch.compile, in one process on the
GPU machine (run.sh calls it; alone: see --help).

    membound.py --emmy EMMY --work DIR --out DIR [--rows 8192] [--cols 1024] [--patience N]

For each kernel (Qwen3's RMSNorm, SiLU(gate) * up, the residual add):
  1. torch.export of the module at [rows, cols] bf16, saved as DIR/<name>.pt2;
  2. `emmy tune DIR/<name>.pt2 --backend cuda --patience N --json` (the pt2 frontend: no LibTorch
     plugin needed); Emmy's figure is the tuned kernel's deploy median from the report: its
     worker times a CUDA-graph replay with L2 flushed before each sample, as below;
  3. PyTorch eager and torch.compile of the same module, and the copy reference: a device-to-
     device copy of half the kernel's bytes (a copy reads and writes each byte once, so it moves
     as many bytes as the kernel reads + writes), timed with bench_torch.Timer (graph replay, L2
     flushed before each sample, median), all in this process.

Prints and writes OUT/membound.md (a table: µs, GB/s = bytes read + written / time, and % of the
copy's GB/s) and OUT/membound.json. The target of issue 19: Emmy >= 85 % of the copy.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_torch import Timer  # noqa: E402

TARGET = 0.85


class RmsNorm(nn.Module):
    """transformers' Qwen3RMSNorm, written out (same ops, same order)."""

    def __init__(self, cols: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(cols, dtype=torch.bfloat16))
        self.eps = eps

    def forward(self, x):
        h = x.to(torch.float32)
        var = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(var + self.eps)
        return self.weight * h.to(x.dtype)


class SiluMul(nn.Module):
    def forward(self, gate, up):
        return F.silu(gate) * up


class ResidualAdd(nn.Module):
    def forward(self, x, residual):
        return x + residual


def kernels(rows: int, cols: int):
    """name -> (module, inputs, bytes read + written)."""
    def t():
        return torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    e = rows * cols * 2
    return {
        "rmsnorm": (RmsNorm(cols).cuda(), (t(),), 2 * e + cols * 2),
        "silu_mul": (SiluMul(), (t(), t()), 3 * e),
        "residual_add": (ResidualAdd(), (t(), t()), 3 * e),
    }


def emmy_tune(emmy: str, pt2: str, report: str, patience: int, timeout: int, log) -> dict:
    cmd = [emmy, "tune", pt2, "--backend", "cuda", "--patience", str(patience), "--no-progress",
           "--json", report]
    log("== " + " ".join(cmd))
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        log("\n".join((r.stdout + r.stderr).strip().splitlines()[-12:]))
    except subprocess.TimeoutExpired:
        log(f"emmy tune timed out after {timeout} s")
    try:
        with open(report) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--emmy", required=True, help="the emmy binary")
    ap.add_argument("--work", required=True, help="folder for the .pt2 files and tune reports")
    ap.add_argument("--out", required=True, help="folder for membound.md and membound.json")
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--patience", type=int, default=50)
    ap.add_argument("--tune-timeout", type=int, default=150, help="seconds per emmy tune")
    ap.add_argument("--samples", type=int, default=100)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)

    def log(msg):
        print(msg, flush=True)

    torch.manual_seed(0)
    timer = Timer(args.samples)
    results = {"rows": args.rows, "cols": args.cols, "dtype": "bf16", "samples": args.samples,
               "l2_flush": True, "kernels": {}}
    lines = [f"### Memory-bound kernels at {args.rows}x{args.cols} bf16 (same run, L2 flushed)", "",
             "| kernel | MB moved | copy µs | copy GB/s | Emmy µs | Emmy GB/s | Emmy % of copy | "
             f"≥ {TARGET:.0%} | Emmy template, knobs | eager µs | compile µs | compile % of copy |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, (mod, inputs, nbytes) in kernels(args.rows, args.cols).items():
        # The copy reference: half the bytes copied (each is read and written once).
        src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda").random_(0, 255)
        dst = torch.empty_like(src)
        copy_us = timer.graph_us(lambda: dst.copy_(src))
        copy_stream_us = timer.stream_us(lambda: dst.copy_(src))
        copy_kernel_us = timer.graph_us(lambda: torch.mul(src, 1, out=dst))  # an SM copy kernel
        best_copy = min(copy_us, copy_stream_us, copy_kernel_us)
        del src, dst
        pt2 = os.path.join(args.work, f"membound-{name}.pt2")
        with torch.no_grad():
            ep = torch.export.export(mod, inputs)
        torch.export.save(ep, pt2)
        report = emmy_tune(args.emmy, pt2, os.path.join(args.work, f"membound-{name}.json"), args.patience,
                           args.tune_timeout, log)
        ks = report.get("kernels", [])
        emmy_us = sum((k.get("best_deploy_us") or k.get("best_rank_us") or 0) * int(k.get("occurrences", 1))
                      for k in ks) if ks else 0.0
        chosen = "; ".join(f"{k.get('template', '')} {k.get('config', '')}".strip() for k in ks)
        def timed(kind, fn):
            try:
                return timer.graph_us(fn)
            except Exception as e:  # noqa: BLE001 - a failing counterpart leaves its column empty
                log(f"  {name} {kind} FAILED: {type(e).__name__}: {str(e)[:300]}")
                return 0.0

        with torch.inference_mode():  # as bench_torch.measure_shape
            eager_us = timed("eager", lambda: mod(*inputs))
            cm = torch.compile(mod, dynamic=False)
            compile_us = timed("compile", lambda: cm(*inputs))

        def gbs(us):
            return nbytes / (us * 1e-6) / 1e9 if us > 0 else 0.0

        copy_gbs = gbs(best_copy)
        emmy_pct = gbs(emmy_us) / copy_gbs if emmy_us > 0 else 0.0
        compile_pct = gbs(compile_us) / copy_gbs if compile_us > 0 else 0.0
        results["kernels"][name] = {
            "bytes": nbytes, "copy_us": best_copy,
            "copy_variants_us": {"graph_memcpy": copy_us, "stream_memcpy": copy_stream_us,
                                 "graph_kernel": copy_kernel_us},
            "emmy_us": emmy_us, "emmy_kernels": len(ks), "emmy_chosen": chosen,
            "emmy_fraction_of_copy": emmy_pct, "eager_us": eager_us, "compile_us": compile_us,
            "compile_fraction_of_copy": compile_pct}
        lines.append(
            f"| {name} ({len(ks)} kernel{'s' if len(ks) != 1 else ''}) | {nbytes / 1e6:.1f} | {best_copy:.1f} | "
            f"{copy_gbs:.0f} | {emmy_us:.1f} | {gbs(emmy_us):.0f} | {100 * emmy_pct:.0f} | "
            f"{'yes' if emmy_pct >= TARGET else 'no'} | {chosen or '—'} | {eager_us:.1f} | {compile_us:.1f} | "
            f"{100 * compile_pct:.0f} |")
        log(lines[-1])
    lines += ["", "Copy: the fastest of a device-to-device copy of half the bytes captured in a graph, the "
              "same copy on a stream, and an SM copy kernel (torch.mul(x, 1)); copy µs per variant in "
              "membound.json."]
    table = "\n".join(lines)
    log(table)
    with open(os.path.join(args.out, "membound.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(args.out, "membound.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
