#!/usr/bin/env bash
# scripts/gpu-roundtrip.sh ends every remote-* command by fitting $OUT to the device tool's 8 files:
# with more, every file (those in folders too) is in $OUT/outputs.tar.gz and only the top-level
# *.md tables stay beside it; with 8 or fewer nothing moves; the command's exit status is kept.
set -u
script=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$work/many
mkdir -p "$out/rows"
for i in 1 2 3 4 5 6 7; do echo "log $i" >"$out/f$i.log"; done
echo "table" >"$out/a.md"
echo "row" >"$out/rows/k.jsonl"
OUT=$out bash "$script" remote-sh false >"$work/many.txt" 2>&1
rc=$?
((rc == 1)) || fail "exit status $rc, not the command's 1"
grep -q "9 files under" "$work/many.txt" || fail "no message: $(cat "$work/many.txt")"
left=$(cd "$out" && find . -type f | sort | tr '\n' ' ')
[[ $left == "./a.md ./outputs.tar.gz " ]] || fail "left beside the archive: $left"
packed=$(tar tzf "$out/outputs.tar.gz" | grep -v '/$' | sort | tr '\n' ' ')
[[ $packed == "./a.md ./f1.log ./f2.log ./f3.log ./f4.log ./f5.log ./f6.log ./f7.log ./rows/k.jsonl " ]] ||
  fail "archived: $packed"
[[ $(tar xzOf "$out/outputs.tar.gz" ./rows/k.jsonl) == row ]] || fail "rows/k.jsonl's bytes"

few=$work/few
mkdir -p "$few"
for i in 1 2 3; do echo "$i" >"$few/f$i.log"; done
OUT=$few bash "$script" remote-sh true >/dev/null 2>&1 || fail "remote-sh true failed"
[[ $(ls "$few" | tr '\n' ' ') == "f1.log f2.log f3.log " ]] || fail "few files moved: $(ls "$few")"
echo "fit_out: ok"
