#!/usr/bin/env python3
"""Disassembly evidence for the Qwen3-layer benchmark (issue 12: "where a target is missed, ... the
profiler or disassembly evidence").

    sass_summary.py CACHE_DIR [TUNE_JSON...] [--after FILE] [--before FILE] [--others N] [--cuobjdump PATH]

CACHE_DIR is the cuda backend's compile cache ($EMMY_HOME/cache/cuda): <hash>.cubin files, each with
its source beside it as <hash>.cu (nvrtc_compiler.cpp writes both). The source names the NVRTC
options on its first line and its template and knobs on a "// template: NAME k=v ..." line. For
each cubin worth showing, `cuobjdump -res-usage` gives registers, stack and static shared memory,
and `cuobjdump -sass` the instructions that tell which path a kernel takes (tensor cores through
HGMMA or HMMA, ldmatrix, cp.async, TMA, 16-byte global accesses, barriers, MUFU, spills).

TUNE_JSON files (`emmy tune --json`) name the kernels the tune chose (template + "config" knobs);
cubins whose template and knobs agree with one are marked and listed first, then at most --others
more per template. --after/--before FILE keep only the cubins written after / before that file
was (e.g. the previous tune's report and this one's), so that a cache shared by several tunes can
be summarized tune by tune.

Markdown goes to stdout. A missing cuobjdump is not an error: the table then has the notes only.
"""

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys

# SASS opcode (its first dot-separated part, or the whole opcode for the 16-byte forms) -> column.
# Order is the table's column order.
COLUMNS = ["HGMMA", "HMMA", "LDSM", "LDGSTS", "TMA", "LDG.128", "STG.128", "LDG", "STG", "BAR", "MUFU",
           "LDL", "STL"]


def classify(opcode):
    """The column an opcode counts in, or None. LDG/STG with a .128 part are the 16-byte forms."""
    parts = opcode.split(".")
    base = parts[0]
    if base in ("LDG", "STG"):
        return base + ".128" if "128" in parts[1:] else base
    if base in ("UTMALDG", "UBLKCP", "UTMASTG", "UTMAPF"):
        return "TMA"
    if base in ("HGMMA", "HMMA", "LDSM", "LDGSTS", "BAR", "MUFU", "LDL", "STL"):
        return base
    return None


_SASS_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
# "/*0140*/   @!P0 LDG.E.128 R4, desc[UR4][R2.64] ;  /* 0x... */": the address, then the
# instruction up to its semicolon.
_SASS_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-fA-F]+\*/\s+(.*?)\s*;")
_PREDICATE = re.compile(r"^@!?U?P[T0-9]+\s+")


def parse_sass(text):
    """`cuobjdump -sass` text -> {function: Counter(column -> instructions)}; every function seen
    has an entry (also one with none of the counted instructions)."""
    counts = {}
    current = None
    for line in text.splitlines():
        m = _SASS_FUNCTION.match(line)
        if m:
            current = m.group(1)
            counts.setdefault(current, collections.Counter())
            continue
        m = _SASS_INSTRUCTION.match(line)
        if not m or current is None:
            continue
        instruction = _PREDICATE.sub("", m.group(1))
        if not instruction:
            continue
        column = classify(instruction.split()[0])
        if column:
            counts[current][column] += 1
    return counts


_RES_FUNCTION = re.compile(r"^\s*Function\s+(\S+?):\s*$")
_RES_FIELD = re.compile(r"([A-Z_]+(?:\[\d+\])?):(\d+)")


def parse_res_usage(text):
    """`cuobjdump -res-usage` text -> {function: {"REG": n, "STACK": n, "SHARED": n, "LOCAL": n, ...}}."""
    usage = {}
    current = None
    for line in text.splitlines():
        m = _RES_FUNCTION.match(line)
        if m:
            current = m.group(1)
            usage[current] = {}
            continue
        if current is not None and "REG:" in line:
            usage[current].update({k: int(v) for k, v in _RES_FIELD.findall(line)})
            current = None
    return usage


_NOTE = re.compile(r"^//\s*template:\s*(\S+)(.*)$", re.M)
_KNOB = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(-?\d+)$")
_OPTIONS = re.compile(r"^//\s*emmy nvrtc\s+(.*)$", re.M)
_LAUNCH = re.compile(r"^//@emmy launch (\S+) (\d+) (\d+) (\d+) (\d+) (\d+)\s*$", re.M)


class Source:
    """What a cached kernel source says about itself."""

    def __init__(self, text):
        m = _NOTE.search(text)
        self.template = m.group(1) if m else None
        self.knobs = {}
        rest = []
        for token in (m.group(2).split() if m else []):
            k = _KNOB.match(token)
            # First occurrence wins: the knobs come first; the path note after them may reuse a
            # name for a derived value (attention's "warps=2x4" layout is not an integer anyway).
            if k and not rest and k.group(1) not in self.knobs:
                self.knobs[k.group(1)] = int(k.group(2))
            else:
                rest.append(token)
        self.path_note = " ".join(rest)
        o = _OPTIONS.search(text)
        self.options = o.group(1).split() if o else []
        self.regime = ("deploy" if "-Xptxas=-O3" in self.options else
                       "rank" if "-Xptxas=-O1" in self.options else "?")
        # kernel -> (grid, block, dynamic shared bytes)
        self.launches = {name: ((int(x), int(y), int(z)), int(block), int(shared))
                         for name, x, y, z, block, shared in _LAUNCH.findall(text)}

    def identity(self):
        """What tells two kernels apart in a table: knobs, code path and launches."""
        return (self.template, self.knob_text(), self.path_note, tuple(sorted(self.launches.items())))

    def knob_text(self):
        return " ".join(f"{k}={v}" for k, v in self.knobs.items())


def parse_config(config):
    """A tune report's "config" ("k=v k=v", sometimes with non-integer values) -> {k: value}."""
    out = {}
    for token in (config or "").split():
        if "=" in token:
            k, v = token.split("=", 1)
            try:
                out[k] = int(v)
            except ValueError:
                out[k] = v
    return out


def chosen_kernels(reports):
    """Tune reports -> [{"name", "template", "knobs"}] of every kernel a tune chose."""
    chosen = []
    for report in reports:
        for k in report.get("kernels", []) or []:
            chosen.append({"name": k.get("name", "?"), "template": k.get("template"),
                           "knobs": parse_config(k.get("config", ""))})
    return chosen


def agrees(source, kernel):
    """A source is a build of a chosen kernel when the templates are equal and every knob both name
    has one value (the note may leave out knobs, the config may carry more)."""
    if source.template is None or source.template != kernel["template"]:
        return False
    shared = set(source.knobs) & set(kernel["knobs"])
    if not shared and (source.knobs or kernel["knobs"]):
        return False
    return all(source.knobs[k] == kernel["knobs"][k] for k in shared)


def find_cuobjdump(given=None):
    if given:
        return given if os.access(given, os.X_OK) else None
    for candidate in (shutil.which("cuobjdump"),
                      os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "cuobjdump"),
                      "/usr/local/cuda/bin/cuobjdump"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def disassemble(cuobjdump, cubin):
    """(res-usage per function, instruction counts per function, error text or None)."""
    try:
        res = subprocess.run([cuobjdump, "-res-usage", cubin], capture_output=True, text=True, timeout=60)
        sass = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return {}, {}, str(e)
    if res.returncode != 0 or sass.returncode != 0:
        lines = (res.stderr + sass.stderr).strip().splitlines()
        return {}, {}, lines[-1] if lines else f"exit {res.returncode or sass.returncode}"
    return parse_res_usage(res.stdout), parse_sass(sass.stdout), None


class Entry:
    def __init__(self, cubin, source, mtime):
        self.cubin = cubin
        self.source = source
        self.mtime = mtime
        self.chosen_by = []  # names of the tune's kernels this one agrees with
        self.in_window = True  # written inside the --after/--before window


def load_cache(cache_dir, after=None, before=None):
    """Every <hash>.cubin with its <hash>.cu beside it; in_window: written after `after` and no
    later than `before` (modification times, seconds since the epoch; None: no bound)."""
    entries = []
    try:
        names = sorted(os.listdir(cache_dir))
    except OSError:
        return entries
    for name in names:
        if not name.endswith(".cubin"):
            continue
        cubin = os.path.join(cache_dir, name)
        cu = cubin[: -len(".cubin")] + ".cu"
        try:
            with open(cu, encoding="utf-8", errors="replace") as f:
                source = Source(f.read())
            mtime = os.path.getmtime(cubin)
        except OSError:
            continue
        e = Entry(cubin, source, mtime)
        e.in_window = not ((after is not None and mtime <= after) or (before is not None and mtime > before))
        entries.append(e)
    return entries


def select(entries, chosen, others, earlier=()):
    """Per template: the entries a chosen kernel agrees with (the deploy builds where there are
    some: the chosen time was measured at the deploy setting), then up to `others` more with other
    knobs, path or launches, newest first. -> {template: [Entry]}, templates with a chosen one
    first.
    A chosen kernel no entry agrees with is looked for in `earlier` (cubins outside the time
    window: a cache hit keeps its first build's time)."""
    entries = list(entries)
    for kernel in chosen:
        matches = [e for e in entries if agrees(e.source, kernel)]
        if not matches:
            matches = [e for e in earlier if agrees(e.source, kernel)]
            entries += [e for e in matches if e not in entries]
        # The most specific builds: a note that names more of the config's knobs (e.g. the
        # matmul's wgmma=1 path) beats one that leaves them out.
        most = max((len(set(e.source.knobs) & set(kernel["knobs"])) for e in matches), default=0)
        matches = [e for e in matches if len(set(e.source.knobs) & set(kernel["knobs"])) == most]
        deploy = [e for e in matches if e.source.regime == "deploy"]
        for e in deploy or matches:
            e.chosen_by.append(kernel["name"])
    by_template = collections.OrderedDict()
    for e in sorted(entries, key=lambda e: (not e.chosen_by, -e.mtime, e.cubin)):
        by_template.setdefault(e.source.template or "?", []).append(e)
    out = collections.OrderedDict()
    for template, group in sorted(by_template.items(), key=lambda kv: (not kv[1][0].chosen_by, kv[0])):
        picked = [e for e in group if e.chosen_by]
        # One build per kernel: the rank and deploy builds of one source differ in options only.
        seen = {e.source.identity() for e in picked}
        rest = []
        for e in group:
            if len(rest) < others and not e.chosen_by and e.source.identity() not in seen:
                seen.add(e.source.identity())
                rest.append(e)
        if picked or rest:
            out[template] = picked + rest
    return out


def render(selected, cuobjdump, total, windowed=False, out=None):
    """The markdown tables: one per template, one row per kernel function in each cubin."""
    out = out or sys.stdout
    if cuobjdump is None:
        print("cuobjdump not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin): notes and launches "
              "only, no registers or instruction counts.\n", file=out)
    shown = sum(len(v) for v in selected.values())
    where = "written in the --after/--before window" if windowed else "in the cache"
    print(f"{total} cubins with source {where}; {shown} shown (chosen = template and knobs agree "
          f"with a kernel the tune chose; regime: rank -O1 or deploy -O3; smem = static + dynamic "
          f"bytes; LDL/STL: local memory, i.e. spills or a stack frame).\n", file=out)
    head = ["chosen", "cubin", "kernel", "regime", "grid x block", "REG", "stack", "smem"] + COLUMNS
    for template, entries in selected.items():
        print(f"**{template}**\n", file=out)
        print("| " + " | ".join(head) + " |", file=out)
        print("|" + "---|" * len(head), file=out)
        notes = []
        for e in entries:
            usage, counts, error = disassemble(cuobjdump, e.cubin) if cuobjdump else ({}, {}, None)
            functions = list(counts) or list(usage) or list(e.source.launches) or ["?"]
            tag = ("**" + ", ".join(e.chosen_by) + "**") if e.chosen_by else ""
            short = os.path.basename(e.cubin)[:8]
            for fn in functions:
                grid, block, dyn = e.source.launches.get(fn, (None, None, 0))
                launch = f"{grid[0]}x{grid[1]}x{grid[2]} x {block}" if grid else ""
                u = usage.get(fn, {})
                c = counts.get(fn, collections.Counter())
                smem = (u["SHARED"] + dyn) if "SHARED" in u else (dyn or "")
                regime = e.source.regime + ("" if e.in_window else " (earlier build)")
                cells = [tag, short, fn, regime, launch, u.get("REG", ""), u.get("STACK", ""), smem]
                cells += [c.get(col, 0) if fn in counts else "" for col in COLUMNS]
                print("| " + " | ".join(str(x) for x in cells) + " |", file=out)
            note = f"`{short}`: {template} {e.source.knob_text()}"
            if e.source.path_note:
                note += f" ({e.source.path_note})"
            if error:
                note += f"; cuobjdump: {error}"
            notes.append(note)
        print("", file=out)
        for n in notes:
            print(f"- {n}", file=out)
        print("", file=out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cache_dir", help="the cuda backend's compile cache ($EMMY_HOME/cache/cuda)")
    ap.add_argument("tune_json", nargs="*", help="emmy tune --json reports: mark the kernels they chose")
    ap.add_argument("--after", help="only cubins written after this file was (the previous tune's report)")
    ap.add_argument("--before", help="only cubins written no later than this file was (this tune's report)")
    ap.add_argument("--others", type=int, default=3, help="cubins not chosen to show per template (3)")
    ap.add_argument("--cuobjdump", help="cuobjdump to use (default: PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)")
    args = ap.parse_args(argv)

    bounds = {}
    for which in ("after", "before"):
        path = getattr(args, which)
        if path:
            try:
                bounds[which] = os.path.getmtime(path)
            except OSError as e:
                print(f"sass_summary: --{which} {path}: {e}", file=sys.stderr)
                return 2
    reports = []
    for path in args.tune_json:
        try:
            with open(path) as f:
                reports.append(json.load(f))
        except (OSError, ValueError) as e:
            print(f"sass_summary: tune report {path} unreadable ({e}); its kernels are not marked\n")
    cache = load_cache(args.cache_dir, **bounds)
    entries = [e for e in cache if e.in_window]
    if not entries:
        window = " written in the --after/--before window" if bounds else ""
        print(f"No cubin with its source (.cu) beside it{window} in {args.cache_dir}.\n")
        return 0
    earlier = [e for e in cache if not e.in_window]
    cuobjdump = find_cuobjdump(args.cuobjdump)
    render(select(entries, chosen_kernels(reports), args.others, earlier), cuobjdump, len(entries), bool(bounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
