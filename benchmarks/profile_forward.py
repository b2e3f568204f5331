#!/usr/bin/env python3
"""One forward (or, with --backward, one forward+backward through autograd)
of cmask and of each given peer on one workload, for a profiler: warm-up
(JIT compilation, the descriptor) outside, then the profiled calls between
torch.cuda.profiler.start() and stop(), so that `ncu --profile-from-start
off` sees exactly one attention call each (scripts/gpu/profile_forward.sh
runs it; with --backward, every kernel of the call: the forward, the
backward's passes and its main kernel).

    python3 benchmarks/profile_forward.py --artifacts build-gpu/attention \
        --mask causal --n 32768 [--peers fa4,cudnn_flex] [--backward]
    (--mask gqa [--kv-heads 8]: causal with grouped query heads;
     --batch B: B sequences of --n tokens each, e.g. --mask causal --n 4096
     --batch 8; --schedules grid,persistent,persistent+s2: cmask once per
     schedule (ab_forward's options: +sN sections of N query heads), forward
     only, in place of the runtime's choice)

A peer whose package does not import (not installed) is skipped with a
note, so the default --peers fa4 also profiles cmask alone.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_forward  # noqa: E402
import bench_attention as bench  # noqa: E402
import peers  # noqa: E402

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("--artifacts", required=True)
p.add_argument("--mask", default="causal",
               help="a seed mask, or gqa (causal with --kv-heads KV heads)")
p.add_argument("--n", type=int, default=32768)
p.add_argument("--peers", default="fa4")
p.add_argument("--kv-heads", type=int, default=8, help="KV heads of --mask gqa")
p.add_argument("--batch", type=int, default=1,
               help="B sequences of --n tokens (the mask's metadata in each)")
p.add_argument("--schedules", default="",
               help="forward only: cmask once per schedule given (grid, persistent, "
                    "persistent+sN: ab_forward's options), not the runtime's choice")
p.add_argument("--backward", action="store_true",
               help="profile forward+backward through autograd (every kernel of the call)")
a = p.parse_args()
schedules = [s for s in a.schedules.split(",") if s]
if schedules and a.backward:
    p.error("--schedules is forward only")
schedule_kw = {s: ab_forward.options("cmask@" + s) for s in schedules}  # persistent+s2, ...
if a.batch < 1 or (a.batch > 1 and a.mask == "gqa"):
    p.error("--batch: at least 1, and 1 with --mask gqa")

if a.mask == "gqa":
    wl = bench.gqa_workload(a.n, a.kv_heads)
elif a.batch > 1:
    wl = bench.batched_workload(a.n, a.batch, a.mask)
else:
    wl = bench.workload(a.mask, a.n)
m = bench.load(a.artifacts, wl.artifact)
x = peers.Inputs(wl, seed=0, train=a.backward)
qt, kt, vt = x.get("blhd")
prepared = m.prepare(q=qt, k=kt, columns=a.backward, **(wl.layout_kwargs | wl.meta))
wl.iv = bench.interval_table(m, prepared, wl.rows)
wl.pairs = bench.visible_pairs(wl.iv)
# The runtime's pick for this batch; with --schedules 128x128, the tile the
# grid and persistent kernels both have (as sustained.py).
tile = "128x128" if schedules else prepared.tile_shape


def call(fn, layout):
    """The profiled closure: fn(q, k, v), or its forward+backward."""
    if a.backward:
        return peers.fwd_bwd(fn, x.leaves(layout), x.dout[layout])
    q, k, v = x.get(layout)
    return lambda: fn(q, k, v)


def cmask_call(**kw):
    return call(lambda q, k, v: m.attention(q, k, v, prepared=prepared, tile_shape=tile, **kw),
                "blhd")


calls = ([(f"cmask@{s}", cmask_call(**schedule_kw[s]), contextlib.nullcontext)
          for s in schedules]
         or [("cmask", cmask_call(), contextlib.nullcontext)])
for peer in peers.PEERS:
    if peer.key in a.peers.split(",") and peer.applies(wl):
        s = peers.setup_if_installed(peer, wl, x, a.backward)
        if s:
            calls.append((peer.key, call(s.fn, peer.layout), s.ctx))
for name, f, ctx in calls:  # warm-up: compilations, autotuning
    with ctx():
        for _ in range(3):
            f()
torch.cuda.synchronize()
torch.cuda.profiler.start()
for name, f, ctx in calls:
    with ctx():  # e.g. the SDPA backend of a peer
        f()
    torch.cuda.synchronize()
torch.cuda.profiler.stop()
print("profiled, in order:", ", ".join(c[0] for c in calls), f"({wl.name} N={a.n}, "
      f"{wl.pairs} visible pairs)")
