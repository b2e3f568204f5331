"""Context parallelism on the GPU (cmask.distributed over NCCL, one process
per GPU, cmask's kernels on windowed descriptors): the ranks' out, dq, dk and
dv against float64 attention over the whole batch (the present bounds of
test_backward.py) and against cmask on one GPU; the transfers the ranks ran
against the plan. Two ranks run over NCCL on two GPUs; on one GPU they share
it over gloo (host copies), which checks the plan, the windowed descriptors
and the kernels but not NCCL."""

from __future__ import annotations

import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from test_attention import DEV, TOL, batch_for, clear_lens, load, packed_inputs, rel  # noqa: E402
from test_backward import reference_grads  # noqa: E402

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from cmask import distributed as cd  # noqa: E402

# NVLink multicast stays off (the machines' rule; NCCL reads these).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")


def hstu_lens(total=8192, seed=3):
    rng = np.random.default_rng(seed)
    lens = []
    while sum(lens) < total:
        lens.append(int(np.clip(rng.lognormal(5.5, 1.0), 32, 2048)))
    lens[-1] -= sum(lens) - total
    return [n for n in lens if n > 0]


CASES = {
    "causal": lambda: batch_for("causal", [6000]),
    "hstu": lambda: batch_for("hstu", hstu_lens()),
    "clear": lambda: batch_for("clear", clear_lens() * 2),
}


def _worker(rank, world, init, name, result_dir, heads, kv_heads):
    # NCCL with a GPU per rank; with fewer GPUs, gloo (host copies) and
    # ranks sharing GPU 0: the same plan, descriptors and kernels.
    gpus = torch.cuda.device_count()
    torch.cuda.set_device(rank % gpus)
    if gpus >= world:
        dist.init_process_group("nccl", init_method=init, rank=rank, world_size=world,
                                device_id=torch.device("cuda", rank))
    else:
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        m = load(name)
        batch = CASES[name]()
        q, k, v, cu_q, _ = packed_inputs(batch, heads, kv_heads, seed=11)
        dout = torch.randn(q.shape, device=q.device, dtype=q.dtype,
                           generator=torch.Generator(device=q.device).manual_seed(12))
        cu = cu_q.tolist()
        max_len = max(s["q_len"] for s in batch["sequences"])
        md = batch["metadata"]
        plan = cd.plan_batch(m, cu, world, max_seqlen=max_len, **md)
        rows = plan.rows(rank).to(q.device)
        ql, kl, vl = (t[rows].clone().requires_grad_() for t in (q, k, v))
        cp = cd.ContextParallel(m, plan, heads=heads, kv_heads=kv_heads, head_dim=128, **md)
        out = cp.attention(ql, kl, vl)
        out.backward(dout[rows])
        torch.cuda.synchronize()
        torch.save({"rows": rows.cpu(), "out": out.detach().cpu(), "dq": ql.grad.cpu(),
                    "dk": kl.grad.cpu(), "dv": vl.grad.cpu(), "messages": cp.messages,
                    "plan_messages": plan.messages(), "summary": plan.summary()},
                   Path(result_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def run_context_parallel(name, world, heads=4, kv_heads=2):
    with tempfile.TemporaryDirectory() as tmp:
        init = f"file://{tmp}/rendezvous"
        mp.spawn(_worker, args=(world, init, name, tmp, heads, kv_heads), nprocs=world)
        return [torch.load(Path(tmp) / f"rank{r}.pt") for r in range(world)]


def check(name, world, heads=4, kv_heads=2):
    results = run_context_parallel(name, world, heads, kv_heads)
    m = load(name)
    batch = CASES[name]()
    q, k, v, cu_q, cu_k = packed_inputs(batch, heads, kv_heads, seed=11)
    dout = torch.randn(q.shape, device=q.device, dtype=q.dtype,
                       generator=torch.Generator(device=q.device).manual_seed(12))
    got = {key: torch.zeros((q if key in ("out", "dq") else k).shape, dtype=torch.float64)
           for key in ("out", "dq", "dk", "dv")}
    for res in results:
        for key in got:
            got[key][res["rows"]] = res[key].double()
    # K and V per chunk transfer, forward and backward, counted by the senders.
    sent = sum(r["messages"] for r in results)
    assert sent == 4 * results[0]["plan_messages"], (sent, results[0]["plan_messages"])
    print(f"{name} x{world}: {results[0]['summary']}; tensors sent {sent}")
    # One GPU, the whole batch; and float64.
    kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
              max_seqlen_q=max(s["q_len"] for s in batch["sequences"]),
              max_seqlen_k=max(s["k_len"] for s in batch["sequences"]))
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    one = m.attention(qg, kg, vg, **kw, **batch["metadata"])
    one.backward(dout)
    scale = 1.0 / math.sqrt(q.shape[-1])
    ref = reference_grads(name, batch, q, k, v, cu_q, cu_k, scale, dout)
    from test_attention import reference_attention
    ref_out = reference_attention(name, batch, q, k, v, cu_q, cu_k, scale)[0]
    failures = []
    for key, single, exp in (("out", one, ref_out), ("dq", qg.grad, ref[0]),
                             ("dk", kg.grad, ref[1]), ("dv", vg.grad, ref[2])):
        err, err_one = rel(got[key].to(DEV), exp.double()), rel(single.double(), exp.double())
        print(f"  {key}: relFro {err:.3e} against float64 (one GPU {err_one:.3e})")
        if err > TOL[torch.bfloat16] or err > 2 * err_one + 1e-6:
            failures.append(f"{key} relFro {err:.3e} (one GPU {err_one:.3e})")
    assert not failures, f"{name} x{world}: " + "; ".join(failures)


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_rank_equals_plain_attention(name):
    check(name, 1)


@pytest.mark.parametrize("name", sorted(CASES))
def test_two_ranks_equal_float64(name):
    """Over NCCL on two GPUs; on one GPU, two ranks share it over gloo."""
    check(name, 2)


def test_windowed_descriptor_rows_equal_the_whole_batch():
    """A window of one sequence's rows (a shard), against all its keys: the
    same output rows as the whole sequence's attention."""
    m = load("hstu")
    batch = batch_for("hstu", [3000])
    q, k, v, cu_q, cu_k = packed_inputs(batch, 4, 2, seed=5)
    md = batch["metadata"]
    whole = m.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=3000,
                        max_seqlen_k=3000, **md)
    a, b = 1000, 2300
    p = m.prepare(q=(b - a, 4, 128), k=k, cu_seqlens_q=[0, b - a], cu_seqlens_k=cu_k,
                  max_seqlen_q=b - a, max_seqlen_k=3000, window_q=[(a, 3000)], checked=True,
                  **md)
    part = m.attention(q[a:b], k, v, prepared=p)
    assert rel(part.double(), whole[a:b].double()) < 1e-3
    with pytest.raises(ValueError, match="16 a window outside its sequence"):
        m.prepare(q=(b - a, 4, 128), k=k, cu_seqlens_q=[0, b - a], cu_seqlens_k=cu_k,
                  max_seqlen_q=b - a, max_seqlen_k=3000, window_q=[(2500, 3000)],
                  checked=True, **md)
