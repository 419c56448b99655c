#!/usr/bin/env bash
# The C++ sources follow .clang-format (issue 23): exit 1 naming every file clang-format would
# change, with the first lines of its diff; `scripts/check-format.sh --fix` formats them instead.
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
bad=0
for f in "${files[@]}"; do
  if ! diff -q <(clang-format "$f") "$f" >/dev/null; then
    echo "not formatted: $f ($(clang-format --version | head -1); scripts/check-format.sh --fix)"
    diff -u "$f" <(clang-format "$f") | sed -n '3,12p'
    bad=1
  fi
done
((bad == 0)) && echo "check-format: ${#files[@]} files follow .clang-format"
exit $bad
