#!/usr/bin/env python3
"""A small forward+backward under compute-sanitizer (on the GPU machine):
packed causal sequences of uneven lengths (tiles crossing a sequence's end,
query groups past it: the dQ warp's skipped reductions) and a batch of equal
ones, D = 64 and 128, bf16, GQA 4/2, through the public API. The sanitizer
(synccheck: the named barriers between the consumers and the dQ warp;
memcheck: out-of-range accesses) wraps this process:

    compute-sanitizer --tool synccheck --error-exitcode 3 \\
        python3 scripts/gpu/sanitize_backward.py build-gpu/attention

Prints one line per case; exits 1 when a gradient is not finite. Not
racecheck: it reports a shared store before `bar.arrive` and a load after
`bar.sync` on the same named barrier as a race (the consumers' dQ targets
and the dQ warp's loads of them), even in a two-warp kernel of that
pattern alone whose results are right (docs/performance.md, twenty-fifth
session)."""

import itertools
import sys

import torch

import cmask


def case(mask, lens, dim, kv_heads, heads=4):
    total = sum(lens)
    cu = torch.tensor([0, *itertools.accumulate(lens)], dtype=torch.int32,
                      device="cuda")
    g = torch.Generator(device="cuda").manual_seed(dim + total)

    def rand(h):
        return torch.randn(total, h, dim, device="cuda", dtype=torch.bfloat16,
                           generator=g).requires_grad_()
    q, k, v = rand(heads), rand(kv_heads), rand(kv_heads)
    out = mask.attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu,
                         max_seqlen_q=max(lens), max_seqlen_k=max(lens))
    out.backward(torch.randn_like(out))
    torch.cuda.synchronize()
    ok = all(torch.isfinite(t.grad).all().item() for t in (q, k, v))
    print(f"lens {lens} D={dim} heads {heads}/{kv_heads}: "
          f"{'finite' if ok else 'NOT FINITE'}", flush=True)
    return ok


def main():
    art = sys.argv[1] if len(sys.argv) > 1 else "build-gpu/attention"
    mask = cmask.load(f"{art}/causal")
    ok = True
    for dim in (64, 128):
        ok &= case(mask, [200, 37, 300, 1], dim, 2)
        ok &= case(mask, [256, 256], dim, 4)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
