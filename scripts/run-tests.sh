#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: install, build, ctest -j2.
# GPU tests (label "gpu") are excluded here; scripts/gpu-roundtrip.sh runs them on a GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
bash scripts/build.sh
preset=default
if [[ -n "${CI:-}" ]]; then preset=ci; fi
ctest --preset "$preset" -j2 --label-exclude gpu
