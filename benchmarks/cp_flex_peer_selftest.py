"""Self-test of benchmarks/cp_flex_peer.py (PyTorch's CP of FlexAttention).

    torchrun --nproc_per_node=2 benchmarks/cp_flex_peer_selftest.py

For each case, the CP output and dQ/dK/dV are unsharded back to the global
[total, H, D] order. They are compared with one process's SDPA over a dense
mask in float32, taken from the numpy references of masks/reference.py, on
the same bf16 inputs. Each relFro is printed, then PASS or FAIL. Also
checked: unshard(shard(x)) == x, exactly. Without CUDA it runs on gloo and
CPU, forward only (compiled flex has no backward on CPU; use --small).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from cp_flex_peer import build_flex_cp  # noqa: E402

TOL_OUT, TOL_GRAD = 1e-2, 2e-2  # bf16 against a float32 reference


def _reference_module():
    spec = importlib.util.spec_from_file_location("mask_reference",
                                                  HERE.parent / "masks" / "reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def dense_mask(kind, cu, context, num_targets):
    """[total, total] bool: the block diagonal of the per-sequence references."""
    ref = _reference_module()
    total = cu[-1]
    out = np.zeros((total, total), dtype=bool)
    md = {"context": context, "num_targets": list(num_targets or [])}
    for b in range(len(cu) - 1):
        s, e = cu[b], cu[b + 1]
        n = e - s
        out[s:e, s:e] = ref.causal(n, n, b, md) if kind == "causal" else ref.hstu(n, n, b, md)
    return torch.from_numpy(out)


def rel(a, b):
    a, b = a.float(), b.float()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def run_case(name, kind, cu, H, Hk, D, context, num_targets, device):
    rank = dist.get_rank()
    ns = build_flex_cp(kind, cu, H, Hk, D, None, context=context, num_targets=num_targets)
    total = cu[-1]
    g = torch.Generator().manual_seed(1234)  # the same global tensors on every rank
    mk = (lambda h: torch.randn(total, h, D, generator=g).to(torch.bfloat16).to(device))
    q, k, v, dout = mk(H), mk(Hk), mk(Hk), mk(H)

    ok = True
    res = {}
    # index logic: shard then unshard is the identity, exactly
    for t in (q, k):
        back = ns.unshard(ns.shard(t))
        ok &= back.shape == t.shape and bool(torch.equal(back, t))
    res["roundtrip"] = ok

    sq, sk, sv, sdo = ns.shard(q), ns.shard(k), ns.shard(v), ns.shard(dout)
    out = ns.unshard(ns.fwd(sq, sk, sv))
    train = device.type == "cuda"  # compiled flex has no backward on CPU
    if train:
        tq, tk, tv = (t.detach().clone().requires_grad_() for t in (sq, sk, sv))
        ns.fwd_bwd(tq, tk, tv, sdo)
        dq, dk, dv = (ns.unshard(t.grad) for t in (tq, tk, tv))

    # reference: one process, SDPA in float32 over the dense mask
    mask = dense_mask(kind, cu, context, num_targets).to(device)
    rq, rk, rv = (t.float().transpose(0, 1).unsqueeze(0).requires_grad_() for t in (q, k, v))
    rep = H // Hk
    ro = F.scaled_dot_product_attention(
        rq, rk.repeat_interleave(rep, 1), rv.repeat_interleave(rep, 1), attn_mask=mask)
    to_thd = (lambda x: x[0].transpose(0, 1))
    res["out"] = rel(out, to_thd(ro))
    res["dq"] = res["dk"] = res["dv"] = float("nan")
    if train:
        ro.backward(dout.float().transpose(0, 1).unsqueeze(0))
        res["dq"] = rel(dq, to_thd(rq.grad))
        res["dk"] = rel(dk, to_thd(rk.grad))
        res["dv"] = rel(dv, to_thd(rv.grad))
    ok = ok and res["out"] < TOL_OUT
    if train:
        ok = ok and max(res["dq"], res["dk"], res["dv"]) < TOL_GRAD
    if rank == 0:
        print(f"{name}: world={ns.world} total={total} padded={ns.padded} lb={ns.lb_name} "
              f"H={H} Hk={Hk} D={D} roundtrip={'ok' if res['roundtrip'] else 'BAD'} "
              f"relFro out={res['out']:.2e} dq={res['dq']:.2e} dk={res['dk']:.2e} "
              f"dv={res['dv']:.2e} -> {'ok' if ok else 'FAIL'}", flush=True)
    return ok


def main():
    small = "--small" in sys.argv
    cuda = torch.cuda.is_available()
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        dist.init_process_group("nccl", device_id=device)
    else:
        dist.init_process_group("gloo")
        device = torch.device("cpu")
    D = 32 if small else 128
    cases = [
        ("causal", "causal", [0, 4096], 4, 4, 0, None),
        ("hstu", "hstu", [0, 1000, 2500, 4096], 4, 4, 5, [50, 100, 20]),
        # padding (4000 -> 4096) and GQA (4 query heads on 2 K/V heads)
        ("hstu_pad_gqa", "hstu", [0, 1000, 2500, 4000], 4, 2, 5, [50, 100, 20]),
    ]
    if small:
        cases = [
            ("causal", "causal", [0, 512], 2, 2, 0, None),
            ("hstu", "hstu", [0, 100, 300, 512], 2, 2, 5, [10, 20, 7]),
            ("hstu_pad_gqa", "hstu", [0, 100, 300, 500], 2, 1, 5, [10, 20, 7]),
        ]
    all_ok = True
    for name, kind, cu, H, Hk, context, nt in cases:
        try:
            ok = run_case(name, kind, cu, H, Hk, D, context, nt, device)
        except Exception as e:  # report and go on with the other cases
            import traceback
            traceback.print_exc()
            print(f"[rank {dist.get_rank()}] {name}: error {e!r}", flush=True)
            ok = False
        flag = torch.tensor([int(ok)], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        all_ok &= bool(flag.item())
    if dist.get_rank() == 0:
        print("PASS" if all_ok else "FAIL", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(0 if all_ok else 1)


if __name__ == "__main__":
    main()
