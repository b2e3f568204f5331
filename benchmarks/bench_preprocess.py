#!/usr/bin/env python3
"""Times the descriptor build on the GPU: cmask's preprocess (all phases,
one 128x128 tile shape, CUDA events, median of 50 after warm-up) against
FlexAttention's create_block_mask for the same mask (B=1, H=None, 128x128
blocks, median of 5 after one warm-up, synchronized wall clock), in one run.
Two cmask descriptors: forward (row direction) and training (rows and the
column direction for the backward pass, 128x128 key x query tiles); a
BlockMask serves both passes, so the ratio is taken against the training
descriptor. Each is timed with eager launches (GPU time between CUDA events;
the GPU waits for the host's launches) and replayed from a CUDA graph (the
GPU's own time); `host` is the host time of one eager preprocess call. The
sequences' q and k lengths are equal and passed in one cu_seqlens buffer, as
self-attention does: a symmetric spec's (CLEAR's) column descriptor is then a
copy of its rows'.

    python3 benchmarks/bench_preprocess.py [--cases build-gpu/bench] [--bin build-rt]

Prints a markdown table; writes it to $OUT/preprocess.md when OUT is set.
"""

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

import torch
from torch.nn.attention.flex_attention import create_block_mask


def mask_mod_for(name, batch, dev):
    md = batch["metadata"]
    n = batch["sequences"][0]["q_len"]
    if name == "causal":
        return lambda b, h, q, kv: kv <= q
    if name == "sliding_window":
        w = md["window"]
        return lambda b, h, q, kv: (q - kv >= 0) & (q - kv <= w)
    if name in ("document", "causal_document", "reward_model"):
        bounds = md["docs"][0] if name != "reward_model" else md["responses"][0]
        seg = torch.searchsorted(torch.tensor(bounds, device=dev),
                                 torch.arange(n, device=dev), right=True)
        if name == "document":
            return lambda b, h, q, kv: seg[q] == seg[kv]
        if name == "causal_document":
            return lambda b, h, q, kv: (seg[q] == seg[kv]) & (kv <= q)
        p = md["prompt_len"][0]
        return lambda b, h, q, kv: torch.where(
            q < p, kv <= q, (kv < p) | ((seg[q] == seg[kv]) & (kv <= q)))
    if name == "prefix_lm":
        p = md["prefix_len"][0]
        return lambda b, h, q, kv: (kv < p) | (kv <= q)
    if name == "hstu":
        c, he = md["context"], n - md["num_targets"][0]
        return lambda b, h, q, kv: torch.where(
            q < c, kv < he, torch.where(q < he, kv <= q, (kv < he) | (kv == q)))
    if name == "clear":
        t, w, r = md["text_len"], md["width"], md["radius"]
        hh = md["height"]

        def mod(b, h, q, kv):
            qy, qx = (q - t) // w, (q - t) % w
            ky, kx = (kv - t) // w, (kv - t) % w
            dy, dx = ky - qy, kx - qx
            img = (kv >= t) & (ky < hh) & (dy * dy + dx * dx <= r * r) & (dy.abs() <= 16)
            return (q < t) | (kv < t) | img
        return mod
    raise ValueError(name)


def time_flex(name, batch):
    dev = "cuda"
    n = batch["sequences"][0]["q_len"]
    mod = mask_mod_for(name, batch, dev)
    create_block_mask(mod, 1, None, n, n, device=dev, BLOCK_SIZE=128)
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        create_block_mask(mod, 1, None, n, n, device=dev, BLOCK_SIZE=128)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="build-gpu/bench")
    ap.add_argument("--bin", default="build-rt")
    ap.add_argument("--masks", default="")
    args = ap.parse_args()
    rows = ["| mask | tokens | forward (us) | forward, graph (us) | training (us) | "
            "training, graph (us) | training, host (us) | Flex create_block_mask (ms) "
            "| Flex / cmask training |",
            "|---|---|---|---|---|---|---|---|---|"]
    masks = args.masks.split(",") if args.masks else sorted(os.listdir(args.cases))
    for name in masks:
        d = Path(args.cases) / name
        out = subprocess.run([f"{args.bin}/cmask-preprocess-bench", d / "artifact",
                              d / "cases.json", "--iters", "50"],
                             check=True, capture_output=True, text=True).stdout.split("\n")
        ours = [dict(kv.split("=") for kv in line.split()) for line in out if line]
        batches = json.loads((d / "cases.json").read_text())
        for batch, o in zip(batches, ours):
            flex = time_flex(name, batch)
            train = float(o["train_median_us"])
            rows.append(f"| {name} | {o['tokens']} | {float(o['median_us']):.1f} | "
                        f"{float(o['graph_us']):.1f} | {train:.1f} | "
                        f"{float(o['train_graph_us']):.1f} | "
                        f"{float(o['train_host_us']):.1f} | {flex:.2f} | "
                        f"{flex * 1e3 / train:.0f}x |")
            print(rows[-1], flush=True)
    table = "\n".join(rows)
    print("\n" + table)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "preprocess.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
