#!/usr/bin/env bash
# Installs every Debian 12 package Emmy's build and tests need. Idempotent, non-interactive;
# run as root (or with sudo). Skips apt entirely when everything is already installed.
set -euo pipefail
packages=(
  build-essential g++ cmake ninja-build pkg-config git clang-format
  libboost-dev libboost-program-options-dev libboost-filesystem-dev
  librocksdb-dev libflatbuffers-dev flatbuffers-compiler
  nlohmann-json3-dev libgtest-dev libgmock-dev
  libtorch-dev python3 python3-torch
  zlib1g-dev
  libopenblas0-pthread
  libopenblas-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
