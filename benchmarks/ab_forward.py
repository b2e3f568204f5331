#!/usr/bin/env python3
"""A/B of forward kernel variants in one process: each variant's artifacts
(scripts/gpu/prepare_variant.sh VARIANT) under build-gpu/exp/VARIANT/<mask>,
timed through Mask.attention with a prepared descriptor (the kernel alone,
no preprocess), median of interleaved rounds of 10 calls (5 rounds, or one
per variant if there are more; round r starts at variant r, since the
first in a round measured up to 12% slower on the H200); each variant's
output checked against float64 on sampled rows. Ratios: first variant's
time over the variant's (> 1: the variant is faster). Name one build twice
(a copy of its directory) to see the run's spread between identical
kernels.

    python3 benchmarks/ab_forward.py base,new causal:32768,clear:8192:128x128,causal_b8,gqa:16384,varlen
        [--backward] [--no-clocks] [--sample-ms 1000]

With --backward it times forward+backward through autograd on the same
prepared descriptor instead (the runtime's tile and schedule; the same
forward kernels in every variant measure the backward's difference) and
checks each variant's gradients
against the first variant's (relFro, max over dq, dk, dv; the GPU suite
checks them against float64).

A variant VAR@OPTION[+OPTION] runs VAR's artifacts with a schedule (grid or
persistent: Mask.attention's schedule=), GQA packing (packed or unpacked:
its gqa_packing=) or the persistent kernel's section of N query heads (sN:
its section_heads=), e.g. base@grid,base@persistent, base@packed,base@unpacked
or base@persistent+s4.
A shape is mask[:N[:tile[:B[:KV]]]]: a seed mask (causal, hstu, reward_model,
clear), causal_b8 (batched 8 x 4K), batched (causal, B sequences of N; B
defaults to 8), gqa (causal, 32/8 heads), varlen (packed HSTU, 30 sequences,
32K tokens) or varlen with N tokens and B sequences; N defaults to 32768,
the tile to 128x128; KV: key/value heads (of 32 query heads), e.g.
hstu:16384:::8 or varlen:32768::30:8.

Each row gives the median SM clock that nvidia-smi sampled (every 50 ms)
during the variant's timed samples, where it sampled any (@MHz): at equal
clocks a ratio is one of cycles (peers.ClockLog; --no-clocks: no sampling).

--sample-ms T: each sample is as many calls as last about T ms (at least
10; peers.sample_iters, from a 3-call probe of each variant), so that each
variant runs in the clock and power state it sets itself: at the card's
power limit a variant's time is its energy, which 10-call samples of a
short call do not reach (docs/performance.md, 2026-12-07, forty-third
session).
"""

import statistics
import sys
import time
from pathlib import Path

import torch

import cmask

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_attention as bench  # noqa: E402
import peers  # noqa: E402


def workload(mask, n, batch, kv_heads=None):
    wl = base_workload(mask, n, batch)
    if kv_heads:
        wl.Hkv = kv_heads
    return wl


OPTIONS = {"grid": ("schedule", "grid"), "persistent": ("schedule", "persistent"),
           "packed": ("gqa_packing", True), "unpacked": ("gqa_packing", False)}


def options(var):
    """Mask.attention's keywords of a variant VAR@OPTION[+OPTION]."""
    _, _, tail = var.partition("@")
    kw = {}
    for opt in filter(None, tail.split("+")):
        if opt[:1] == "s" and opt[1:].isdigit() and int(opt[1:]) > 0:
            kw["section_heads"] = int(opt[1:])
            continue
        if opt not in OPTIONS:
            sys.exit(f"ab_forward: unknown option {opt!r} in {var!r} "
                     f"(one of {', '.join(OPTIONS)}, or sN)")
        key, value = OPTIONS[opt]
        kw[key] = value
    return kw


def base_workload(mask, n, batch):
    if mask == "causal_b8":
        return bench.batched_workload(4096, 8)
    if mask == "batched":
        return bench.batched_workload(n, batch or 8)
    if mask == "gqa":
        return bench.gqa_workload(n, 8)
    if mask == "varlen":
        return bench.varlen_workload(n if batch else 32768, batch or 30, 0)
    return bench.workload(mask, n)


def main():
    args = sys.argv[1:]
    backward = "--backward" in args
    if backward:
        args.remove("--backward")
    clocks = "--no-clocks" not in args
    if not clocks:
        args.remove("--no-clocks")
    sample_ms = 0.0
    if "--sample-ms" in args:
        i = args.index("--sample-ms")
        try:
            sample_ms = float(args[i + 1])
        except (IndexError, ValueError):
            sys.exit("ab_forward: --sample-ms takes a number of milliseconds")
        if sample_ms < 0:
            sys.exit("ab_forward: --sample-ms must be at least 0")
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    variants = args[0].split(",")
    if len(set(variants)) != len(variants):
        sys.exit(f"ab_forward: a variant is named twice in {args[0]!r}")
    rows = []
    for shape in args[1].split(","):
        parts = shape.split(":")
        mask, n = parts[0], int(parts[1]) if len(parts) > 1 and parts[1] else 32768
        tile = parts[2] if len(parts) > 2 and parts[2] else "128x128"
        wl = workload(mask, n, int(parts[3]) if len(parts) > 3 and parts[3] else None,
                      int(parts[4]) if len(parts) > 4 and parts[4] else None)
        x = peers.Inputs(wl, seed=0, train=backward)
        q, k, v = x.get("blhd")
        fns = {}
        first_leaves = None
        for var in variants:
            name = var.partition("@")[0]
            kw_var = options(var)
            if backward and kw_var:
                sys.exit(f"ab_forward: {var!r}: @ options are forward only")
            m = cmask.load(f"build-gpu/exp/{name}/{wl.artifact}")
            kw = wl.layout_kwargs | wl.meta
            p = m.prepare(q=q, k=k, **kw)
            if not wl.pairs:
                wl.iv = bench.interval_table(m, p, wl.rows)
                wl.pairs = bench.visible_pairs(wl.iv)
            if backward:
                leaves = x.leaves("blhd")
                f = peers.fwd_bwd(lambda *t, m=m, p=p: m.attention(*t, prepared=p), leaves,
                                  x.dout["blhd"])
                f()
                first_leaves = first_leaves or leaves
                fns[var] = (f, peers.grads_rel(leaves, "blhd", first_leaves, "blhd",
                                               x.packed))
                continue

            def f(m=m, p=p, kw_var=kw_var, q=q, k=k, v=v):
                return m.attention(q, k, v, prepared=p, tile_shape=tile, **kw_var)
            fns[var] = (f, peers.sample_check(f(), "blhd", x, wl.mm))
        times = {var: [] for var in variants}
        windows = {var: [] for var in variants}
        n = len(variants)
        iters = {var: peers.sample_iters(peers.timeit(fns[var][0], 3) if sample_ms else 0,
                                         10, sample_ms) for var in variants}
        with peers.ClockLog(enabled=clocks) as smi:  # the SM clock in each variant's samples
            for r in range(max(5, n)):  # interleaved rounds, each from another start
                for var in variants[r % n:] + variants[:r % n]:
                    t0 = time.time()
                    times[var].append(peers.timeit(fns[var][0], iters[var]))
                    windows[var].append((t0, time.time()))
        base = statistics.median(times[variants[0]])
        for var in variants:
            ms = statistics.median(times[var])
            # forward+backward: 3.5x the forward's FLOPs (as bench_attention)
            tflops = (3.5 if backward else 1) * 4 * peers.D * peers.H * wl.pairs / ms / 1e9
            clock = smi.stats(windows[var])
            rows.append(f"{shape:22s} {var:16s} {ms:8.3f} ms {tflops:5.0f} TF/s "
                        f"{base / ms:.3f}x err {fns[var][1]:.1e} "
                        + (f"@{clock[0]:.0f} MHz " if clock else "")
                        + f"rounds {[round(t, 3) for t in times[var]]}")
            print(rows[-1], flush=True)
        del x, q, k, v, fns
        torch.cuda.empty_cache()
    print("\n".join(rows))


if __name__ == "__main__":
    main()
