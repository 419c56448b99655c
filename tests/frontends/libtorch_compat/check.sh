#!/usr/bin/env bash
# Builds the torchscript frontend against the LibTorch of a PyTorch install (default: the GPU
# machine's PyTorch 2.x) with plain g++, then converts a few sources, including a traced
# scaled_dot_product_attention, which Debian's PyTorch 1.13 cannot produce.
#   tests/frontends/libtorch_compat/check.sh [PYTHON] [WORKDIR]
set -euo pipefail
PY=${1:-/opt/torch/.venv/bin/python}
W=${2:-/tmp/emmy-libtorch-compat}
mkdir -p "$W"
T=$("$PY" -c "import torch, os; print(os.path.dirname(torch.__file__))")
ABI=$("$PY" -c "import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))")
echo "torch $("$PY" -c 'import torch; print(torch.__version__)') at $T, cxx11 abi $ABI"
F=(-std=c++20 -O1 -fPIC -Wall -Wextra -Wpedantic -Wno-unused-parameter -D_GLIBCXX_USE_CXX11_ABI="$ABI" -I sdk/include)
g++ "${F[@]}" -shared sdk/src/*.cpp -o "$W/libemmy_sdk.so"
g++ "${F[@]}" -shared -isystem "$T/include" -isystem "$T/include/torch/csrc/api/include" \
  -DEMMY_PLUGIN_NAME='"torchscript"' -DEMMY_PLUGIN_VERSION='"0.1.0"' plugins/frontends/torchscript/*.cpp \
  -I plugins/frontends/common plugins/frontends/common/*.cpp \
  -L"$W" -lemmy_sdk -L"$T/lib" -ltorch -ltorch_cpu -lc10 -Wl,-rpath,"$T/lib:$W" -o "$W/libemmy_torchscript.so"
g++ "${F[@]}" tests/frontends/libtorch_compat/smoke_driver.cpp -L"$W" -lemmy_sdk -ldl -Wl,-rpath,"$W" -o "$W/driver"
"$PY" - "$W" <<'PY'
import sys, torch
class A(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
m = torch.jit.trace(A(), (torch.randn(1, 8, 16, 32), torch.randn(1, 2, 16, 32), torch.randn(1, 2, 16, 32)))
torch.jit.save(m, sys.argv[1] + "/sdpa.pt", _extra_files={"emmy_input_shapes": "1x8x16x32,1x2x16x32,1x2x16x32"})
PY
D=("$W/driver" "$W/libemmy_torchscript.so")
"${D[@]}" "$W/sdpa.pt"
"${D[@]}" "@torch.matmul(torch.randn(512,512,device='cuda'), torch.randn(512,512,device='cuda'))"
"${D[@]}" "@torch.nn.functional.silu(torch.randn(64,256,dtype=torch.bfloat16) @ torch.randn(256,512,dtype=torch.bfloat16))"
"${D[@]}" "@torch.cumsum(torch.randn(4,4), dim=0)" || true
