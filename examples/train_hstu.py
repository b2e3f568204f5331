#!/usr/bin/env python3
"""Train a small GQA transformer with the HSTU mask over packed variable-length
sequences, once with cmask, once with FlexAttention (Triton kernels), once
with FlexAttention's FlashAttention-4 backend (kernel_options={"BACKEND":
"FLASH"}; needs flash_attn.cute) and once with NVIDIA's cudnn.flex_attention
(a mask plan over per-row interval endpoints; needs the cuDNN frontend):
the peers as scripts/gpu/fetch-peers.sh installs them on the H200
(docs/performance.md, Training).

Same seed, same synthetic data (sequences drawn from a fixed random Markov
chain, so the loss can fall), same model: 4 layers, d_model 512, 8 query
heads / 2 key-value heads of 64 (a Qwen-like GQA shape scaled down), RMSNorm,
SwiGLU, learned positions inside each sequence. Each step packs sequences of
128-1024 tokens into --tokens tokens (a fixed total, so that Flex compiles
once; the boundaries change every step); HSTU metadata: context 8,
num_targets ~1/8 of each sequence. Logs the loss every --log steps and
tokens per second (steps 5.. timed end to end: the per-batch mask work, i.e.
cmask's Mask.prepare, one descriptor per batch that every layer's forward
and backward read, and Flex's create_block_mask, forward, backward,
optimizer), writes train.json and train.png to --out. Both Flex
backends rebuild their BlockMask every step (create_block_mask, timed), and
cuDNN flex its mask plan (the HSTU rule's endpoints computed on the GPU,
then create_mask_plan with the backward's payloads), as a user must when
the boundaries change.

    python3 examples/train_hstu.py --artifact build-gpu/attention/hstu --out $OUT \
        [--backends cmask,flex,flex_fa4,cudnn_flex]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

p = argparse.ArgumentParser()
p.add_argument("--artifact", required=True, help="the HSTU artifact (cmask-translate --cmask-to-artifact)")
p.add_argument("--out", default=".")
p.add_argument("--steps", type=int, default=300)
p.add_argument("--log", type=int, default=10)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--tokens", type=int, default=8192, help="tokens per step (packed)")
p.add_argument("--backends", default="cmask,flex,flex_fa4,cudnn_flex",
               help="comma-separated: cmask, flex (Triton), flex_fa4 (BACKEND=FLASH), "
                    "cudnn_flex (cudnn.flex_attention)")
a = p.parse_args()
BACKENDS = a.backends.split(",")
for name in BACKENDS:
    if name not in ("cmask", "flex", "flex_fa4", "cudnn_flex"):
        p.error(f"--backends: unknown backend {name!r} (cmask, flex, flex_fa4, cudnn_flex)")
if "cmask" not in BACKENDS:
    p.error("--backends: cmask is the reference the losses are compared with")
if "flex_fa4" in BACKENDS:
    try:
        import flash_attn.cute  # noqa: F401
    except ImportError as e:
        print(f"flex_fa4 skipped: FlexAttention's FLASH backend needs flash_attn.cute ({e})")
        BACKENDS.remove("flex_fa4")
if "cudnn_flex" in BACKENDS:
    try:
        from cudnn.flex_attention import create_mask_plan, flex_attn_func
    except ImportError as e:
        print(f"cudnn_flex skipped: it needs the cuDNN frontend's flex_attention ({e})")
        BACKENDS.remove("cudnn_flex")

DEV = torch.device("cuda")
VOCAB, D_MODEL, LAYERS, HEADS, KV_HEADS, HEAD_DIM, MAX_LEN = 512, 512, 4, 8, 2, 64, 1024
CONTEXT = 8


def batches(seed: int, steps: int):
    """The same packed batches for both runs: tokens, cu_seqlens, positions,
    per-sequence targets."""
    g = torch.Generator().manual_seed(seed)
    # A sparse random Markov chain: each token has 4 likely successors.
    succ = torch.randint(0, VOCAB, (VOCAB, 4), generator=g)
    for _ in range(steps):
        lens = []
        while sum(lens) < a.tokens:
            left = a.tokens - sum(lens)
            L = int(torch.randint(128, MAX_LEN + 1, (1,), generator=g))
            if left - L < 128:  # no remainder shorter than 128
                L = left if left <= MAX_LEN else left - 128
            lens.append(L)
        toks, pos = [], []
        for L in lens:
            t = [int(torch.randint(0, VOCAB, (1,), generator=g))]
            choice = torch.randint(0, 4, (L,), generator=g)
            for i in range(1, L):
                t.append(int(succ[t[-1], choice[i]]))
            toks.append(torch.tensor(t))
            pos.append(torch.arange(L))
        cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32)
        targets = [max(1, L // 8) for L in lens]
        yield torch.cat(toks), cu, torch.cat(pos), targets, lens


class RMSNorm(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * self.w


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = RMSNorm(D_MODEL), RMSNorm(D_MODEL)
        self.q = torch.nn.Linear(D_MODEL, HEADS * HEAD_DIM, bias=False)
        self.kv = torch.nn.Linear(D_MODEL, 2 * KV_HEADS * HEAD_DIM, bias=False)
        self.o = torch.nn.Linear(HEADS * HEAD_DIM, D_MODEL, bias=False)
        self.up = torch.nn.Linear(D_MODEL, 2 * 4 * D_MODEL, bias=False)
        self.down = torch.nn.Linear(4 * D_MODEL, D_MODEL, bias=False)

    def forward(self, x, attend):
        h = self.n1(x)
        q = self.q(h).view(-1, HEADS, HEAD_DIM)
        k, v = self.kv(h).view(-1, 2, KV_HEADS, HEAD_DIM).unbind(1)
        x = x + self.o(attend(q, k.contiguous(), v.contiguous()).reshape(-1, HEADS * HEAD_DIM))
        gate, up = self.up(self.n2(x)).chunk(2, -1)
        return x + self.down(F.silu(gate) * up)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, D_MODEL)
        self.pos = torch.nn.Embedding(MAX_LEN, D_MODEL)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = RMSNorm(D_MODEL)
        self.head = torch.nn.Linear(D_MODEL, VOCAB, bias=False)

    def forward(self, tokens, pos, attend):
        x = self.emb(tokens) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x, attend)
        return self.head(self.norm(x))


def hstu_visible(i, j, L, T):
    """The HSTU rule on positions relative to their sequence (masks/hstu.mlir)."""
    hist_end = L - T
    ctx = (i < CONTEXT) & (j < hist_end)
    hist = (i >= CONTEXT) & (i < hist_end) & ((j < CONTEXT) | (j <= i))
    target = (i >= hist_end) & ((j < hist_end) | (j == i))
    return ctx | hist | target


def hstu_endpoints(cu, lens, targets):
    """The HSTU rule as cuDNN flex's endpoints (int32 [1, 3, total]): row i of a
    sequence sees keys [0, F0) U [F1, F2) of its own sequence. Context rows
    see the history [0, L - T); history rows [0, i + 1); target rows the
    history and themselves."""
    i64 = dict(dtype=torch.int64, device=DEV)
    doc = torch.repeat_interleave(torch.arange(len(lens), **i64), torch.tensor(lens, device=DEV))
    row = torch.arange(int(cu[-1]), **i64) - cu.to(DEV, torch.int64)[doc]
    hist_end = (torch.tensor(lens, **i64) - torch.tensor(targets, **i64))[doc]
    f0 = torch.where((row >= CONTEXT) & (row < hist_end), row + 1, hist_end)
    target = row >= hist_end
    f1, f2 = torch.where(target, row, f0), torch.where(target, row + 1, f0)
    return torch.stack([f0, f1, f2])[None].to(torch.int32).contiguous()


def run(backend: str):
    torch.manual_seed(a.seed)
    model = Model().to(DEV, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0)
    if backend == "cmask":
        import cmask
        mask = cmask.load(a.artifact)
    elif backend == "cudnn_flex":
        pass
    else:
        flex = torch.compile(flex_attention, dynamic=False)
        opts = {"kernel_options": {"BACKEND": "FLASH"}} if backend == "flex_fa4" else {}
    losses, tokens, seconds = [], 0, 0.0
    for step, (tok, cu, pos, targets, lens) in enumerate(DATA):
        torch.cuda.synchronize()
        t0 = time.time()
        tok, pos, cu_d = tok.to(DEV), pos.to(DEV), cu.to(DEV)
        total = int(cu[-1])
        if backend == "cmask":
            # The batch's descriptor, built once; every layer's forward and
            # backward read it.
            prepared = mask.prepare(q=(total, HEADS, HEAD_DIM), k=(total, KV_HEADS, HEAD_DIM),
                                    cu_seqlens_q=cu_d, cu_seqlens_k=cu_d,
                                    max_seqlen_q=max(lens), max_seqlen_k=max(lens),
                                    context=CONTEXT, num_targets=targets)

            def attend(q, k, v):
                return mask.attention(q, k, v, prepared=prepared)
        elif backend == "cudnn_flex":
            # The batch's plan (q, k, v only give the geometry), every layer's.
            bf16 = dict(dtype=torch.bfloat16, device=DEV)
            plan = create_mask_plan(
                hstu_endpoints(cu, lens, targets), torch.empty(total, HEADS, HEAD_DIM, **bf16),
                torch.empty(total, KV_HEADS, HEAD_DIM, **bf16),
                torch.empty(total, KV_HEADS, HEAD_DIM, **bf16), cu_seqlens_q=cu_d,
                cu_seqlens_k=cu_d, max_seqlen_q=max(lens), max_seqlen_k=max(lens),
                build_backward=True)

            def attend(q, k, v):
                return flex_attn_func(q, k, v, mask_plan=plan)
        else:
            # Per-sequence tables padded to the most sequences a step can
            # hold, so that their shapes (which Flex compiles for) never change.
            # int32 tables: the FLASH backend's mask_mods take int32 only.
            pad = [0] * (a.tokens // 128 - len(lens))
            i32 = dict(dtype=torch.int32, device=DEV)
            doc = torch.repeat_interleave(torch.arange(len(lens), **i32),
                                          torch.tensor(lens, device=DEV))
            start = torch.tensor(cu[:-1].tolist() + pad, **i32)
            length = torch.tensor(lens + pad, **i32)
            tgt = torch.tensor(targets + pad, **i32)

            def mask_mod(b, h, qi, ki):
                same = doc[qi] == doc[ki]
                d = doc[qi]
                return same & hstu_visible(qi - start[d], ki - start[d], length[d], tgt[d])
            block = create_block_mask(mask_mod, 1, None, total, total, device="cuda",
                                      BLOCK_SIZE=128)

            def attend(q, k, v):
                o = flex(q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                         v.transpose(0, 1)[None], block_mask=block, enable_gqa=True,
                         **opts)
                return o[0].transpose(0, 1)
        logits = model(tok, pos, attend)
        # Next token inside each sequence (the last token of a sequence has none).
        last = torch.zeros(total, dtype=torch.bool, device=DEV)
        last[(cu_d[1:] - 1).long()] = True
        loss = F.cross_entropy(logits[:-1][~last[:-1]].float(), tok[1:][~last[:-1]])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if step >= 5:  # warm-up (compilation) excluded
            seconds += time.time() - t0
            tokens += total
        if step % a.log == 0 or step == a.steps - 1:
            losses.append((step, loss.item()))
            print(f"{backend} step {step:4d} loss {loss.item():.4f}", flush=True)
    return losses, tokens / max(seconds, 1e-9)


DATA = list(batches(a.seed, a.steps))
print(f"{a.steps} steps of {a.tokens} tokens, "
      f"{sum(len(d[4]) for d in DATA) / len(DATA):.1f} sequences per step", flush=True)
results = {}
for backend in BACKENDS:
    losses, tps = run(backend)
    results[backend] = {"losses": losses, "tokens_per_s": tps}
    print(f"{backend}: {tps:,.0f} tokens/s", flush=True)
for peer in [b for b in BACKENDS if b != "cmask"]:
    worst = max(abs(c[1] - f[1]) / f[1] for c, f in zip(results["cmask"]["losses"],
                                                          results[peer]["losses"]) if c[0] > 50)
    results[f"max_relative_loss_difference_after_step_50_{peer}"] = worst
    print(f"largest relative loss difference from {peer} after step 50: {worst:.2%} (bound 2%)")
    print(f"tokens/s cmask / {peer}: "
          f"{results['cmask']['tokens_per_s'] / results[peer]['tokens_per_s']:.2f}x")
out = Path(a.out)
out.mkdir(parents=True, exist_ok=True)
(out / "train.json").write_text(json.dumps(results, indent=1))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for backend in BACKENDS:
        steps, values = zip(*results[backend]["losses"])
        ax.plot(steps, values, label=f"{backend} ({results[backend]['tokens_per_s']:,.0f} tok/s)")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title("HSTU mask, packed varlen, GQA 8/2, D=64")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "train.png", dpi=110)
except ImportError:
    print("matplotlib missing: no plot")
