#!/usr/bin/env python3
"""SM clock and power while one attention kernel runs back to back, cmask's
and each peer's in turn: cycles or power.

The H200 is power-limited on long problems: a kernel that draws more power
runs at lower clocks, one that keeps its tensor cores idler at higher ones.
For each shape, CALLS forwards (or, with --backward, forward+backward
through autograd) of cmask (on a prepared descriptor) and of each peer of
--peers that applies to the shape (benchmarks/peers.py's keys and set-ups,
installed as it says; default fa4: FlashAttention-4 on causal masks, and
its varlen causal on packed ones, marked * (another mask: never the
ratios' peer); e.g. flex_fa4,cudnn_flex on any mask; fa4_unpacked, named,
for FA4 at GQA without its packing) run back to back, ROUNDS times in alternating order, while
nvidia-smi samples the SM clock and the board power every 100 ms (peers.ClockLog;
the samples while the calls ran). Prints ms per call, the median clock (and its
range), the median power, the energy (W x ms) and the cycles (MHz x ms) per
call, the cycles relative to the first peer of --peers that ran, and cmask's cycles
per visible pair. Where both sustain the same clock, a ratio of times is
one of cycles, which no power limit explains. With --peers "" (or
--no-fa4) cmask runs alone: its cycles per pair against causal's show what
a mask costs under the same power limit. nvidia-smi's power reading lags
the load: a run of about a second (the default CALLS of a 16K forward)
reads well below the limit; raise CALLS for its power.

With --zero-half, head dimensions 64..127 of q, k, v (and dout) are zeroed:
zeros draw less power in the tensor cores, so a time that moves with the
data is one the power limit sets, while a kernel's cycles per call stay
(docs/performance.md, 2026-12-04, seventeenth session).

    python3 benchmarks/sustained.py ARTIFACTS [--shapes causal:32768] [--calls 400] [--rounds 2]
                                    [--backward] [--zero-half] [--peers fa4,flex_fa4,cudnn_flex]
                                    [--schedules grid,persistent,persistent+s2]

ARTIFACTS is a directory of <mask>/ artifacts (scripts/gpu/prepare_attention.sh);
SHAPES as benchmarks/ab_forward.py takes them (mask[:N[:tile[:B[:KV]]]]; the
tile is cmask's, the runtime's choice when not given, 128x128 with
--schedules).
"""

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch

import cmask

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_forward  # noqa: E402
import bench_attention as bench  # noqa: E402
import peers  # noqa: E402


def run(fn, calls: int):
    """ms per call of `calls` back-to-back calls, and the (MHz, W) samples
    nvidia-smi took while they ran (peers.ClockLog, every 100 ms)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with peers.ClockLog(period_ms=100, fields=("clocks.sm", "power.draw")) as smi:
        time.sleep(0.5)  # nvidia-smi's start and first samples on no call
        t0 = time.time()
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        t1 = time.time()
    samples = [(mhz, w) for _, mhz, w in smi.inside([(t0, t1)])]
    if not samples:
        sys.exit("sustained: no nvidia-smi samples while the calls ran (too few calls?)")
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
    p.add_argument("--peers", default="fa4",
                   help="comma-separated keys of benchmarks/peers.py (\"\": cmask alone)")
    p.add_argument("--no-fa4", action="store_true", help="the same as --peers \"\"")
    p.add_argument("--schedules", default="",
                   help="forward only: cmask once per listed schedule (grid, persistent, "
                        "persistent+sN for sections of N query heads: ab_forward's options, "
                        "Mask.attention's schedule= and section_heads=) instead of the "
                        "runtime's choice")
    a = p.parse_args()
    schedules = [x for x in a.schedules.split(",") if x]
    # Each one's Mask.attention keywords (ab_forward's options: grid,
    # persistent, persistent+s2 for sections of 2 query heads, ...).
    schedule_kw = {x: ab_forward.options("cmask@" + x) for x in schedules}
    if schedules and a.backward:
        p.error("--schedules is forward only (schedule= is a forward option)")
    keys = [] if a.no_fa4 else [k for k in a.peers.split(",") if k]
    unknown = sorted(set(keys) - set(peers.LABELS))
    if unknown:
        p.error(f"unknown peer(s) {', '.join(unknown)}: one of {', '.join(peers.LABELS)}")
    print("| shape | round | kernel | ms per call | SM MHz, median (range) | W, median "
          "| J per call | Mcycles per call | cycles / the first peer's "
          "| cycles per 1K visible pairs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for shape in a.shapes.split(","):
        parts = shape.split(":")
        wl = ab_forward.workload(parts[0], int(parts[1]) if len(parts) > 1 and parts[1] else 32768,
                                 int(parts[3]) if len(parts) > 3 and parts[3] else None,
                                 int(parts[4]) if len(parts) > 4 and parts[4] else None)
        # The shape's tile for cmask (the runtime's choice if not given; a
        # schedule exists for the 128x128 grid and persistent kernels only).
        tile = parts[2] if len(parts) > 2 and parts[2] else ("128x128" if schedules else None)
        x = peers.Inputs(wl, seed=0, train=a.backward)
        if a.zero_half:
            for layout in ("bhld", "blhd"):
                for t in list(x.t[layout]) + [x.dout[layout]]:
                    if t is not None:
                        t[..., peers.D // 2:] = 0
        q, k, v = x.get("blhd")
        m = cmask.load(Path(a.artifacts) / wl.artifact)
        prepared = m.prepare(q=q, k=k, columns=a.backward, **(wl.layout_kwargs | wl.meta))
        wl.iv = bench.interval_table(m, prepared, wl.rows)  # cuDNN flex's endpoints
        pairs = bench.visible_pairs(wl.iv)

        def timed(fn, layout, ctx=contextlib.nullcontext):
            """fn(q, k, v), or its forward+backward, inside ctx."""
            if a.backward:
                step = peers.fwd_bwd(fn, x.leaves(layout), x.dout[layout])
            else:
                qq, kk, vv = x.get(layout)
                step = lambda: fn(qq, kk, vv)  # noqa: E731

            def call():
                with ctx():
                    step()
            return call

        fns = {f"cmask@{sch}": timed(lambda q, k, v, kw=schedule_kw[sch]: m.attention(
            q, k, v, prepared=prepared, tile_shape=tile, **kw), "blhd")
            for sch in schedules}
        if not schedules:
            fns["cmask"] = timed(lambda q, k, v: m.attention(q, k, v, prepared=prepared,
                                                             tile_shape=tile), "blhd")
        own_mask = set()  # peers that compute another mask (FA4's varlen causal)
        for peer in (next(p for p in peers.PEERS if p.key == key) for key in keys):
            st = peers.setup_if_installed(peer, wl, x, a.backward) if peer.applies(wl) else None
            if st:
                who = st.info.get("label", peer.label) + ("*" if st.mm else "")
                fns[who] = timed(st.fn, peer.layout, st.ctx)
                if st.mm:
                    own_mask.add(who)
        # The ratios' peer: the first of --peers that ran and computes cmask's mask.
        ref = next((who for who in fns if not who.startswith("cmask") and who not in own_mask),
                   None)
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
                vs_ref = f"{cycles[who] / cycles[ref]:.3f}" if ref in cycles else "-"
                per_pair = (f"{cycles[who] * 1e6 / (pairs * peers.H):.3f}"
                            if who.startswith("cmask") else "-")
                print(f"| {shape} | {r} | {who} | {ms:.3f} | {statistics.median(mhz):.0f} "
                      f"({min(mhz):.0f}-{max(mhz):.0f}) | {watts:.0f} | "
                      f"{watts * ms / 1e3:.2f} | {cycles[who] / 1e3:.2f} | {vs_ref} | "
                      f"{per_pair} |", flush=True)
        del x, prepared
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
