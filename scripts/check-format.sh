#!/usr/bin/env bash
# The C++ sources follow .clang-format (issue 23): exit 1 naming every file clang-format would
# change, with the first of its complaints; `scripts/check-format.sh --fix` formats them instead.
# Runs over the files git tracks (C++ sources and headers, the CUDA worker included), from the
# repository root; ctest runs it as `format.clang_format`, so CI's test command checks it.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
[[ ${1:-} == --fix ]] && fix=1
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed (scripts/setup-debian.sh installs it)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cc' '*.cu' '*.cuh')
if ((fix)); then
  clang-format -i "${files[@]}"
  exit 0
fi
# One clang-format process for every file (one per file took 100 s on a loaded 2-core machine).
if ! out=$(clang-format --dry-run --Werror "${files[@]}" 2>&1); then
  echo "$out" | grep -E '^[^ ]+:[0-9]+:[0-9]+: error' | cut -d: -f1 | sort -u |
    sed "s|^|not formatted: |; s|\$| ($(clang-format --version | head -1); scripts/check-format.sh --fix)|"
  echo "$out" | head -20
  exit 1
fi
echo "check-format: ${#files[@]} files follow .clang-format"
