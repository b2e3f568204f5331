#!/usr/bin/env python3
"""Cycles or power: cmask's attention against FlashAttention-4's at the clock
each sustains.

For each shape, each kernel runs back to back for SECONDS (batches of 5
calls, then a synchronize), twice, the two kernels' turns interleaved, while
`nvidia-smi` samples the SM clock and the board power every 50 ms. Per
kernel: ms per call (CUDA events over the whole run), the mean clock and
power of the samples inside it (the first 0.4 s and the last 0.1 s left
out), the energy per call (power x time) and the cycles per call (clock x
time). Where both kernels sustain the same clock, the ratio of their times
is a ratio of cycles, which no power limit explains. Each shape runs on
the benchmark's inputs (`real`: normal values) and on the same inputs with
head dimensions 64..127 zeroed (`zero`: q, k, v and dout), which on the
H200 draw less power per tensor-core instruction: a timing that changes
with the data is one the power limit sets.

    python3 benchmarks/clock_cycles.py ARTIFACTS SHAPES [--seconds S]
    python3 benchmarks/clock_cycles.py build-gpu/attention causal:32768:fwd,gqa:16384:fwd,causal:16384:fb

A shape is mask:N:fwd (the forward on a prepared descriptor) or mask:N:fb
(forward+backward through autograd), mask a causal one of
benchmarks/ab_forward.py (causal, gqa, causal_b8, batched) since FA4 takes
its own causal mask. FA4 installed as benchmarks/peers.py says.
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

import cmask

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_forward  # noqa: E402
import peers  # noqa: E402

SAMPLE_MS = 50


def sustained(fn, seconds):
    """(ms per call, mean MHz, mean W) of fn run back to back for seconds."""
    fn()
    torch.cuda.synchronize()
    smi = subprocess.Popen(
        ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
         "-lms", str(SAMPLE_MS)], stdout=subprocess.PIPE, text=True)
    time.sleep(0.1)
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    calls, t0 = 0, time.time()
    start.record()
    while time.time() - t0 < seconds:
        for _ in range(5):
            fn()
        calls += 5
        torch.cuda.synchronize()
    end.record()
    torch.cuda.synchronize()
    smi.terminate()
    lines = smi.communicate()[0].strip().splitlines()
    samples = [tuple(map(float, ln.split(","))) for ln in lines if ln.count(",") == 1]
    inside = samples[(400 // SAMPLE_MS):-2]
    if not inside:
        sys.exit(f"clock_cycles: {len(samples)} nvidia-smi samples in {seconds} s; "
                 "raise --seconds")
    return (start.elapsed_time(end) / calls, statistics.mean(s[0] for s in inside),
            statistics.mean(s[1] for s in inside))


def inputs(wl, train, zero):
    x = peers.Inputs(wl, seed=0, train=train)
    if zero:
        for layout in ("bhld", "blhd"):
            for t in x.t[layout]:
                t[..., 64:] = 0
            if x.dout[layout] is not None:
                x.dout[layout][..., 64:] = 0
    return x


def kernels(artifacts, wl, x, train):
    from flash_attn.cute import flash_attn_func
    m = cmask.load(f"{artifacts}/{wl.artifact}")
    q, k, v = x.get("blhd")
    p = m.prepare(q=q, k=k, **(wl.layout_kwargs | wl.meta))
    if train:
        return {"cmask": peers.fwd_bwd(lambda *t: m.attention(*t, prepared=p),
                                       x.leaves("blhd"), x.dout["blhd"]),
                "FA4": peers.fwd_bwd(lambda *t: flash_attn_func(*t, causal=True)[0],
                                     x.leaves("blhd"), x.dout["blhd"])}
    return {"cmask": lambda: m.attention(q, k, v, prepared=p),
            "FA4": lambda: flash_attn_func(q, k, v, causal=True)[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("artifacts")
    ap.add_argument("shapes")
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    print("| shape | data | kernel | ms | MHz | W | J per call | Mcycles per call | runs (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for shape in a.shapes.split(","):
        parts = shape.split(":")
        if len(parts) != 3 or parts[2] not in ("fwd", "fb"):
            sys.exit(f"clock_cycles: a shape is mask:N:fwd or mask:N:fb, got {shape!r}")
        wl = ab_forward.workload(parts[0], int(parts[1]), None)
        if not wl.causal:
            sys.exit(f"clock_cycles: {parts[0]!r} is not causal; FA4 takes causal masks only")
        train = parts[2] == "fb"
        for data in ("real", "zero"):
            x = inputs(wl, train, data == "zero")
            fns = kernels(a.artifacts, wl, x, train)
            for fn in fns.values():  # FA4's JIT compile, cmask's first launch
                fn()
                fn()
            runs = {key: [] for key in fns}
            for turn in range(2):
                for key in (list(fns) if turn == 0 else list(fns)[::-1]):
                    runs[key].append(sustained(fns[key], a.seconds))
            for key, r in runs.items():
                ms, mhz, w = (statistics.mean(s[i] for s in r) for i in range(3))
                print(f"| {shape} | {data} | {key} | {ms:.3f} | {mhz:.0f} | {w:.0f} | "
                      f"{w * ms / 1e3:.2f} | {mhz * ms / 1e3:.2f} | "
                      f"{', '.join(f'{s[0]:.3f}' for s in r)} |", flush=True)
            del x, fns
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
