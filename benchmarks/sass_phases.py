#!/usr/bin/env python3
"""Where an attention kernel's warps stall, per phase of its step loop, from
ncu's source page (the CSVs scripts/gpu/profile_sass.sh writes, one per
kernel): side by side for several kernels, e.g. cmask's forward against
FA4's and cuDNN flex's (docs/performance.md, thirty-seventh session).

    python3 benchmarks/sass_phases.py cmask=sass-0.csv fa4=sass-1.csv cudnn=sass-2.csv

The step loop is the instructions executed as often as the most executed
HGMMA (at least 90% of its count); its phases are cut at the wgmma waits
(`WARPGROUP.DEPBAR`): "issue" before the first wait (the operand waits
and the wgmmas' issue), each wait, and the instructions after it up to
the next. Per phase: SASS instructions, stall samples, and the samples
of the largest stall reasons (the rest, under "unlisted", is what the
source page gives no reason for, such as a wgmma waiting for its turn).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def _num(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def read_source_page(path: Path) -> list[dict]:
    """The source page's instruction rows: source text, samples, executions
    and the per-reason samples (stall_* columns, all samples)."""
    rows = list(csv.reader(path.open()))
    try:
        h = next(i for i, r in enumerate(rows) if "Source" in r and "Address" in r)
    except StopIteration:
        sys.exit(f"sass_phases: {path}: no source-page header (Address, Source)")
    head = rows[h]
    missing = [c for c in (SAMPLES, EXECUTED) if c not in head]
    if missing:
        sys.exit(f"sass_phases: {path}: no column {missing[0]!r}")
    src, samp, ex = head.index("Source"), head.index(SAMPLES), head.index(EXECUTED)
    reasons = [(c[len("stall_"):], i) for i, c in enumerate(head)
               if c.startswith("stall_") and "(Not" not in c]
    out = []
    for r in rows[h + 1:]:
        if len(r) != len(head):
            continue
        out.append({"source": r[src].strip(), "samples": _num(r[samp]),
                    "executed": _num(r[ex]),
                    "reasons": {name: _num(r[i]) for name, i in reasons}})
    return out


def phases(instructions: list[dict]) -> tuple[list[tuple[str, dict]], float, float]:
    """The step loop's phases (name, totals), the kernel's samples and the
    samples outside the loop."""
    total = sum(i["samples"] for i in instructions)
    hgmma = [i["executed"] for i in instructions if "HGMMA" in i["source"]]
    if not hgmma:
        return [], total, total
    bound = 0.9 * max(hgmma)
    loop = [i for i in instructions if i["executed"] >= bound]
    out: list[tuple[str, dict]] = []
    name, waits = "issue", 0
    for ins in loop:
        if "WARPGROUP.DEPBAR" in ins["source"]:
            waits += 1
            name = f"wait {waits}"
        if not out or out[-1][0] != name:
            out.append((name, {"instructions": 0, "samples": 0.0, "reasons": {}}))
        acc = out[-1][1]
        acc["instructions"] += 1
        acc["samples"] += ins["samples"]
        for k, v in ins["reasons"].items():
            acc["reasons"][k] = acc["reasons"].get(k, 0.0) + v
        if "WARPGROUP.DEPBAR" in ins["source"]:
            name = f"after wait {waits}"
    inside = sum(p["samples"] for _, p in out)
    return out, total, total - inside


def report(kernels: list[tuple[str, Path]], top: int = 4) -> str:
    lines = []
    for label, path in kernels:
        parts, total, outside = phases(read_source_page(path))
        lines.append(f"{label}: {total:.0f} stall samples, {outside:.0f} outside the step loop")
        if not parts:
            lines.append("  no HGMMA: no step loop found")
        for name, p in parts:
            listed = sum(p["reasons"].values())
            big = sorted(p["reasons"].items(), key=lambda kv: -kv[1])[:top]
            why = ", ".join(f"{k} {v:.0f}" for k, v in big if v > 0)
            unlisted = p["samples"] - listed
            if unlisted > 0.5:
                why += f", unlisted {unlisted:.0f}"
            lines.append(f"  {name:13s} {p['instructions']:4d} instructions "
                         f"{p['samples']:9.0f} samples  {why}")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if not argv or any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        sys.exit(0 if argv else 2)
    kernels = []
    for a in argv:
        label, _, path = a.rpartition("=")
        p = Path(path)
        if not p.is_file():
            sys.exit(f"sass_phases: {path}: no such file")
        kernels.append((label or p.stem, p))
    print(report(kernels))


if __name__ == "__main__":
    main(sys.argv[1:])
