#!/usr/bin/env python3
"""Attention forward and forward+backward: cmask against FlexAttention and SDPA
(cuDNN, flash), one process.

B=1, H=32, D=128, bf16 (DESIGN.md's benchmark shapes): causal, HSTU (targets
N/8, no context), shared-prompt RM (prompt N/4, 4 equal responses) and CLEAR
(T=512 text tokens + an H x W grid, W the power of two at or above sqrt(N),
H = N / W, radius 16) at N = 1K ... 32K; `--masks interleaved` adds
test/gpu/Inputs/interleaved.mlir, a spec without a column direction (its
backward masks with the row intervals). The preprocess (cmask's descriptor)
and FlexAttention's create_block_mask are timed separately from the
attention. Effective TFLOP/s count visible pairs only (4 * D * H * pairs / t
forward, 3.5x that forward+backward; the pairs are summed from cmask's
interval table). Each time is the median of --iters CUDA-event timings after
warm-up; every forward is checked against fp32 math attention on sampled rows
first, and every gradient (dq, dk, dv) against FlexAttention's (cuDNN's for
causal).

forward+backward is out = attention(q, k, v); out.backward(dout) through
autograd. For cmask that includes both preprocess runs (the forward's rows,
the backward's rows and columns); Flex's BlockMask is built once, outside.

    python3 benchmarks/bench_attention.py --artifacts build-gpu/attention --out $OUT

Prints a markdown table and writes attention.json and attention.png to --out.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

import cmask

p = argparse.ArgumentParser()
p.add_argument("--artifacts", required=True, help="directory of <mask>/ artifacts")
p.add_argument("--out", default=".")
p.add_argument("--lengths", default="1024,2048,4096,8192,16384,32768")
p.add_argument("--masks", default="causal,hstu,reward_model,clear")
p.add_argument("--iters", type=int, default=10)
p.add_argument("--no-flex", action="store_true")
p.add_argument("--no-backward", action="store_true", help="forward only")
p.add_argument("--deterministic", action="store_true",
               help="also time cmask's forward+backward with deterministic=True (dq by the "
                    "row pass) and check its gradients against the default's")
a = p.parse_args()

DEV = torch.device("cuda")
H, D, T_TEXT, RADIUS = 32, 128, 512, 16
DT = torch.bfloat16
out_dir = Path(a.out)
out_dir.mkdir(parents=True, exist_ok=True)


def timeit(fn, iters=a.iters, warm=2):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    ev[0].record()
    for i in range(iters):
        fn()
        ev[i + 1].record()
    torch.cuda.synchronize()
    t = sorted(ev[i].elapsed_time(ev[i + 1]) for i in range(iters))
    return t[iters // 2]


def fwd_bwd(fn, inputs, dout):
    """A timed closure: out = fn(*inputs) then out.backward(dout); the gradients
    of the last call stay on the inputs."""
    def run():
        for t in inputs:
            t.grad = None
        fn(*inputs).backward(dout)
    return run


def grads_rel(a_inputs, b_inputs):
    """max over dq, dk, dv of relFro(a, b) (b's layout may be transposed)."""
    worst = 0.0
    for x, y in zip(a_inputs, b_inputs):
        gx, gy = x.grad.float(), y.grad.float()
        if gx.shape != gy.shape:
            gy = gy.transpose(1, 2)
        worst = max(worst, (torch.linalg.vector_norm(gx - gy) /
                            torch.linalg.vector_norm(gy)).item())
    return worst


def workload(mask, n):
    """(length, metadata for cmask, mask_mod for Flex)."""
    if mask == "causal":
        return n, {}, lambda b, h, q, k: k <= q
    if mask == "hstu":
        nh = n - n // 8
        return n, {"context": 0, "num_targets": [n // 8]}, (
            lambda b, h, q, k: ((q < nh) & (k <= q)) | ((q >= nh) & ((k < nh) | (k == q))))
    if mask == "reward_model":
        P = n // 4
        starts = [P + (n - P) * r // 4 for r in range(4)]

        def seg(x):  # the response a position is in (0: the prompt)
            return sum((x >= s).int() for s in starts)

        def mm(b, h, q, k):
            own = (seg(q) == seg(k)) & (k <= q)
            return ((q < P) & (k <= q)) | ((q >= P) & ((k < P) | own))
        return n, {"prompt_len": [P], "responses": [starts]}, mm
    if mask == "clear":
        W = 1 << math.ceil(math.log2(math.sqrt(n)))
        Hg = n // W
        L = T_TEXT + n

        def mm(b, h, q, k):
            qy, qx = (q - T_TEXT) // W, (q - T_TEXT) % W
            ky, kx = (k - T_TEXT) // W, (k - T_TEXT) % W
            near = (qy - ky) * (qy - ky) + (qx - kx) * (qx - kx) <= RADIUS * RADIUS
            return (q < T_TEXT) | (k < T_TEXT) | near
        return L, {"text_len": T_TEXT, "height": Hg, "width": W, "radius": RADIUS}, mm
    if mask == "interleaved":  # test/gpu/Inputs: no column direction (row intervals)
        return n, {}, lambda b, h, q, k: torch.where(
            q % 2 == 0, k <= q, (k < 16) | ((q - k >= 0) & (q - k <= 96)))
    raise ValueError(mask)


def visible_pairs(m, prepared, L):
    """Sum of the interval lengths of the row descriptor (slots are disjoint)."""
    import ctypes
    lib = cmask._capi.lib()
    ptr = lib.cmask_descriptor_intervals(prepared.descriptor, 0)
    K = m.manifest["num_slots"]
    host = torch.empty(L * K * 2, dtype=torch.int32)
    torch.cuda.synchronize()
    cuda = ctypes.CDLL("libcuda.so.1")
    assert cuda.cuMemcpyDtoH_v2(ctypes.c_void_p(host.data_ptr()), ctypes.c_uint64(ptr),
                                ctypes.c_size_t(host.numel() * 4)) == 0
    iv = host.view(L, K, 2).long()
    return int((iv[..., 1] - iv[..., 0]).clamp(min=0).sum())


def sample_check(fn_out, q, k, v, mm, L, rows=256):
    """relFro of sampled rows against fp32 math attention with the predicate."""
    g = torch.Generator(device="cpu").manual_seed(0)
    idx = torch.unique(torch.cat([torch.randint(0, L, (rows,), generator=g),
                                  torch.tensor([0, L - 1])])).to(DEV)
    kk = torch.arange(L, device=DEV)
    vis = mm(0, 0, idx[:, None], kk[None, :])
    qs = q[0, :, idx].float()
    s = (qs @ k[0].float().transpose(1, 2)) / math.sqrt(D)
    s = s.masked_fill(~vis[None], float("-inf"))
    ref = torch.softmax(s, -1).nan_to_num(0) @ v[0].float()
    got = fn_out[0, :, idx].float()
    return (torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)).item()


rows = []
flex_compiled = None
if not a.no_flex:
    import torch._dynamo
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    # One compiled kernel per length and mask: more than the default 8.
    torch._dynamo.config.recompile_limit = 256
    torch._dynamo.config.accumulated_recompile_limit = 4096
    flex_compiled = torch.compile(flex_attention, dynamic=False)
from torch.nn.attention import SDPBackend, sdpa_kernel

for mask in a.masks.split(","):
    m = cmask.load(Path(a.artifacts) / mask)
    default_tile = m.tile_shapes[m.default_tile_index]
    for n in map(int, a.lengths.split(",")):
        L, meta, mm = workload(mask, n)
        torch.manual_seed(n)
        # [1, H, L, D] for Flex/SDPA; cmask takes [1, L, H, D] (a transposed view).
        q, k, v = (torch.randn(1, H, L, D, device=DEV, dtype=DT) for _ in range(3))
        qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
        res = {"mask": mask, "N": n, "L": L}
        t0 = time.time()
        prep = lambda: m.prepare(q=qt, k=kt, **meta)  # noqa: E731
        prepared = prep()
        res["preprocess_ms"] = timeit(prep)
        pairs = visible_pairs(m, prepared, L)
        res["pairs"] = pairs
        flops = 4 * D * H * pairs
        for tile in m.tile_shapes:
            o = m.attention(qt, kt, vt, prepared=prepared, tile_shape=tile)
            err = sample_check(o.transpose(1, 2), q, k, v, mm, L)
            ms = timeit(lambda: m.attention(qt, kt, vt, prepared=prepared, tile_shape=tile))
            res[f"cmask_{tile}"] = {"ms": ms, "tflops": flops / ms / 1e9, "err": err}
        res["cmask"] = res[f"cmask_{default_tile}"] | {"tile": default_tile}
        train = not a.no_backward
        if train:
            # [1, L, H, D] leaves for cmask, [1, H, L, D] ones for the peers.
            cin = [x.detach().clone().requires_grad_() for x in (qt, kt, vt)]
            pin = [x.detach().clone().requires_grad_() for x in (q, k, v)]
            dout = torch.randn_like(q)
            dout_t = dout.transpose(1, 2).contiguous()
            step = fwd_bwd(lambda *t: m.attention(*t, **meta), cin, dout_t)
            ms = timeit(step)
            res["cmask"]["train_ms"] = ms
            res["cmask"]["train_tflops"] = 3.5 * flops / ms / 1e9
            if a.deterministic:
                din = [x.detach().clone().requires_grad_() for x in (qt, kt, vt)]
                ms = timeit(fwd_bwd(lambda *t: m.attention(*t, deterministic=True, **meta),
                                    din, dout_t))
                res["cmask"]["det_train_ms"] = ms
                res["cmask"]["det_grad_err_vs_default"] = grads_rel(din, cin)
                del din
        if flex_compiled is not None:
            try:
                tb = time.time()
                bm = create_block_mask(mm, None, None, L, L, device="cuda", BLOCK_SIZE=128)
                torch.cuda.synchronize()
                first = (time.time() - tb) * 1e3
                build = timeit(lambda: create_block_mask(mm, None, None, L, L, device="cuda",
                                                         BLOCK_SIZE=128), iters=3, warm=1)
                o = flex_compiled(q, k, v, block_mask=bm)
                err = sample_check(o, q, k, v, mm, L)
                ms = timeit(lambda: flex_compiled(q, k, v, block_mask=bm))
                res["flex"] = {"ms": ms, "tflops": flops / ms / 1e9, "err": err,
                               "block_mask_ms": build, "block_mask_first_ms": first}
                if train:
                    ms = timeit(fwd_bwd(lambda *t: flex_compiled(*t, block_mask=bm), pin,
                                        dout))
                    res["flex"].update(train_ms=ms, train_tflops=3.5 * flops / ms / 1e9)
                    res["cmask"]["grad_err_vs_flex"] = grads_rel(cin, pin)
                del bm, o
            except Exception as ex:
                res["flex"] = {"error": f"{type(ex).__name__}: {str(ex)[:200]}"}
                print(f"flex failed: {res['flex']['error']}", flush=True)
        if mask == "causal":
            for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                                  ("flash", SDPBackend.FLASH_ATTENTION)):
                try:
                    with sdpa_kernel(backend):
                        f = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa
                            q, k, v, is_causal=True)
                        o = f()
                        err = sample_check(o, q, k, v, mm, L)
                        ms = timeit(f)
                        res[name] = {"ms": ms, "tflops": flops / ms / 1e9, "err": err}
                        if train:
                            ms = timeit(fwd_bwd(
                                lambda *t: torch.nn.functional.scaled_dot_product_attention(
                                    *t, is_causal=True), pin, dout))
                            res[name].update(train_ms=ms, train_tflops=3.5 * flops / ms / 1e9)
                            res["cmask"][f"grad_err_vs_{name}"] = grads_rel(cin, pin)
                except Exception as ex:  # a backend may be unavailable
                    res[name] = {"error": str(ex)[:200]}
        res["wall_s"] = time.time() - t0
        rows.append(res)
        line = f"{mask:13s} N={n:6d} cmask[{default_tile}] {res['cmask']['ms']:.3f} ms " \
               f"{res['cmask']['tflops']:.0f} TF/s (err {res['cmask']['err']:.1e})"
        for peer in ("flex", "cudnn", "flash"):
            if peer in res and "ms" in res[peer]:
                line += f" | {peer} {res[peer]['ms']:.3f} ms {res[peer]['tflops']:.0f} TF/s"
        print(line + f" | preprocess {res['preprocess_ms']*1e3:.0f} us", flush=True)
        if train:
            line = f"{'':13s} fwd+bwd  cmask {res['cmask']['train_ms']:.3f} ms " \
                   f"{res['cmask']['train_tflops']:.0f} TF/s"
            for peer in ("flex", "cudnn", "flash"):
                if "train_ms" in res.get(peer, {}):
                    line += f" | {peer} {res[peer]['train_ms']:.3f} ms " \
                            f"{res[peer]['train_tflops']:.0f} TF/s"
            if "det_train_ms" in res["cmask"]:
                line += f" | deterministic {res['cmask']['det_train_ms']:.3f} ms (grads vs " \
                        f"default {res['cmask']['det_grad_err_vs_default']:.1e})"
            errs = {k_: v_ for k_, v_ in res["cmask"].items() if k_.startswith("grad_err")}
            print(line + "".join(f" | grads {k_[9:]} {v_:.1e}" for k_, v_ in errs.items()),
                  flush=True)
            del cin, pin, dout, dout_t
        del q, k, v, qt, kt, vt

(out_dir / "attention.json").write_text(json.dumps(rows, indent=1))

print("\n| mask | N | cmask ms (tile) | cmask TF/s | other tile ms | Flex ms | Flex TF/s | "
      "cmask/Flex | cuDNN ms | cmask/cuDNN | FA2 ms | preprocess us | BlockMask ms |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    c = r["cmask"]
    other = [t for t in ("128x128", "128x64") if t != c["tile"] and f"cmask_{t}" in r]
    fx = r.get("flex", {})
    cu = r.get("cudnn", {})
    fa = r.get("flash", {})
    cell = lambda d, k, f: (f.format(d[k]) if k in d else "-")  # noqa: E731
    print(f"| {r['mask']} | {r['N']} | {c['ms']:.3f} ({c['tile']}) | {c['tflops']:.0f} | "
          + (f"{r['cmask_' + other[0]]['ms']:.3f}" if other else "-")
          + f" | {cell(fx, 'ms', '{:.3f}')} | {cell(fx, 'tflops', '{:.0f}')} | "
          + (f"{fx['ms'] / c['ms']:.2f}x" if 'ms' in fx else "-")
          + f" | {cell(cu, 'ms', '{:.3f}')} | "
          + (f"{cu['ms'] / c['ms']:.2f}x" if 'ms' in cu else "-")
          + f" | {cell(fa, 'ms', '{:.3f}')} | {r['preprocess_ms'] * 1e3:.0f} | "
          + f"{cell(fx, 'block_mask_ms', '{:.1f}')} |")

if not a.no_backward:
    print("\nforward+backward (cmask: through autograd, both preprocess runs included)\n")
    det = a.deterministic
    print("| mask | N | cmask ms | cmask TF/s | Flex ms | cmask/Flex | cuDNN ms | cmask/cuDNN "
          "| FA2 ms | grads vs peer (relFro) |"
          + (" deterministic ms | vs default |" if det else ""))
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if det else ""))
    for r in rows:
        c = r["cmask"]
        cells = []
        for peer in ("flex", "cudnn"):
            d = r.get(peer, {})
            cells += [f"{d['train_ms']:.3f}", f"{d['train_ms'] / c['train_ms']:.2f}x"] \
                if "train_ms" in d else ["-", "-"]
        fa = r.get("flash", {})
        errs = [f"{k_[12:]} {v_:.1e}" for k_, v_ in c.items() if k_.startswith("grad_err_vs_")]
        print(f"| {r['mask']} | {r['N']} | {c['train_ms']:.3f} | {c['train_tflops']:.0f} | "
              + " | ".join(cells)
              + (f" | {fa['train_ms']:.3f}" if "train_ms" in fa else " | -")
              + f" | {', '.join(errs) or '-'} |"
              + (f" {c['det_train_ms']:.3f} | {c['det_train_ms'] / c['train_ms']:.2f}x |"
                 if det else ""))

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    masks = list(dict.fromkeys(r["mask"] for r in rows))
    passes = [("tflops", "forward")] + ([] if a.no_backward else
                                         [("train_tflops", "forward+backward")])
    fig, axes = plt.subplots(len(passes), len(masks), figsize=(4.5 * len(masks),
                                                               4 * len(passes)), squeeze=False)
    for (key, title), axrow in zip(passes, axes):
        for ax, mask in zip(axrow, masks):
            rs = [r for r in rows if r["mask"] == mask]
            ns = [r["N"] for r in rs]
            ax.plot(ns, [r["cmask"][key] for r in rs], "o-", label="cmask")
            for peer in ("flex", "cudnn", "flash"):
                if all(key in r.get(peer, {}) for r in rs):
                    ax.plot(ns, [r[peer][key] for r in rs], "s--", label=peer)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{mask} {title}")
            ax.set_xlabel("N")
            ax.set_ylabel("effective TFLOP/s (visible pairs)")
            ax.legend()
    fig.suptitle("attention, H200, B=1 H=32 D=128 bf16")
    fig.tight_layout()
    fig.savefig(out_dir / "attention.png", dpi=110)
except ImportError:
    print("matplotlib missing: no plot")
