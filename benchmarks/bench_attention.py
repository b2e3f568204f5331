#!/usr/bin/env python3
"""Attention forward and forward+backward: cmask against the peers an informed
user picks on an H200, one process (benchmarks/peers.py has the peer table):
FlexAttention with Triton ("Flex") and with FlashAttention-4 as its backend
("Flex-FA4"), cuDNN's flex attention fed the endpoints of cmask's own interval
table ("cuDNN flex"), FlashAttention-4 itself ("FA4": causal only) and SDPA's
cuDNN and flash (FA2) backends (causal only). A peer that is missing or
refuses a shape is recorded as {"error": ...} and the run goes on.

H=32, D=128, bf16 (DESIGN.md's benchmark shapes). The masks (--masks, B=1):
causal, HSTU (targets N/8, no context), shared-prompt RM (prompt N/4, 4 equal
responses) and CLEAR (T=512 text tokens + an H x W grid, W the power of two at
or above sqrt(N), H = N / W, radius 16) at N = 1K ... 32K; `--masks
interleaved` adds test/gpu/Inputs/interleaved.mlir, a spec without a column
direction (its backward masks with the row intervals). Then three shapes,
each on by default and one row (or one per --gqa-lengths):
  --gqa      causal_gqa: causal with 32 query / --kv-heads 8 key-value heads
  --batched  causal_b8: causal, --batch 8 sequences of --batched-lengths 4096
             (--batched-masks causal,hstu: also hstu_b8; a comma list of lengths)
  --varlen   hstu_varlen: HSTU over --varlen-seqs 30 packed sequences, --varlen-tokens
             32768 in all, lengths lognormal in [32, 4096] (peers.varlen_lengths,
             seed --varlen-seed), each with num_targets = its length // 8, context 0;
             packed [total, H, D] with cu_seqlens. FA4 runs flash_attn_varlen_func
             causal there, a different mask ("FA4 varlen causal", its TFLOP/s over its
             own causal pairs); Flex's mask_mod looks the document up in int32
             tables (doc[token], hist_end[doc]).

The preprocess (cmask's descriptor), Flex's create_block_mask and cuDNN's
create_mask_plan are timed apart from the attention. Effective TFLOP/s count
visible pairs only (4 * D * H * pairs / t forward, 3.5x that forward+backward;
the pairs are summed from cmask's interval table). Each time is the median of
--rounds interleaved rounds (peers.time_rounds: cmask and every peer of a
row timed once per round, each round from the next one on, so that the GPU's
clock drift falls on all alike), each the median of --iters CUDA-event
timings (with --sample-ms T, of as many calls as last about T ms, where
that is more) after two warm-up calls (the first calls, outside the rounds, hold
the JIT compilations of the CuTe kernels and torch.compile); every forward is checked
first against fp32 math attention on sampled rows, and cmask's gradients
(dq, dk, dv) against every peer's that computes the same mask.

forward+backward is out = attention(q, k, v); out.backward(dout) through
autograd. For cmask on the batch's descriptor (Mask.prepare, rows and
columns, built once outside as the BlockMasks and mask plans are; its time
is the preprocess column); "with its preprocess" is the call with metadata,
which builds the descriptor in its forward.

    python3 benchmarks/bench_attention.py --artifacts build-gpu/attention --out $OUT

Prints markdown tables and writes attention.json and attention.png to --out
(--tag NAME: NAME.json and NAME.png, for runs that share an --out). Each
call's line also gives the median SM clock that nvidia-smi sampled (every
50 ms) during its timed samples (@MHz; none where no sample fell in them;
--no-clocks: no sampling), so that a ratio can be read as cycles or as
clocks (benchmarks/sustained.py times them back to back, with power).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import math
import time
from pathlib import Path

import torch

import cmask
import peers  # benchmarks/peers.py, beside this script
from peers import D, H, LABELS, PEERS, Inputs, Workload

T_TEXT, RADIUS = 512, 16
DEV = torch.device("cuda")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--artifacts", required=True, help="directory of <mask>/ artifacts")
    p.add_argument("--out", default=".")
    p.add_argument("--no-clocks", action="store_true",
                   help="no nvidia-smi sampling of the SM clock during the rounds")
    p.add_argument("--tag", default="attention",
                   help="the name of the JSON and plot files written to --out")
    p.add_argument("--lengths", default="1024,2048,4096,8192,16384,32768")
    p.add_argument("--masks", default="causal,hstu,reward_model,clear",
                   help="comma-separated, B=1 MHA; '' for none")
    p.add_argument("--peers", default=",".join(pp.key for pp in PEERS),
                   help="comma-separated subset of " + ", ".join(pp.key for pp in PEERS))
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--rounds", type=int, default=5,
                   help="interleaved rounds of --iters calls each (peers.time_rounds): "
                        "every time is the median of its rounds")
    p.add_argument("--sample-ms", type=float, default=0,
                   help="each timed sample at least this long: more than --iters calls "
                        "where a call is short (peers.time_rounds; e.g. 1000: every call "
                        "in the power state it sets itself); 0: --iters calls")
    p.add_argument("--baseline", metavar="DIR",
                   help="also time the forward of the artifacts in DIR (another build "
                        "of cmask, e.g. the previous commit's) as 'cmask-base'")
    p.add_argument("--no-flex", action="store_true", help="without Flex and Flex-FA4")
    p.add_argument("--no-backward", action="store_true", help="forward only")
    p.add_argument("--deterministic", action="store_true",
                   help="also time cmask's forward+backward with deterministic=True (dq by the "
                        "row pass) and check its gradients against the default's")
    p.add_argument("--gqa", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--gqa-lengths", default="32768")
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--batched", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--batched-lengths", default="4096")
    p.add_argument("--batched-masks", default="causal")
    p.add_argument("--varlen", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--varlen-tokens", type=int, default=32768)
    p.add_argument("--varlen-seqs", type=int, default=30)
    p.add_argument("--varlen-seed", type=int, default=0)
    p.add_argument("--varlen-kv-heads", default="",
                   help="also the packed workload with these key/value heads, comma-separated "
                        "(e.g. 8: GQA 32/8, which cmask packs into its tiles' rows)")
    a = p.parse_args()
    if a.rounds < 1 or a.iters < 1:
        p.error("--rounds and --iters must be at least 1")
    if a.sample_ms < 0:
        p.error("--sample-ms must be at least 0")
    if not a.tag or "/" in a.tag or a.tag in (".", ".."):
        p.error(f"--tag {a.tag!r}: a file name without a directory (e.g. attention-clear)")
    return a


# ---------------------------------------------------------------- workloads

def workload(mask, n) -> Workload:
    """A B=1 MHA row of one of the masks at N = n."""
    if mask == "causal":
        return Workload(mask, mask, n, n, lambda b, h, q, k: k <= q, causal=True)
    if mask == "hstu":
        nh = n - n // 8
        return Workload(mask, mask, n, n, lambda b, h, q, k: (
            ((q < nh) & (k <= q)) | ((q >= nh) & ((k < nh) | (k == q)))),
            meta={"context": 0, "num_targets": [n // 8]})
    if mask == "reward_model":
        return reward_model(n)
    if mask == "clear":
        return clear(n)
    if mask == "interleaved":  # test/gpu/Inputs: no column direction (row intervals)
        return Workload(mask, mask, n, n, lambda b, h, q, k: torch.where(
            q % 2 == 0, k <= q, (k < 16) | ((q - k >= 0) & (q - k <= 96))),
            mm_fa4=lambda b, h, q, k: ((q % 2 == 0) & (k <= q)) | (
                (q % 2 == 1) & ((k < 16) | ((q - k >= 0) & (q - k <= 96)))))
    raise ValueError(mask)


def reward_model(n) -> Workload:
    """Prompt N/4, then 4 equal responses; each sees the prompt and itself causally."""
    P = n // 4
    starts = [P + (n - P) * r // 4 for r in range(4)]

    def seg(x):  # the response a position is in (0: the prompt)
        return sum((x >= s).int() for s in starts)

    def rm(own):
        return lambda b, h, q, k: ((q < P) & (k <= q)) | (
            (q >= P) & ((k < P) | (own(q, k) & (k <= q))))

    def same_fa4(q, k):  # the same response without int arithmetic: no start between
        same = (q >= starts[0]) == (k >= starts[0])
        for s in starts[1:]:
            same = same & ((q >= s) == (k >= s))
        return same
    return Workload("reward_model", "reward_model", n, n, rm(lambda q, k: seg(q) == seg(k)),
                    mm_fa4=rm(same_fa4), meta={"prompt_len": [P], "responses": [starts]})


def clear(n) -> Workload:
    """T_TEXT text tokens that see and are seen by all, then an Hg x W grid
    whose tokens see those within RADIUS."""
    W = 1 << math.ceil(math.log2(math.sqrt(n)))
    Hg = n // W
    # Flex-FA4: grid coordinates of q + c - T_TEXT, c a multiple of W >= T_TEXT,
    # so that // and % see no negative operand (the text rows' values are unused).
    c = -(-T_TEXT // W) * W

    def mm(off):
        def f(b, h, q, k):
            qy, qx = (q + off) // W, (q + off) % W
            ky, kx = (k + off) // W, (k + off) % W
            near = (qy - ky) * (qy - ky) + (qx - kx) * (qx - kx) <= RADIUS * RADIUS
            return (q < T_TEXT) | (k < T_TEXT) | near
        return f
    return Workload("clear", "clear", n, T_TEXT + n, mm(-T_TEXT), mm_fa4=mm(c - T_TEXT),
                    meta={"text_len": T_TEXT, "height": Hg, "width": W, "radius": RADIUS})


def gqa_workload(n, kv_heads) -> Workload:
    return Workload("causal_gqa", "causal", n, n, lambda b, h, q, k: k <= q,
                    Hkv=kv_heads, causal=True)


def batched_workload(n, batch, mask="causal") -> Workload:
    """`batch` sequences of n tokens under one of the masks (the same
    metadata in each)."""
    wl = workload(mask, n)
    wl.name, wl.B = f"{mask}_b{batch}", batch
    wl.meta = {k: v * batch if isinstance(v, list) else v for k, v in wl.meta.items()}
    return wl


def varlen_workload(total, nseq, seed) -> Workload:
    """Packed HSTU: int32 tables doc[token] and hist_end[doc] (the absolute
    end of the document's history: its start + length - num_targets)."""
    lens = peers.varlen_lengths(total, nseq, seed)
    cu_host = [0]
    for n in lens:
        cu_host.append(cu_host[-1] + n)
    i32 = dict(dtype=torch.int32, device=DEV)
    targets = torch.tensor([n // 8 for n in lens], **i32)
    doc = torch.repeat_interleave(torch.arange(nseq, **i32), torch.tensor(lens, device=DEV))
    hist_end = torch.tensor([cu_host[d] + lens[d] - lens[d] // 8 for d in range(nseq)], **i32)

    def mm(b, h, q, k):
        d = doc[q]
        e = hist_end[d]
        return (d == doc[k]) & (((q < e) & (k <= q)) | ((q >= e) & ((k < e) | (k == q))))
    return Workload("hstu_varlen", "hstu", total, total, mm, cu=torch.tensor(cu_host, **i32),
                    lens=lens, doc=doc, meta={"context": 0, "num_targets": targets})


def ints(csv):
    return [int(x) for x in csv.split(",") if x]


def workloads(a):
    for mask in filter(None, a.masks.split(",")):
        for n in ints(a.lengths):
            yield workload(mask, n)
    if a.gqa:
        for n in ints(a.gqa_lengths):
            yield gqa_workload(n, a.kv_heads)
    if a.batched:
        for mask in filter(None, a.batched_masks.split(",")):
            for n in ints(a.batched_lengths):
                yield batched_workload(n, a.batch, mask)
    if a.varlen:
        yield varlen_workload(a.varlen_tokens, a.varlen_seqs, a.varlen_seed)
        for kv in ints(a.varlen_kv_heads):
            wl = varlen_workload(a.varlen_tokens, a.varlen_seqs, a.varlen_seed)
            wl.Hkv = kv
            yield wl


# ---------------------------------------------------------------- cmask

def interval_table(m, prepared, rows):
    """The row descriptor's intervals (int32 [rows, K, 2], K slots (lo, hi) per
    row, relative to the sequence's keys), copied out of cmask's buffer."""
    ptr = cmask._capi.lib().cmask_descriptor_intervals(prepared.descriptor, 0)
    K = m.manifest["num_slots"]
    host = torch.empty(rows * K * 2, dtype=torch.int32)
    torch.cuda.synchronize()
    cuda = ctypes.CDLL("libcuda.so.1")
    assert cuda.cuMemcpyDtoH_v2(ctypes.c_void_p(host.data_ptr()), ctypes.c_uint64(ptr),
                                ctypes.c_size_t(host.numel() * 4)) == 0
    return host.view(rows, K, 2).to(DEV)


def visible_pairs(iv):
    """Sum of the interval lengths (a row's slots are disjoint)."""
    return int((iv[..., 1].long() - iv[..., 0].long()).clamp(min=0).sum())


def run_cmask(m, wl: Workload, x: Inputs, res, a, fwd, train):
    """Preprocess, the interval table and pairs (into wl), the forward per tile
    shape checked, forward+backward run once (its gradients stay on the leaves
    it returns; None forward only); the timed calls into `fwd` and `train`
    (peers.time_rounds' dicts), timed with the peers' (run_workload)."""
    qt, kt, vt = x.get("blhd")
    kw = wl.layout_kwargs | wl.meta
    cin = None
    prep = lambda: m.prepare(q=qt, k=kt, columns=not a.no_backward, **kw)  # noqa: E731
    prepared = prep()
    res["preprocess_ms"] = peers.timeit(prep, a.iters)
    if not a.no_backward:
        cin = x.leaves("blhd")
        step = peers.fwd_bwd(lambda *t: m.attention(*t, prepared=prepared), cin,
                             x.dout["blhd"])
        step()  # the gradients the peers' are compared with
        plain = peers.fwd_bwd(lambda *t: m.attention(*t, **kw), x.leaves("blhd"),
                              x.dout["blhd"])
    wl.iv = interval_table(m, prepared, wl.rows)
    wl.pairs = res["pairs"] = visible_pairs(wl.iv)
    for tile in m.tile_shapes:
        f = lambda tile=tile: m.attention(qt, kt, vt, prepared=prepared, tile_shape=tile)  # noqa: E731
        res[f"cmask_{tile}"] = {"err": peers.sample_check(f(), "blhd", x, wl.mm),
                                "flops": 4 * D * H * wl.pairs}
        fwd[f"cmask_{tile}"] = (f, contextlib.nullcontext)
    # The tile a call without tile_shape= uses on this batch (the runtime's
    # choice), timed with that tile named.
    res["cmask_tile"] = prepared.tile_shape
    if cin is None:
        return None
    res["cmask_train"] = {"flops": 4 * D * H * wl.pairs}
    train["cmask_train"] = (step, contextlib.nullcontext)
    res["cmask_plain"] = {"flops": 4 * D * H * wl.pairs}
    train["cmask_plain"] = (plain, contextlib.nullcontext)
    if a.deterministic:
        din = x.leaves("blhd")
        det = peers.fwd_bwd(lambda *t: m.attention(*t, deterministic=True, **kw),
                            din, x.dout["blhd"])
        det()
        res["cmask_det_grad_err_vs_default"] = peers.grads_rel(din, "blhd", cin, "blhd",
                                                              x.packed)
        res["cmask_det"] = {"flops": 4 * D * H * wl.pairs}
        train["cmask_det"] = (det, contextlib.nullcontext)
    return cin


_MASKS = {}


def load(directory, artifact):
    key = (directory, artifact)
    if key not in _MASKS:
        _MASKS[key] = cmask.load(Path(directory) / artifact)
    return _MASKS[key]


def run_baseline(m, wl: Workload, x: Inputs, res, a, fwd):
    """The forward of another build's artifact (--baseline), the tile the runtime picks for the batch."""
    qt, kt, vt = x.get("blhd")
    prepared = m.prepare(q=qt, k=kt, **(wl.layout_kwargs | wl.meta))
    tile = prepared.tile_shape  # the runtime's pick, as cmask's own column
    f = lambda: m.attention(qt, kt, vt, prepared=prepared, tile_shape=tile)  # noqa: E731
    res["cmask_base"] = {"err": peers.sample_check(f(), "blhd", x, wl.mm),
                         "flops": 4 * D * H * wl.pairs, "tile": tile}
    fwd["cmask_base"] = (f, contextlib.nullcontext)


def run_workload(wl: Workload, a, selected):
    """cmask's and each peer's calls set up and checked, then timed together in
    interleaved rounds (peers.time_rounds), forward, then forward+backward."""
    m = load(a.artifacts, wl.artifact)
    res = {"mask": wl.name, "N": wl.N, "L": wl.L, "B": wl.B, "H": H, "Hkv": wl.Hkv}
    if wl.packed:
        res["lens"] = wl.lens
    t0 = time.time()
    x = Inputs(wl, seed=wl.N, train=not a.no_backward)
    fwd, train = {}, {}
    cin = run_cmask(m, wl, x, res, a, fwd, train)
    if a.baseline:
        run_baseline(load(a.baseline, wl.artifact), wl, x, res, a, fwd)
    for peer in selected:
        if peer.applies(wl):
            peers.run_peer(peer, wl, x, res, cin, fwd, train)
    fwd_windows, train_windows = {}, {}
    with peers.ClockLog(enabled=not a.no_clocks) as smi:  # each call's SM clock
        fwd_times = peers.time_rounds(fwd, a.iters, a.rounds, fwd_windows, a.sample_ms)
        train_times = peers.time_rounds(train, a.iters, a.rounds, train_windows, a.sample_ms)
    peers.record_times(res, fwd_times, train_times,
                       ({k: smi.stats(w) for k, w in fwd_windows.items()},
                        {k: smi.stats(w) for k, w in train_windows.items()}))
    # cmask's row: the runtime's tile; its forward+backward (and deterministic) times.
    tile = res.pop("cmask_tile")
    res["cmask"] = res[f"cmask_{tile}"] | {"tile": tile} | res.pop("cmask_grad_errs", {})
    if "cmask_train" in res:
        t = res.pop("cmask_train")
        res["cmask"].update({k: v for k, v in t.items() if k.startswith("train_")})
    if "cmask_plain" in res:
        res["cmask"]["plain_train_ms"] = res.pop("cmask_plain")["train_ms"]
    if "cmask_det" in res:
        res["cmask"]["det_train_ms"] = res.pop("cmask_det")["train_ms"]
        res["cmask"]["det_grad_err_vs_default"] = res.pop("cmask_det_grad_err_vs_default")
    res["wall_s"] = time.time() - t0
    wl.cache.clear()
    return res


# ---------------------------------------------------------------- printing

def peer_keys(r):
    return [pp.key for pp in PEERS if pp.key in r]


def label(r, key):
    return r[key].get("label", LABELS[key])


def clock(d, prefix=""):
    """' @1515 MHz': the median SM clock in the call's timed samples
    (peers.ClockLog), or '' without samples."""
    if prefix + "mhz" not in d:
        return ""
    return f" @{d[prefix + 'mhz']:.0f} MHz"


def print_row(r, train):
    c = r["cmask"]
    line = f"{r['mask']:13s} N={r['N']:6d} cmask[{c['tile']}] {c['ms']:.3f} ms " \
           f"{c['tflops']:.0f} TF/s{clock(c)} (err {c['err']:.1e})"
    if "cmask_base" in r:
        base = r["cmask_base"]
        line += f" | cmask-base[{base['tile']}] {base['ms']:.3f} ms {base['tflops']:.0f} TF/s " \
                f"(err {base['err']:.1e}; new/base {base['ms'] / c['ms']:.3f}x)"
    for key in peer_keys(r):
        if "ms" in r[key]:
            line += f" | {label(r, key)} {r[key]['ms']:.3f} ms {r[key]['tflops']:.0f} TF/s" \
                    f"{clock(r[key])} (err {r[key]['err']:.1e})"
    print(line + f" | preprocess {r['preprocess_ms'] * 1e3:.0f} us", flush=True)
    if not train:
        return
    line = f"{'':13s} fwd+bwd  cmask {c['train_ms']:.3f} ms {c['train_tflops']:.0f} TF/s" \
           f"{clock(c, 'train_')}"
    if "plain_train_ms" in c:
        line += f" (with its preprocess {c['plain_train_ms']:.3f} ms)"
    for key in peer_keys(r):
        if "train_ms" in r[key]:
            line += f" | {label(r, key)} {r[key]['train_ms']:.3f} ms " \
                    f"{r[key]['train_tflops']:.0f} TF/s{clock(r[key], 'train_')}"
    if "det_train_ms" in c:
        line += f" | deterministic {c['det_train_ms']:.3f} ms (grads vs " \
                f"default {c['det_grad_err_vs_default']:.1e})"
    errs = {k: v for k, v in c.items() if k.startswith("grad_err_vs_")}
    print(line + "".join(f" | grads vs {k[12:]} {v:.1e}" for k, v in errs.items()), flush=True)


def ratio(c, d, tf):
    """cmask's effective TFLOP/s over the peer's (> 1: cmask faster); '*' marks a
    peer that computes another mask (its TFLOP/s over its own pairs)."""
    if tf not in d:
        return "-"
    return f"{c[tf] / d[tf]:.2f}x" + ("*" if "own_mask" in d else "")


def best_peer(r, tf):
    """(label, peer dict) of the fastest peer computing the same mask (its sampled-row
    error within 1e-2), or None."""
    same = [(label(r, k), r[k]) for k in peer_keys(r)
            if tf in r[k] and "own_mask" not in r[k] and r[k].get("err", 0) <= 1e-2]
    return max(same, key=lambda p: p[1][tf], default=None)


def peer_cells(r, ms_key, tf):
    cells = []
    for pp in PEERS:
        d = r.get(pp.key, {})
        cells += [f"{d[ms_key]:.3f}" if ms_key in d else "-", ratio(r["cmask"], d, tf)]
    b = best_peer(r, tf)
    cells += [f"{b[0]} {b[1][ms_key]:.3f}" if b else "-",
              f"{r['cmask'][tf] / b[1][tf]:.2f}x" if b else "-"]
    return cells


def table(header, rows_):
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for cells in rows_:
        print("| " + " | ".join(cells) + " |")


def peer_header(unit):
    return [h for pp in PEERS for h in (f"{pp.label} {unit}", f"cmask/{pp.label}")] + \
        ["best peer (ms)", "cmask/best"]


def name(r):
    return r["mask"] + (f" (B={r['B']})" if r["B"] > 1 else "") + \
        (f" (Hkv={r['Hkv']})" if r["Hkv"] != H else "")


def forward_table(rows):
    print("\nforward; cmask/peer = cmask's effective TFLOP/s over the peer's (> 1: cmask "
          "faster; * another mask: FA4 varlen causal, over its own causal pairs)\n")
    header = ["mask", "N", "cmask ms (tile)", "cmask TF/s", "other tile ms"] + \
        peer_header("ms") + ["preprocess us", "BlockMask ms", "cuDNN plan ms"]
    out = []
    for r in rows:
        c = r["cmask"]
        other = [t for t in ("128x128", "128x64") if t != c["tile"] and f"cmask_{t}" in r]
        fx = next((r[k] for k in ("flex", "flex_fa4") if "block_mask_ms" in r.get(k, {})), {})
        cf = r.get("cudnn_flex", {})
        out.append([name(r), str(r["N"]), f"{c['ms']:.3f} ({c['tile']})", f"{c['tflops']:.0f}",
                    f"{r['cmask_' + other[0]]['ms']:.3f}" if other else "-"]
                   + peer_cells(r, "ms", "tflops")
                   + [f"{r['preprocess_ms'] * 1e3:.0f}",
                      f"{fx['block_mask_ms']:.1f}" if "block_mask_ms" in fx else "-",
                      f"{cf['plan_ms']:.2f}" if "plan_ms" in cf else "-"])
    table(header, out)


def train_table(rows, det):
    print("\nforward+backward (through autograd; cmask on the batch's prepared descriptor, as "
          "the peers on their BlockMasks and plans)\n")
    header = ["mask", "N", "cmask ms", "cmask TF/s"] + peer_header("ms") + \
        ["grads vs peer (relFro)"] + (["deterministic ms", "vs default"] if det else [])
    out = []
    for r in rows:
        c = r["cmask"]
        errs = [f"{LABELS[k[12:]]} {v:.1e}" for k, v in c.items() if k.startswith("grad_err_vs_")]
        out.append([name(r), str(r["N"]), f"{c['train_ms']:.3f}", f"{c['train_tflops']:.0f}"]
                   + peer_cells(r, "train_ms", "train_tflops") + [", ".join(errs) or "-"]
                   + ([f"{c['det_train_ms']:.3f}", f"{c['det_train_ms'] / c['train_ms']:.2f}x"]
                      if det else []))
    table(header, out)


def plot(rows, out_dir, train, tag):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    masks = list(dict.fromkeys(name(r) for r in rows))
    passes = [("tflops", "forward")] + ([("train_tflops", "forward+backward")] if train else [])
    fig, axes = plt.subplots(len(passes), len(masks), figsize=(4.5 * len(masks),
                                                               4 * len(passes)), squeeze=False)
    for (key, title), axrow in zip(passes, axes):
        for ax, mask in zip(axrow, masks):
            plot_panel(ax, [r for r in rows if name(r) == mask], key, f"{mask} {title}")
    fig.suptitle(f"attention, {torch.cuda.get_device_name()}, H=32 D=128 bf16 "
                 "(* FA4 varlen causal: its own pairs)")
    fig.tight_layout()
    fig.savefig(out_dir / f"{tag}.png", dpi=110)


def plot_panel(ax, rs, key, title):
    ax.plot([r["N"] for r in rs], [r["cmask"][key] for r in rs], "o-", label="cmask")
    for pp in PEERS:
        have = [r for r in rs if key in r.get(pp.key, {})]
        if have:
            ax.plot([r["N"] for r in have], [r[pp.key][key] for r in have], "s--",
                    label=label(have[0], pp.key) + ("*" if "own_mask" in have[0][pp.key] else ""))
    ax.set_xscale("log", base=2)
    ax.set_title(title)
    ax.set_xlabel("N (tokens per sequence; packed: in all)")
    ax.set_ylabel("effective TFLOP/s (visible pairs)")
    ax.legend(fontsize="small")


# ---------------------------------------------------------------- main

def main():
    a = parse_args()
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    chosen = set(filter(None, a.peers.split(","))) - ({"flex", "flex_fa4"} if a.no_flex else set())
    selected = [pp for pp in PEERS if pp.key in chosen]
    rows = []
    for wl in workloads(a):
        try:
            rows.append(run_workload(wl, a, selected))
        except Exception as ex:  # cmask itself failed on this row: go on with the next
            print(f"{wl.name} N={wl.N}: {type(ex).__name__}: {str(ex)[:300]}", flush=True)
            continue
        print_row(rows[-1], not a.no_backward)
        torch.cuda.empty_cache()
    (out_dir / f"{a.tag}.json").write_text(json.dumps(rows, indent=1))
    forward_table(rows)
    if not a.no_backward:
        train_table(rows, a.deterministic)
    plot(rows, out_dir, not a.no_backward, a.tag)


if __name__ == "__main__":
    main()
