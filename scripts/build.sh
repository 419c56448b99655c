#!/usr/bin/env bash
# Configures and builds Emmy into build/ (preset "default", or "ci" when CI is set).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=default
if [[ -n "${CI:-}" ]]; then preset=ci; fi
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
