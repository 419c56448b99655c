#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install, build, then tune a 256x256 matmul on the
# CPU backend (no GPU needed) and list what was measured.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
bash scripts/build.sh
build/bin/emmy plugins
build/bin/emmy tune --backend cpu --patience 10 \
  --code "torch.matmul(torch.randn(256,256), torch.randn(256,256))"
build/bin/emmy eval variants --kernel matmul --limit 10
