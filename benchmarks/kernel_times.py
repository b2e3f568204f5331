#!/usr/bin/env python3
"""Where one attention call's time goes, kernel by kernel.

For each shape: forward+backward through autograd (Mask.attention with
metadata: the preprocess runs in the forward, rows and columns; or, with
--prepared, on a descriptor Mask.prepare built once outside the calls, as
every layer of a model uses the batch's), or the forward alone with
--forward; CALLS calls under torch.profiler, each kernel's device time per
call (its launches per call beside it), then the wall time per call (CUDA
events, the median of three runs of CALLS back-to-back calls) and the host
time per call (the same calls timed on the CPU behind a spin kernel that
keeps the GPU busy for longer, so that no call waits for the GPU).

    python3 benchmarks/kernel_times.py ARTIFACTS SHAPES [--forward] [--prepared] [--calls N]
    python3 benchmarks/kernel_times.py build-gpu/attention causal:32768,causal_b8,varlen,clear:8192

With --peer fa4 the same is measured for FlashAttention-4 (flash_attn.cute,
causal; flash_attn_varlen_func on packed workloads), installed as
benchmarks/peers.py says, on the same inputs; ARTIFACTS is then unused.

ARTIFACTS is a directory of <mask>/ artifacts (scripts/gpu/prepare_attention.sh);
SHAPES as benchmarks/ab_forward.py takes them (mask[:N[:tile[:B]]]; the
tile is ignored: the runtime chooses).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

import cmask

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_forward  # noqa: E402
import peers  # noqa: E402


def shape_workload(shape: str):
    parts = shape.split(":")
    n = int(parts[1]) if len(parts) > 1 and parts[1] else 32768
    return ab_forward.workload(parts[0], n, int(parts[3]) if len(parts) > 3 else None)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("artifacts")
    p.add_argument("shapes")
    p.add_argument("--forward", action="store_true", help="the forward alone")
    p.add_argument("--prepared", action="store_true",
                   help="on a descriptor prepared once (Mask.prepare)")
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--peer", choices=["fa4"], help="time this peer instead of cmask")
    a = p.parse_args()
    # Spin-kernel cycles per ms (torch.cuda._sleep), to keep the GPU busy
    # while the host time is measured.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    end.synchronize()
    cycles_per_ms = 10_000_000 / start.elapsed_time(end)
    for shape in a.shapes.split(","):
        wl = shape_workload(shape)
        x = peers.Inputs(wl, seed=0, train=not a.forward)
        if a.peer:
            if wl.artifact != "causal" and not wl.packed:
                sys.exit(f"kernel_times: --peer fa4 runs causal masks (or varlen causal on "
                         f"packed workloads); {shape} is neither")
            fn = peers._fa4_setup(wl, x, not a.forward).fn
        else:
            m = cmask.load(Path(a.artifacts) / wl.artifact)
            kw = wl.layout_kwargs | wl.meta
            if a.prepared:
                q, k, _ = x.get("blhd")
                kw = dict(prepared=m.prepare(q=q, k=k, columns=not a.forward, **kw))
            fn = lambda *t, kw=kw, m=m: m.attention(*t, **kw)  # noqa: E731
        if a.forward:
            q, k, v = x.get("blhd")
            call = lambda: fn(q, k, v)  # noqa: E731
        else:
            call = peers.fwd_bwd(fn, x.leaves("blhd"), x.dout["blhd"])
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        walls = []
        for _ in range(3):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(a.calls):
                call()
            end.record()
            torch.cuda.synchronize()
            walls.append(start.elapsed_time(end) / a.calls)
        torch.cuda._sleep(int(cycles_per_ms * max(50.0, 4 * a.calls * statistics.median(walls))))
        t0 = time.perf_counter()
        for _ in range(a.calls):
            call()
        host_ms = (time.perf_counter() - t0) / a.calls * 1e3
        busy = not torch.cuda.current_stream().query()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(a.calls):
                call()
            torch.cuda.synchronize()
        rows = sorted(((e.device_time_total / a.calls, e.count / a.calls, e.key)
                       for e in prof.key_averages() if e.device_time_total > 0), reverse=True)
        total = sum(r[0] for r in rows)
        what = ("forward" if a.forward else "forward+backward") + \
            (", prepared" if a.prepared and not a.peer else "") + \
            (f", {a.peer}" if a.peer else "")
        print(f"== {shape} ({wl.name}, N={wl.N}, B={wl.B}) {what}: wall "
              f"{statistics.median(walls):.3f} ms per call, host {host_ms:.3f} ms per call"
              f"{'' if busy else ' (the GPU went idle: host time includes waits)'}, "
              f"kernels {total / 1e3:.3f} ms per call")
        for us, launches, key in rows:
            print(f"  {us:10.1f} us {100 * us / total:5.1f}%  x{launches:g}  {key[:100]}")
        del x, call
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
