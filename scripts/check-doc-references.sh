#!/usr/bin/env bash
# Checks that every reference to the project's documents resolves (issue 23; ctest
# docs.references). In the tracked sources, scripts, CMake files and documents it fails, naming
# file:line, on
#   - a citation of the design page without its folder ("DESIGN.md" not preceded by "docs/");
#   - "docs/DESIGN.md, <Section>" whose section is no heading of docs/DESIGN.md (the section runs
#     to the first ) ; : , " or backtick or a sentence's full stop, and may continue on the next
#     comment line);
#   - "docs/<name>.md" naming a document that does not exist.
# Usage: scripts/check-doc-references.sh [REPO_ROOT]   (default: this script's repository)
set -euo pipefail
root=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}
cd "$root"
self=scripts/check-doc-references.sh

if [[ ! -f docs/DESIGN.md ]]; then
  echo "check-doc-references: docs/DESIGN.md does not exist" >&2
  exit 1
fi

# The files to check: tracked (and new, not ignored) files in a git checkout, else everything
# outside build folders.
list_files() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files --cached --others --exclude-standard
  else
    find . -path ./.git -prune -o -path './build*' -prune -o -path './.carry*' -prune -o \
      -type f -print | sed 's|^\./||'
  fi
}

mapfile -t files < <(list_files | grep -E '\.(cpp|hpp|h|c|cu|txt|cmake|md|sh|py|fbs|in|json)$' |
  grep -v -x -F "$self" | while read -r f; do [[ -f $f ]] && echo "$f"; done)
((${#files[@]})) || { echo "check-doc-references: no files found under $root" >&2; exit 1; }

# Existing documents, one per line, for the awk below.
docs_list=$(cd docs && ls -1 -- *.md)

awk -v docs_list="$docs_list" '
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
function fail(msg) { printf "%s:%d: %s\n", FILENAME, FNR, msg; bad++ }
# A line with its comment leader removed ("//", "#", "*", "--"), for a section continued there.
function uncomment(s) { s = trim(s); sub(/^(\/\/+|#+|\*+|--)[ \t]*/, "", s); return s }
# The section starting at s: up to the first terminator. Sets ended = 0 when the line ran out.
function section_of(s,    i, c, out) {
  out = ""; ended = 0
  for (i = 1; i <= length(s); i++) {
    c = substr(s, i, 1)
    if (c == ")" || c == ";" || c == ":" || c == "\"" || c == "`" || c == ",") { ended = 1; break }
    if (c == "." && (i == length(s) || substr(s, i + 1, 1) ~ /[ \t]/)) { ended = 1; break }
    out = out c
  }
  return out
}
function check_section(sec, where_line,    key) {
  sec = trim(sec); sub(/[.,]+$/, "", sec); sec = trim(sec)
  if (sec == "" || substr(sec, 1, 1) == "<") return
  key = tolower(sec); gsub(/[ \t]+/, " ", key)
  if (!(key in heading)) {
    printf "%s:%d: docs/DESIGN.md has no section \"%s\"\n", FILENAME, where_line, sec; bad++
  }
}
BEGIN {
  n = split(docs_list, d, "\n"); for (i = 1; i <= n; i++) if (d[i] != "") have_doc["docs/" d[i]] = 1
  while ((getline line < "docs/DESIGN.md") > 0) {
    if (line ~ /^#+[ \t]/) {
      sub(/^#+[ \t]+/, "", line); gsub(/`/, "", line); line = tolower(trim(line))
      gsub(/[ \t]+/, " ", line); heading[line] = 1
    }
  }
  close("docs/DESIGN.md")
}
FNR == 1 { pending = ""; pending_line = 0 }
{
  line = $0
  # A section cut at the end of the previous line continues here.
  if (pending != "") {
    rest = section_of(uncomment(line))
    check_section(pending " " rest, pending_line)
    pending = ""
  }
  # 1. DESIGN.md without docs/ in front.
  s = line; off = 0
  while ((i = index(s, "DESIGN.md")) > 0) {
    pos = off + i
    before = (pos > 5) ? substr(line, pos - 5, 5) : substr(line, 1, pos - 1)
    if (before != "docs/") fail("cites DESIGN.md without its folder: write docs/DESIGN.md")
    s = substr(s, i + 9); off = pos + 8
  }
  # 2. docs/<name>.md exists; 3. docs/DESIGN.md, <Section> is a heading.
  s = line; off = 0
  while ((i = index(s, "docs/")) > 0) {
    prev = (off + i > 1) ? substr(line, off + i - 1, 1) : ""
    t = substr(s, i)
    s = substr(s, i + 5); off = off + i + 4
    if (prev ~ /[A-Za-z0-9_.-]/) continue          # e.g. "share/doc/", "mydocs/"
    if (!match(t, /^docs\/[A-Za-z0-9_.-]+\.md/)) continue
    name = substr(t, 1, RLENGTH)
    if (!(name in have_doc)) { fail("no such document: " name); continue }
    if (name != "docs/DESIGN.md") continue
    after = substr(t, RLENGTH + 1)
    if (substr(after, 1, 2) != ", ") continue
    sec = section_of(substr(after, 3))
    if (ended) check_section(sec, FNR)
    else { pending = trim(sec); pending_line = FNR }
  }
}
END { if (bad) { printf "%d broken document reference(s)\n", bad; exit 1 } }
' "${files[@]}"
echo "check-doc-references: every reference resolves (${#files[@]} files)"
