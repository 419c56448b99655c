"""PyTorch's time for the --code product of the user's run description, measured as
bench/qwen_layer measures (one CUDA-graph replay, L2 flushed before each sample, median), so that
it sets beside `emmy tune`'s deploy time of the same product in the same device call
(scripts/gpu-roundtrip.sh remote-example runs).

usage: torch_product.py [EMMY_REPORT.json]   prints PyTorch's time, and with a report the ratio
The product is f32 512x512 @ 512x512; TF32 stays off (the source does not allow it), so
PyTorch runs cuBLAS's exact f32 GEMM, the fair anchor for Emmy's exact f32 kernels.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "qwen_layer"))
from bench_torch import Timer  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
a = torch.randn(512, 512, device="cuda")
b = torch.randn(512, 512, device="cuda")
out = torch.empty(512, 512, device="cuda")
us = Timer(samples=200).graph_us(lambda: torch.matmul(a, b, out=out))
line = f"PyTorch f32 512x512x512 (TF32 off, CUDA graph, L2 flushed, median of 200): {us:.2f} us"
if len(sys.argv) > 1:
    report = json.load(open(sys.argv[1]))
    emmy = report.get("best_total_us") or 0
    kernels = report.get("kernels") or [{}]
    line += (f"; Emmy {emmy:.2f} us ({kernels[0].get('template', '?')} "
             f"{kernels[0].get('config', '')}): Emmy / PyTorch {emmy / us:.2f}")
print(line)
