"""Context-parallel attention (cmask.distributed) on 1..N GPUs of one host:
TFLOP/s per GPU, forward and forward+backward, against cmask on one GPU
with the same tokens per GPU, and (--peer flex) PyTorch's context
parallelism of FlexAttention in the same processes (benchmarks/cp_flex_peer.py).

    python3 benchmarks/bench_context_parallel.py build-gpu/attention \\
        --masks causal,hstu --tokens-per-gpu 32768,65536 --gpus 1,2 [--peer flex]

One process per GPU (NCCL; NVLink multicast off). B=1, H=32 (--kv-heads),
D=128, bf16. Effective TFLOP/s count the visible (query, key) pairs of the
whole batch (the plan's work: every row's slot lengths summed): 4 * pairs
* D * H for the forward, 3.5x that for forward+backward, divided by the
GPUs. Times are CUDA events on rank 0 between barriers, the median of
--iters calls after --warmup. The plan (one preprocess of the whole batch
and one host synchronization) and the ranks' descriptors are built once per
batch and timed apart. Packed HSTU: sequences of lognormal lengths in
32..4096 filling the tokens, context 16, a tenth of each sequence targets.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

HERE = Path(__file__).resolve().parent


def batch(mask: str, total: int, seed: int = 0):
    """(cu_seqlens, max_seqlen, metadata) of a batch of `total` tokens."""
    if mask == "causal":
        return [0, total], total, {}
    rng = np.random.default_rng(seed)
    lens = []
    while sum(lens) < total:
        lens.append(int(np.clip(rng.lognormal(6.5, 1.0), 32, 4096)))
    lens[-1] -= sum(lens) - total
    lens = [n for n in lens if n > 0]
    cu = np.cumsum([0] + lens).tolist()
    return cu, max(lens), {"context": 16, "num_targets": [n // 10 for n in lens]}


def timed(fn, iters, warmup, group=None):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        dist.barrier(group)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    t = torch.tensor([statistics.median(times)], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)  # the slowest rank's
    return float(t.item())


def worker(rank, world, init, args, out_path):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=init, rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    import cmask
    from cmask import distributed as cd
    rows_out = []
    H, Hk, D = args.heads, args.kv_heads, 128
    for name in args.masks.split(","):
        m = cmask.load(Path(args.artifacts) / name)
        for per_gpu in (int(x) for x in args.tokens_per_gpu.split(",")):
            total = per_gpu * world
            cu, max_len, md = batch(name, total)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            plan = cd.plan_batch(m, cu, world, max_seqlen=max_len, **md)
            t1 = time.perf_counter()
            cp = cd.ContextParallel(m, plan, heads=H, kv_heads=Hk, head_dim=D, **md)
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            pairs = sum(plan.work)
            n_local = len(plan.rows(rank))
            g = torch.Generator(device="cuda").manual_seed(rank)
            q = torch.randn(n_local, H, D, device="cuda", dtype=torch.bfloat16, generator=g)
            k = torch.randn(n_local, Hk, D, device="cuda", dtype=torch.bfloat16, generator=g)
            v = torch.randn(n_local, Hk, D, device="cuda", dtype=torch.bfloat16, generator=g)
            dout = torch.randn_like(q)
            qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))

            def fwd():
                with torch.no_grad():
                    cp.attention(q, k, v)

            def fwd_bwd():
                cp.attention(qg, kg, vg).backward(dout)

            flops = 4.0 * pairs * D * H
            row = {"mask": name, "tokens_per_gpu": per_gpu, "gpus": world, "impl": "cmask CP",
                   "plan_ms": (t1 - t0) * 1e3, "descriptors_ms": (t2 - t1) * 1e3,
                   "summary": plan.summary()}
            row["fwd_ms"] = timed(fwd, args.iters, args.warmup)
            row["fwd_bwd_ms"] = timed(fwd_bwd, args.iters, args.warmup)
            row["fwd_tflops"] = flops / row["fwd_ms"] / 1e9 / world
            row["fwd_bwd_tflops"] = 3.5 * flops / row["fwd_bwd_ms"] / 1e9 / world
            rows_out.append(row)
            if world == 1:  # the single-GPU figure: plain attention on the batch
                cu_t = torch.tensor(cu, dtype=torch.int32, device="cuda")
                kw = dict(cu_seqlens_q=cu_t, cu_seqlens_k=cu_t, max_seqlen_q=max_len,
                          max_seqlen_k=max_len)
                p = m.prepare(q=q, k=k, **kw, **md)

                def one_fwd():
                    with torch.no_grad():
                        m.attention(q, k, v, prepared=p)

                def one_fwd_bwd():
                    m.attention(qg, kg, vg, prepared=p).backward(dout)

                one = dict(row, impl="cmask 1 GPU", plan_ms=0.0, descriptors_ms=0.0,
                           summary="")
                one["fwd_ms"] = timed(one_fwd, args.iters, args.warmup)
                one["fwd_bwd_ms"] = timed(one_fwd_bwd, args.iters, args.warmup)
                one["fwd_tflops"] = flops / one["fwd_ms"] / 1e9
                one["fwd_bwd_tflops"] = 3.5 * flops / one["fwd_bwd_ms"] / 1e9
                rows_out.append(one)
            if args.peer == "flex" and world > 1:  # the peer beside CP on several GPUs
                sys.path.insert(0, str(HERE))
                try:
                    from cp_flex_peer import make_flex_cp
                    shard, pf, pfb = make_flex_cp(
                        name, cu, H, Hk, D, None, context=md.get("context", 0),
                        num_targets=md.get("num_targets"))
                    gq = torch.randn(total, H, D, device="cuda", dtype=torch.bfloat16,
                                     generator=torch.Generator(device="cuda").manual_seed(0))
                    gk = torch.randn(total, Hk, D, device="cuda", dtype=torch.bfloat16,
                                     generator=torch.Generator(device="cuda").manual_seed(1))
                    gv = torch.randn_like(gk)
                    sq, sk, sv = shard(gq), shard(gk), shard(gv)
                    sdo = shard(torch.randn_like(gq))
                    del gq, gk, gv
                    tq, tk, tv = (t.detach().clone().requires_grad_() for t in (sq, sk, sv))
                    peer = dict(row, impl="Flex CP (PyTorch)", plan_ms=0.0, descriptors_ms=0.0,
                                summary="")
                    peer["fwd_ms"] = timed(lambda: pf(sq, sk, sv), args.iters, args.warmup)
                    peer["fwd_bwd_ms"] = timed(lambda: pfb(tq, tk, tv, sdo), args.iters,
                                               args.warmup)
                    peer["fwd_tflops"] = flops / peer["fwd_ms"] / 1e9 / world
                    peer["fwd_bwd_tflops"] = 3.5 * flops / peer["fwd_bwd_ms"] / 1e9 / world
                    rows_out.append(peer)
                except Exception as e:  # the peer's failure is reported, not hidden
                    rows_out.append(dict(row, impl="Flex CP (PyTorch)", error=repr(e)[:300]))
            cp = q = k = v = qg = kg = vg = dout = None
            torch.cuda.empty_cache()
    if rank == 0:
        torch.save(rows_out, out_path)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("artifacts", help="folder of artifacts by mask name (build-gpu/attention)")
    ap.add_argument("--masks", default="causal,hstu")
    ap.add_argument("--tokens-per-gpu", default="32768,65536")
    ap.add_argument("--gpus", default="1,2")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=32)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--peer", choices=["none", "flex"], default="none",
                    help="flex: PyTorch's context parallelism of FlexAttention beside cmask's "
                         "on 2+ GPUs (each shape compiles for about a minute)")
    args = ap.parse_args()
    rows = []
    for world in (int(x) for x in args.gpus.split(",")):
        if world > torch.cuda.device_count():
            print(f"skipped: {world} GPUs ({torch.cuda.device_count()} here)", flush=True)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "rows.pt"
            print(f"running on {world} GPU(s)...", flush=True)
            mp.spawn(worker, args=(world, f"file://{tmp}/rv", args, str(out)), nprocs=world)
            rows += torch.load(out)
    single = {(r["mask"], r["tokens_per_gpu"]): r for r in rows if r["impl"] == "cmask 1 GPU"}
    print("\n| mask | tokens/GPU | GPUs | impl | fwd TFLOP/s/GPU | fwd+bwd TFLOP/s/GPU "
          "| fwd / 1 GPU | fwd+bwd / 1 GPU | plan ms | descriptors ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['mask']} | {r['tokens_per_gpu']} | {r['gpus']} | {r['impl']} | "
                  f"failed: {r['error']} | | | | | |")
            continue
        base = single.get((r["mask"], r["tokens_per_gpu"]))
        ratio = (lambda key: f"{r[key] / base[key]:.3f}" if base else "-")
        print(f"| {r['mask']} | {r['tokens_per_gpu']} | {r['gpus']} | {r['impl']} | "
              f"{r['fwd_tflops']:.0f} | {r['fwd_bwd_tflops']:.0f} | {ratio('fwd_tflops')} | "
              f"{ratio('fwd_bwd_tflops')} | {r['plan_ms']:.1f} | {r['descriptors_ms']:.1f} |")
    for r in rows:
        if r.get("summary"):
            print(f"{r['mask']} {r['tokens_per_gpu']} x{r['gpus']}: {r['summary']}")


if __name__ == "__main__":
    main()
