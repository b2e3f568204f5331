#!/usr/bin/env python3
"""Where an attention kernel's warps stall, per phase of its step loop, from
ncu's source page (the CSVs scripts/gpu/profile_sass.sh writes, one per
kernel): side by side for several kernels, e.g. cmask's forward against
FA4's and cuDNN flex's (docs/performance.md, thirty-seventh session).

    python3 benchmarks/sass_phases.py cmask=sass-0.csv fa4=sass-1.csv cudnn=sass-2.csv

With --classes it prints, per kernel, the step loop's samples per
instruction class instead (the opcode without its modifiers: FMNMX,
MUFU, HGMMA, ...), the largest classes first.

With --summary PAGE [DETAILS] it prints one kernel's summary instead
(profile_sass.sh writes it as sass-<i>.txt): the stall samples, a few
metrics of the details page, the largest stall reasons, the 40
instructions with the most samples, then the whole listing in address
order (each instruction's share, executions and largest stall reasons).

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
NOT_ISSUED = "Warp Stall Sampling (Not-issued Samples)"
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
    notis = head.index(NOT_ISSUED) if NOT_ISSUED in head else None
    reasons = [(c[len("stall_"):], i) for i, c in enumerate(head)
               if c.startswith("stall_") and "(Not" not in c]
    out = []
    for r in rows[h + 1:]:
        if len(r) != len(head):
            continue
        out.append({"source": r[src].strip(), "samples": _num(r[samp]),
                    "executed": _num(r[ex]),
                    "not_issued": _num(r[notis]) if notis is not None else 0.0,
                    "reasons": {name: _num(r[i]) for name, i in reasons}})
    return out


def step_loop(instructions: list[dict]) -> list[dict]:
    """The step loop's instructions: those executed at least 90% as often
    as the most executed HGMMA (none without an HGMMA)."""
    hgmma = [i["executed"] for i in instructions if "HGMMA" in i["source"]]
    if not hgmma:
        return []
    bound = 0.9 * max(hgmma)
    return [i for i in instructions if i["executed"] >= bound]


def phases(instructions: list[dict]) -> tuple[list[tuple[str, dict]], float, float]:
    """The step loop's phases (name, totals), the kernel's samples and the
    samples outside the loop."""
    total = sum(i["samples"] for i in instructions)
    loop = step_loop(instructions)
    if not loop:
        return [], total, total
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


def opcode(source: str) -> str:
    """The instruction's opcode without predicate and modifiers:
    `@!P0 MUFU.EX2 R1, R2` -> `MUFU`."""
    words = source.split()
    while words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def classes(instructions: list[dict]) -> list[tuple[str, dict]]:
    """The step loop's (as phases() finds it) totals per opcode, the
    largest first."""
    out: dict[str, dict] = {}
    for ins in step_loop(instructions):
        acc = out.setdefault(opcode(ins["source"]),
                             {"instructions": 0, "samples": 0.0, "reasons": {}})
        acc["instructions"] += 1
        acc["samples"] += ins["samples"]
        for k, v in ins["reasons"].items():
            acc["reasons"][k] = acc["reasons"].get(k, 0.0) + v
    return sorted(out.items(), key=lambda kv: -kv[1]["samples"])


def class_report(kernels: list[tuple[str, Path]], top: int = 3, rows: int = 12) -> str:
    lines = []
    for label, path in kernels:
        ins = read_source_page(path)
        total = sum(i["samples"] for i in ins)
        lines.append(f"{label}: {total:.0f} stall samples; the step loop per class")
        for name, c in classes(ins)[:rows]:
            big = sorted(c["reasons"].items(), key=lambda kv: -kv[1])[:top]
            why = ", ".join(f"{k} {v:.0f}" for k, v in big if v > 0)
            lines.append(f"  {name:10s} {c['instructions']:4d} instructions "
                         f"{c['samples']:9.0f} samples  {why}")
    return "\n".join(lines)


DETAILS = ("Duration", "SM Frequency", "Elapsed Cycles", "Compute (SM) Throughput",
           "Warp Cycles Per Issued")


def summary(page: Path, details: Path | None = None, top: int = 40) -> str:
    """One kernel's summary and listing (see the module's doc)."""
    body = read_source_page(page)
    total = sum(i["samples"] for i in body)
    share = lambda v: v / max(total, 1) * 100  # noqa: E731
    lines = [f"instructions {len(body)}, stall samples {total:.0f}"]
    if details is not None:
        rows = [r for r in csv.reader(details.open()) if r]
        dh = next((r for r in rows if "Metric Name" in r), None)
        if dh:
            mn, mu, mv = (dh.index(c) for c in ("Metric Name", "Metric Unit", "Metric Value"))
            for r in rows[rows.index(dh) + 1:]:
                if len(r) == len(dh) and any(k in r[mn] for k in DETAILS):
                    lines.append(f"  {r[mn]}: {r[mv]} {r[mu]}")
    reasons: dict[str, float] = {}
    for i in body:
        for k, v in i["reasons"].items():
            reasons[k] = reasons.get(k, 0.0) + v
    big = sorted(reasons.items(), key=lambda kv: -kv[1])[:8]
    if big:
        lines.append("reasons: " + ", ".join(f"{k} {share(v):.1f}%" for k, v in big if v))
    lines.append(f"{'share':>6} {'samples':>8} {'not issued':>10} {'executed':>10}  instruction")
    for i in sorted(body, key=lambda i: -i["samples"])[:top]:
        lines.append(f"{share(i['samples']):5.1f}% {i['samples']:8.0f} {i['not_issued']:10.0f} "
                     f"{i['executed']:10.0f}  {i['source'][:90]}")
    # The listing, for phases by hand: index, share, times executed,
    # instruction, its three largest stall reasons (% of its samples).
    lines.append("\nlisting")
    for k, i in enumerate(body):
        v = i["samples"]
        three = sorted(i["reasons"].items(), key=lambda kv: -kv[1])[:3]
        why = " ".join(f"{c}:{w / max(v, 1) * 100:.0f}" for c, w in three if w > 0)
        lines.append(f"{k:5d} {share(v):5.2f} {i['executed']:10.0f}  {i['source'][:70]:70s} {why}")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if not argv or any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        sys.exit(0 if argv else 2)
    if argv[0] == "--summary":
        if len(argv) not in (2, 3):
            sys.exit("usage: sass_phases.py --summary PAGE.csv [DETAILS.csv]")
        paths = [Path(a) for a in argv[1:]]
        for p in paths:
            if not p.is_file():
                sys.exit(f"sass_phases: {p}: no such file")
        print(summary(paths[0], paths[1] if len(paths) > 1 else None))
        return
    by_class = argv[0] == "--classes"
    if by_class:
        argv = argv[1:]
        if not argv:
            sys.exit("usage: sass_phases.py --classes [LABEL=]PAGE.csv ...")
    kernels = []
    for a in argv:
        label, _, path = a.rpartition("=")
        p = Path(path)
        if not p.is_file():
            sys.exit(f"sass_phases: {path}: no such file")
        kernels.append((label or p.stem, p))
    print(class_report(kernels) if by_class else report(kernels))


if __name__ == "__main__":
    main(sys.argv[1:])
