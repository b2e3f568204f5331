#!/usr/bin/env python3
"""A model of the backward key-tile kernel's steps on a banded mask: how much
of their tensor work query windows would leave, with the fixed key tile's
two 64-key halves contiguous (the kernel's today) or paired at a stride. No
GPU; cmask's CPU twin only with --twin.

The key-tile kernel (docs/attention.md) gives a CTA 128 fixed keys, 64 to
each consumer warpgroup, and walks the 64-query tiles that see them: a step
is five m64 wgmmas of equal size, S^T and dP^T (N = the step's queries),
dV and dK (K = the step's queries) and dQ (M = 64 queries, N = 64 of D, K =
the 128 keys: both warpgroups' dS, so the two warpgroups run each step
together). The forward runs a partial tile's warpgroup on the column window
that holds what its rows see (docs/attention.md, Column windows); the
backward has no windows. A warpgroup's share of a step whose queries are a
window of W (rounded out to 16, a wgmma k-step) is FIXED + (1 - FIXED) * W /
64 of a whole one (S^T, dP^T, dV and dK on the window only; dQ's m64 stays:
FIXED = 1/5). Three ways to count a step:

- a window per step: the window that holds every query either half sees,
  both warpgroups on it (the step's wgmmas keep their shapes in both);
- only dV's and dK's k-steps skipped: per warpgroup, the k-steps of 16
  queries that none of its keys sees (S^T, dP^T and dQ whole: 3/5 of a
  step kept), `benchmarks/variants/bwd-kskip.patch`;
- a window per warpgroup: each warpgroup on its own half's window (the
  column direction's `tile_windows` hold them, one per 64 rows = keys),
  the step costing the mean of the two shares: the two warpgroups' wgmmas
  share the SM's tensor cores and shared-memory bandwidth, so a narrow half
  frees them for the wide one (a model of a tensor- or shared-memory-bound
  step, not of its latency).

Two layouts of the fixed keys:
- contiguous (stride 64): the halves are keys [128c, 128c + 64) and
  [128c + 64, 128c + 128), as today;
- paired at a stride S (a multiple of 64): the halves are 64-key chunks S
  keys apart (a chunk pairs with the first unpaired chunk S keys on, and
  stays alone at the end), e.g. one image row's chunk with the next row's.

On CLEAR's grid (benchmarks/bench_attention.py's clear(n): 512 text tokens,
then a grid of width W = 2^ceil(log2 sqrt n), radius 16) one warpgroup of
every contiguous partial step sees the whole 64-query tile and the other at
most 16 queries, so the step's window is the whole tile: at 8K a window
per step gains nothing unless the halves are paired at the grid's width; a
window per warpgroup gains about as much with today's tiles.

    .venv/bin/python benchmarks/backward_windows.py [--masks clear:8192,clear:32768] [--strides 64,width]
                                                  [--body 16] [--twin build/bin/cmask-translate]

A mask is clear:N, causal:N or sliding:N/WINDOW (masks/sliding_window.mlir:
0 <= i - j <= WINDOW); a stride is a number of keys or `width` (the grid's
width; 64 for the others).
"""

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import numpy as np
except ImportError:
    sys.exit("backward_windows.py needs numpy: run it with the project's "
             ".venv/bin/python (scripts/setup.sh makes it) or install numpy")

T_TEXT, RADIUS = 512, 16  # benchmarks/bench_attention.py's CLEAR
CHUNK, QTILE, FIXED = 64, 64, 0.2


class Clear:
    def __init__(self, n, text=T_TEXT, radius=RADIUS):
        self.width = 1 << math.ceil(math.log2(math.sqrt(n)))
        self.text, self.radius = text, radius
        self.tokens = text + n

    def block(self, q0, k0):
        """The visible pairs of queries [q0, q0 + 64) x keys [k0, k0 + 64)."""
        q = np.arange(q0, min(q0 + QTILE, self.tokens))[:, None]
        k = np.arange(k0, min(k0 + CHUNK, self.tokens))[None, :]
        w, t = self.width, self.text
        dy = (q - t) // w - (k - t) // w
        dx = (q - t) % w - (k - t) % w
        return (q < t) | (k < t) | (dy * dy + dx * dx <= self.radius * self.radius)


class Sliding:
    """masks/sliding_window.mlir: key j visible to query i when 0 <= i - j <=
    window (causal: a window as long as the sequence)."""

    def __init__(self, n, window):
        self.width = CHUNK
        self.tokens, self.window = n, window

    def block(self, q0, k0):
        q = np.arange(q0, min(q0 + QTILE, self.tokens))[:, None]
        k = np.arange(k0, min(k0 + CHUNK, self.tokens))[None, :]
        return (k <= q) & (q - k <= self.window)


def Causal(n):
    return Sliding(n, n)


def pairs(chunks, stride):
    """The CTAs' fixed key chunks: (c, d) with d = c + stride / 64 where that
    chunk is still unpaired, else (c, None)."""
    step = stride // CHUNK
    used = [False] * chunks
    out = []
    for c in range(chunks):
        if used[c]:
            continue
        used[c] = True
        d = c + step
        if d < chunks and not used[d]:
            used[d] = True
            out.append((c, d))
        else:
            out.append((c, None))
    return out


def rounded(lo, hi):
    """The width of [lo, hi) rounded out to 16 (0 when empty)."""
    return 0 if hi <= lo else -(-hi // 16) * 16 - lo // 16 * 16


def window(rows):
    """The visible query rows' (booleans) window, rounded out to 16."""
    seen = np.nonzero(rows)[0]
    return rounded(int(seen[0]), int(seen[-1]) + 1) if len(seen) else 0


def cost(w, body=None):
    """A warpgroup's share of a step whose queries are a window of w: on w
    queries, or with one narrow `body` width (the kernel's wgmma shapes are
    compiled), on `body` queries where w fits and on all 64 where not."""
    if body is not None:
        w = body if w <= body else QTILE
    return FIXED + (1 - FIXED) * w / QTILE


def steps(mask, stride, body=None):
    """(steps, full steps, {window: partial steps}, work with a window per
    step, with a window per warpgroup, with only dV's and dK's unseen
    k-steps skipped per warpgroup), work in whole steps."""
    chunks = -(-mask.tokens // CHUNK)
    total = full = 0
    widths = {}
    per_step = per_wg = skip = 0.0
    for c, d in pairs(chunks, stride):
        for q0 in range(0, mask.tokens, QTILE):
            halves = [mask.block(q0, CHUNK * c)]
            if d is not None:
                halves.append(mask.block(q0, CHUNK * d))
            if not any(h.any() for h in halves):
                continue
            total += 1
            if all(h.all() for h in halves):
                full += 1
                per_step += 1
                per_wg += 1
                skip += 1
                continue
            w = window(np.any([h.any(axis=1) for h in halves], axis=0))
            widths[w] = widths.get(w, 0) + 1
            per_step += cost(w, body)
            # A half-less CTA's second warpgroup idles (cost 0 of its half).
            per_wg += sum(cost(window(h.any(axis=1)), body) for h in halves) / 2
            # Only dV's and dK's k-steps of 16 queries that no key of the
            # half sees skipped (S^T, dP^T and dQ whole: 3/5 of a step).
            skip += sum(3 * FIXED + 2 * FIXED * kept(h.any(axis=1)) / 4 for h in halves) / 2
    return total, full, widths, per_step, per_wg, skip


def kept(rows):
    """The k-steps of 16 queries in which any of `rows` (booleans) is seen."""
    return sum(bool(rows[k:k + 16].any()) for k in range(0, len(rows), 16))


def twin_windows(translate, mask):
    """The per-warpgroup windows of the training descriptor's column
    direction as the CPU twin builds them (cmask-translate
    --cmask-to-descriptor-json, key tiles of 128 x 64 queries): per step,
    (state, [lo, hi) of the first 64 keys, [lo, hi) of the second)."""
    root = Path(__file__).resolve().parents[1]
    meta = [{"sequences": [{"q_len": mask.tokens, "k_len": mask.tokens}],
             "metadata": {"text_len": mask.text, "height": (mask.tokens - mask.text) // mask.width,
                          "width": mask.width, "radius": mask.radius}}]
    with tempfile.TemporaryDirectory() as d:
        md = Path(d) / "metadata.json"
        md.write_text(json.dumps(meta))
        out = subprocess.run([translate, root / "masks" / "clear.mlir", "--cmask-to-descriptor-json",
                              f"--metadata={md}", "--tile-shapes=128x64"],
                             capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"backward_windows: {translate} failed:\n{out.stderr[-2000:]}")
    tiles = json.loads(out.stdout)[0]["columns"]["tiles"]["128x64"]
    return [(e[1], w[0:2], w[2:4]) for e, w in zip(tiles["entries"], tiles["windows"])]


def twin_work(translate, mask, body=None):
    """(steps, work with a window per warpgroup) from twin_windows."""
    work = 0.0
    entries = twin_windows(translate, mask)
    for state, *halves in entries:
        if state == 2:  # full
            work += 1
            continue
        work += sum(cost(rounded(lo, hi), body)
                    for lo, hi in halves) / 2
    return len(entries), work


def make(spec):
    name, _, n = spec.partition(":")
    if name == "clear":
        return Clear(int(n))
    if name == "causal":
        return Causal(int(n))
    if name == "sliding":
        n, _, window = n.partition("/")
        return Sliding(int(n), int(window or 1024))
    raise SystemExit(f"backward_windows: unknown mask {name!r} "
                     "(clear:N, causal:N or sliding:N/WINDOW)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--masks", default="clear:8192,clear:32768")
    p.add_argument("--strides", default="64,width")
    p.add_argument("--body", type=int, default=None,
                   help="one narrow body of this many queries (16, 32 or 48) instead of "
                        "each window's own width")
    p.add_argument("--twin", metavar="CMASK_TRANSLATE",
                   help="also the per-warpgroup work from the column windows of the training "
                        "descriptor the CPU twin builds (CLEAR only), e.g. build/bin/cmask-translate")
    a = p.parse_args()
    print("| mask | stride | steps | full | partial steps by step window (queries) "
          "| work, a window per step | per warpgroup | dV, dK k-steps skipped |")
    print("|---|---|---|---|---|---|---|---|")
    for spec in a.masks.split(","):
        mask = make(spec)
        today = None
        strides = [mask.width if s == "width" else int(s) for s in a.strides.split(",")]
        for stride in dict.fromkeys(strides):  # once each (`width` is 64 off a grid)
            if stride % CHUNK or stride <= 0:
                raise SystemExit(f"backward_windows: a stride is a positive multiple of {CHUNK}")
            total, full, widths, per_step, per_wg, skip = steps(mask, stride, a.body)
            if today is None:
                today = total if stride == CHUNK else steps(mask, CHUNK)[0]
            hist = ", ".join(f"{w}: {c}" for w, c in sorted(widths.items()))
            print(f"| {spec} | {stride} | {total} | {full} | {hist} | {per_step / today:.3f} "
                  f"| {per_wg / today:.3f} | {skip / today:.3f} |", flush=True)
        if a.twin and isinstance(mask, Clear):
            n, work = twin_work(a.twin, mask, a.body)
            print(f"| {spec}, the descriptor's windows | 64 | {n} | | | | {work / n:.3f} | |",
                  flush=True)


if __name__ == "__main__":
    main()
