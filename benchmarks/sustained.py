#!/usr/bin/env python3
"""SM clock and power while one attention kernel runs back to back, cmask's
and FA4's in turn: cycles or power.

The H200 is power-limited on long problems: a kernel that draws more power
runs at lower clocks, one that keeps its tensor cores idler at higher ones.
For each shape, CALLS forwards (or, with --backward, forward+backward
through autograd) of cmask (on a prepared descriptor) and of
FlashAttention-4 (flash_attn.cute, causal; installed as benchmarks/peers.py
says; at GQA also FA4 with pack_gqa=False, forward only) run back to back, ROUNDS times in alternating order, while nvidia-smi
samples the SM clock and the board power every 100 ms (the first 0.5 s of a
run dropped). Prints ms per call, the median clock (and its range), the
median power, the energy (W x ms) and the cycles (MHz x ms) per call, and
the cycles relative to FA4's, and cmask's cycles per visible pair. Where both
sustain the same clock, a ratio of times is one of cycles, which no power
limit explains. Masks other than causal (or --no-fa4) run cmask alone: their
cycles per pair against causal's show what a mask costs under the same power
limit. nvidia-smi's power reading lags the load: a run of about a second
(the default CALLS of a 16K forward) reads well below the limit; raise CALLS
for its power.

With --zero-half, head dimensions 64..127 of q, k, v (and dout) are zeroed:
zeros draw less power in the tensor cores, so a time that moves with the
data is one the power limit sets, while a kernel's cycles per call stay
(docs/performance.md, 2026-12-04, seventeenth session).

    python3 benchmarks/sustained.py ARTIFACTS [--shapes causal:32768] [--calls 400] [--rounds 2]
                                    [--backward] [--zero-half] [--no-fa4]

ARTIFACTS is a directory of <mask>/ artifacts (scripts/gpu/prepare_attention.sh);
SHAPES as benchmarks/ab_forward.py takes them (FA4 beside cmask on causal masks).
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import cmask

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_forward  # noqa: E402
import bench_attention as bench  # noqa: E402
import peers  # noqa: E402


def run(fn, calls: int):
    """ms per call of `calls` back-to-back calls, and the (MHz, W) samples."""
    with tempfile.NamedTemporaryFile("w+", suffix=".csv") as log:
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw",
                                "--format=csv,noheader,nounits", "-lms", "100"], stdout=log)
        try:
            time.sleep(0.5)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
        finally:
            smi.terminate()
            smi.wait()
        log.seek(0)
        rows = [line.split(",") for line in log if line.strip()]
    samples = [(float(mhz), float(w)) for mhz, w in rows[5:]]
    if not samples:
        sys.exit("sustained: no nvidia-smi samples after the first 0.5 s (too few calls?)")
    return start.elapsed_time(end) / calls, samples


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("artifacts")
    p.add_argument("--shapes", default="causal:32768")
    p.add_argument("--calls", type=int, default=400)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--backward", action="store_true",
                   help="forward+backward through autograd instead of the forward")
    p.add_argument("--zero-half", action="store_true",
                   help="head dimensions 64..127 of the inputs zeroed (less power per wgmma)")
    p.add_argument("--no-fa4", action="store_true", help="cmask alone (no peers installed)")
    a = p.parse_args()
    print("| shape | round | kernel | ms per call | SM MHz, median (range) | W, median "
          "| J per call | Mcycles per call | cycles / FA4's | cycles per 1K visible pairs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for shape in a.shapes.split(","):
        parts = shape.split(":")
        wl = ab_forward.workload(parts[0], int(parts[1]) if len(parts) > 1 else 32768,
                                 int(parts[3]) if len(parts) > 3 else None)
        with_fa4 = wl.artifact == "causal" and not a.no_fa4
        x = peers.Inputs(wl, seed=0, train=a.backward)
        if a.zero_half:
            for layout in ("bhld", "blhd"):
                for t in list(x.t[layout]) + [x.dout[layout]]:
                    if t is not None:
                        t[..., peers.D // 2:] = 0
        q, k, v = x.get("blhd")
        m = cmask.load(Path(a.artifacts) / wl.artifact)
        prepared = m.prepare(q=q, k=k, columns=a.backward, **(wl.layout_kwargs | wl.meta))
        pairs = bench.visible_pairs(bench.interval_table(m, prepared, wl.rows))
        fa4 = peers._fa4_setup(wl, x, a.backward).fn if with_fa4 else None
        if a.backward:
            fns = {"cmask": peers.fwd_bwd(lambda *t: m.attention(*t, prepared=prepared),
                                          x.leaves("blhd"), x.dout["blhd"])}
            if fa4:
                fns["FA4"] = peers.fwd_bwd(fa4, x.leaves("blhd"), x.dout["blhd"])
        else:
            fns = {"cmask": lambda: m.attention(q, k, v, prepared=prepared)}
            if fa4:
                fns["FA4"] = lambda: fa4(q, k, v)
            if fa4 and wl.gqa:  # FA4 packs GQA by default: also without it
                unpacked = peers._fa4_unpacked_setup(wl, x, False).fn
                fns["FA4 unpacked"] = lambda: unpacked(q, k, v)
        for fn in fns.values():  # compile, warm
            for _ in range(3):
                fn()
        torch.cuda.synchronize()
        for r in range(a.rounds):
            order = list(fns) if r % 2 == 0 else list(reversed(fns))  # alternating
            got = {}
            for who in order:
                time.sleep(3)  # the same start for each run
                got[who] = run(fns[who], a.calls)
            cycles = {who: ms * statistics.median(s[0] for s in samples)
                      for who, (ms, samples) in got.items()}
            for who in order:
                ms, samples = got[who]
                mhz = [s[0] for s in samples]
                watts = statistics.median(s[1] for s in samples)
                vs_fa4 = f"{cycles[who] / cycles['FA4']:.3f}" if "FA4" in cycles else "-"
                per_pair = (f"{cycles[who] * 1e6 / (pairs * peers.H):.3f}" if who == "cmask"
                            else "-")
                print(f"| {shape} | {r} | {who} | {ms:.3f} | {statistics.median(mhz):.0f} "
                      f"({min(mhz):.0f}-{max(mhz):.0f}) | {watts:.0f} | "
                      f"{watts * ms / 1e3:.2f} | {cycles[who] / 1e3:.2f} | {vs_fa4} | "
                      f"{per_pair} |", flush=True)
        del x, prepared
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
