"""Context parallelism (cmask.distributed) on the CPU with torch.distributed's
gloo backend: 2 and 3 ranks, each in its own process, hold chunks of a
packed batch and compute their rows' attention with the float64 reference
(ReferenceChunks) on masks read from the compiled interval table
(`cmask-translate --cmask-to-intervals-json`). Checked against one process's
float64 attention over the whole batch on the element-wise oracle's mask
(`--cmask-to-dense-json`): out, dq, dk and dv; the chunk pairs the plan says
see each other and the transfers the ranks ran, against the oracle; the
balance of the work. The GPU runs the same exchange over NCCL with cmask's
kernels (test/gpu/test_context_parallel.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from cmask import distributed as cd  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("CMASK_BIN_DIR", REPO / "build" / "bin"))

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")

CASES = {
    # One long causal sequence: every rank sees keys of the ranks before it.
    "causal": ("causal", [{"q_len": 448, "k_len": 448}], {}),
    # Packed HSTU: short sequences, so chunk pairs across documents are empty.
    "hstu": ("hstu", [{"q_len": n, "k_len": n} for n in (40, 150, 7, 96, 130, 60, 33)],
             {"context": 3, "num_targets": [5, 20, 0, 9, 30, 4, 2]}),
    # CLEAR: a 2-D window over an image after a text prefix.
    "clear": ("clear", [{"q_len": 8 + 16 * 24, "k_len": 8 + 16 * 24}],
              {"text_len": 8, "height": 16, "width": 24, "radius": 2}),
}


def _translate(spec: str, batch: dict, mode: str, tmp: Path):
    md = tmp / f"{spec}-{mode}.json"
    md.write_text(json.dumps(batch))
    out = subprocess.run([BIN / "cmask-translate", REPO / "masks" / f"{spec}.mlir",
                          f"--cmask-to-{mode}-json", f"--metadata={md}"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def _batch_masks(case: str, tmp: Path):
    """The interval table [total, K, 2] and the oracle's whole-batch mask."""
    spec, seqs, metadata = CASES[case]
    batch = {"sequences": seqs, "metadata": metadata}
    iv = _translate(spec, batch, "intervals", tmp)
    dense = _translate(spec, batch, "dense", tmp)
    table = [r["slots"] for s in iv["sequences"] for r in s["rows"]]
    intervals = torch.tensor(table, dtype=torch.int32).view(len(table), -1, 2)
    cu = [0]
    for s in seqs:
        cu.append(cu[-1] + s["q_len"])
    visible = torch.zeros(cu[-1], cu[-1], dtype=torch.bool)
    for b, s in enumerate(dense["sequences"]):
        rows = torch.tensor([[c == "1" for c in r] for r in s["rows"]], dtype=torch.bool)
        visible[cu[b]:cu[b + 1], cu[b]:cu[b + 1]] = rows.view(cu[b + 1] - cu[b], -1)
    return intervals, cu, visible


def _inputs(total: int, heads=4, kv_heads=2, dim=16):
    g = torch.Generator().manual_seed(7)
    q = torch.randn(total, heads, dim, generator=g, dtype=torch.float64)
    k = torch.randn(total, kv_heads, dim, generator=g, dtype=torch.float64)
    v = torch.randn(total, kv_heads, dim, generator=g, dtype=torch.float64)
    dout = torch.randn(total, heads, dim, generator=g, dtype=torch.float64)
    return q, k, v, dout


def _one_thread():
    """Each rank computes on one CPU thread. Seen under load (3 of 80 runs of
    the HSTU case, 2 ranks, 2 cores busy): a rank's first torch.logsumexp,
    split over 2 OpenMP threads while gloo's transfers were in flight, gave
    the first thread's half (heads 0-1) lse values 2^-31 off (same inputs
    recomputed at once: exact), so out's relFro reached 1.5e-10. The ranks
    are processes on a small machine anyway: one thread each also keeps
    them from oversubscribing it."""
    torch.set_num_threads(1)


def _worker(rank, world, init, plan, intervals, result_dir):
    _one_thread()
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        q, k, v, dout = _inputs(plan.cu_seqlens[-1])
        rows = plan.rows(rank)
        ql, kl, vl = (t[rows].clone().requires_grad_() for t in (q, k, v))
        cp = cd.ContextParallel(None, plan, chunks=cd.ReferenceChunks(plan, rank, intervals))
        out = cp.attention(ql, kl, vl)
        out.backward(dout[rows])
        torch.save({"rows": rows, "out": out.detach(), "dq": ql.grad, "dk": kl.grad,
                    "dv": vl.grad, "messages": cp.messages},
                   Path(result_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def _rel(a, b):
    return float((a - b).detach().norm() / b.detach().norm().clamp_min(1e-300))


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("case", sorted(CASES))
def test_context_parallel_equals_one_process(case, world, tmp_path):
    intervals, cu, visible = _batch_masks(case, tmp_path)
    plan = cd.plan_intervals(intervals, cu, world, chunks_per_rank=2, align=8)

    # The chunk pairs that see each other, against the oracle.
    C = plan.num_chunks
    want = torch.zeros(C, C, dtype=torch.bool)
    for c in range(C):
        for d in range(C):
            want[c, d] = visible[plan.bounds[c]:plan.bounds[c + 1],
                                 plan.bounds[d]:plan.bounds[d + 1]].any()
    assert torch.equal(plan.visible, want), f"{case}: plan {plan.visible} oracle {want}"
    transfers = sum(1 for d in range(C) for r in range(world)
                    if r != plan.owner[d] and any(want[c, d] for c in plan.chunks(r)))
    assert plan.messages() == transfers
    # Every rank holds chunks_per_rank chunks of (about) equal size.
    sizes = [sum(plan.bounds[c + 1] - plan.bounds[c] for c in plan.chunks(r))
             for r in range(world)]
    assert max(sizes) - min(sizes) <= 2 * 8, sizes

    # The HSTU batch has calls of both kinds: whole sequences inside a chunk
    # (keys read in place) and sequences cut by chunk bounds.
    calls = [call for r in range(world) for call in plan.calls(r)]
    if case == "hstu":
        assert {call.exclusive for call in calls} == {True, False}

    init = f"file://{tmp_path / 'rendezvous'}"
    mp.spawn(_worker, args=(world, init, plan, intervals, str(tmp_path)), nprocs=world)

    q, k, v, dout = _inputs(cu[-1])
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    ref, _ = cd.reference_attention(*leaves, visible)
    ref.backward(dout)
    out, dq, dk, dv = (torch.zeros_like(t) for t in (q, q, k, v))
    messages = 0
    for r in range(world):
        res = torch.load(tmp_path / f"rank{r}.pt")
        rows = res["rows"]
        out[rows], dq[rows], dk[rows], dv[rows] = res["out"], res["dq"], res["dk"], res["dv"]
        messages += res["messages"]
    for name, got, exp in (("out", out, ref), ("dq", dq, leaves[0].grad),
                           ("dk", dk, leaves[1].grad), ("dv", dv, leaves[2].grad)):
        assert _rel(got, exp) < 1e-12, f"{case} world={world} {name}: relFro {_rel(got, exp)}"
    # K and V per transfer, forward and backward: nothing else was sent.
    assert messages == 4 * transfers, (messages, transfers)


def test_plan_balances_causal_work():
    """One causal sequence over 4 ranks: the work per rank within 3% of the
    mean (a contiguous split would give the last rank 7x the first's), and
    the pairs of ranks whose rows see nothing of the other are skipped."""
    total = 4096
    i = torch.arange(total, dtype=torch.int32)
    intervals = torch.stack([torch.zeros_like(i), i + 1], -1).view(total, 1, 2)
    plan = cd.plan_intervals(intervals, [0, total], 4, chunks_per_rank=2, align=128)
    loads = [sum(plan.work[c] for c in plan.chunks(r)) for r in range(4)]
    assert max(loads) / (sum(loads) / 4) < 1.03, loads
    assert plan.work == [sum(range(plan.bounds[c] + 1, plan.bounds[c + 1] + 1))
                         for c in range(8)]
    # Causal: chunk c sees chunks 0..c, so the first chunk's rank reads nothing
    # of the ranks after it unless it holds a later chunk too.
    assert torch.equal(plan.visible, torch.ones(8, 8, dtype=torch.bool).tril())


def test_plan_refuses_too_few_tokens():
    intervals = torch.zeros(100, 1, 2, dtype=torch.int32)
    with pytest.raises(ValueError, match="cannot be cut into 8 chunks of at least 128 rows"):
        cd.plan_intervals(intervals, [0, 100], 4)


def _dp_worker(rank, world, init, plans, intervals, result_dir):
    """Data x context parallelism: ranks {0, 1} and {2, 3} are two
    context-parallel groups, each on its own batch."""
    _one_thread()
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        g = rank // 2
        plan = plans[g]
        local = dist.get_rank(groups[g])
        q, k, v, dout = _inputs(plan.cu_seqlens[-1])
        rows = plan.rows(local)
        ql, kl, vl = (t[rows].clone().requires_grad_() for t in (q, k, v))
        cp = cd.ContextParallel(None, plan, groups[g],
                                chunks=cd.ReferenceChunks(plan, local, intervals[g]))
        out = cp.attention(ql, kl, vl)
        out.backward(dout[rows])
        torch.save({"rows": rows, "out": out.detach(), "dk": kl.grad},
                   Path(result_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_context_parallel_groups_compose_with_data_parallelism(tmp_path):
    cases = ["hstu", "causal"]
    data = [_batch_masks(c, tmp_path) for c in cases]
    plans = [cd.plan_intervals(iv, cu, 2, chunks_per_rank=2, align=8) for iv, cu, _ in data]
    init = f"file://{tmp_path / 'rendezvous'}"
    mp.spawn(_dp_worker, args=(4, init, plans, [d[0] for d in data], str(tmp_path)), nprocs=4)
    for g, (_, cu, visible) in enumerate(data):
        q, k, v, dout = _inputs(cu[-1])
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        ref, _ = cd.reference_attention(*leaves, visible)
        ref.backward(dout)
        out, dk = torch.zeros_like(q), torch.zeros_like(k)
        for r in (2 * g, 2 * g + 1):
            res = torch.load(tmp_path / f"rank{r}.pt")
            out[res["rows"]], dk[res["rows"]] = res["out"], res["dk"]
        assert _rel(out, ref) < 1e-12 and _rel(dk, leaves[1].grad) < 1e-12, cases[g]


def _window_intervals(total, w):
    i = torch.arange(total, dtype=torch.int32)
    return torch.stack([(i - w).clamp_min(0), (i + w + 1).clamp_max(total)], -1).view(total, 1, 2)


def _causal_intervals(cu):
    rows = [torch.stack([torch.zeros(n, dtype=torch.int32), torch.arange(1, n + 1,
                                                                         dtype=torch.int32)], -1)
            for n in (b - a for a, b in zip(cu, cu[1:]))]
    return torch.cat(rows).view(cu[-1], 1, 2)


def _visible_from(intervals, cu):
    total = cu[-1]
    cu_t = torch.tensor(cu)
    seq = torch.searchsorted(cu_t, torch.arange(total), right=True) - 1
    j = (torch.arange(total) - cu_t[seq]).view(1, -1, 1)
    slots = intervals.to(torch.int64)
    sees = ((slots[:, None, :, 0] <= j) & (j < slots[:, None, :, 1])).any(-1)
    return sees & (seq.view(-1, 1) == seq.view(1, -1))


EDGE_CASES = {
    # Rank 0 reads all its keys in place but rank 1 reads rank 0's rows: rank
    # 0 must still join the exchange.
    "in_place_rank_sends": (lambda: ([0, 512, 768], _causal_intervals([0, 512, 768])), 2, 2),
    # A bidirectional window: a rank reads two separate parts of one chunk of
    # the other; it receives their hull and returns its gradients.
    "hull_over_a_gap": (lambda: ([0, 1536], _window_intervals(1536, 64)), 2, 3),
    "window_three_ranks": (lambda: ([0, 1536], _window_intervals(1536, 100)), 3, 2),
}


@pytest.mark.parametrize("case", sorted(EDGE_CASES))
def test_exchange_edge_cases(case, tmp_path):
    make, world, per_rank = EDGE_CASES[case]
    cu, intervals = make()
    plan = cd.plan_intervals(intervals, cu, world, chunks_per_rank=per_rank, align=128)
    init = f"file://{tmp_path / 'rendezvous'}"
    mp.spawn(_worker, args=(world, init, plan, intervals, str(tmp_path)), nprocs=world)
    q, k, v, dout = _inputs(cu[-1])
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    ref, _ = cd.reference_attention(*leaves, _visible_from(intervals, cu))
    ref.backward(dout)
    got = {name: torch.zeros_like(t) for name, t in (("out", q), ("dq", q), ("dk", k),
                                                      ("dv", v))}
    for r in range(world):
        res = torch.load(tmp_path / f"rank{r}.pt")
        for name in got:
            got[name][res["rows"]] = res[name]
    for name, exp in (("out", ref), ("dq", leaves[0].grad), ("dk", leaves[1].grad),
                      ("dv", leaves[2].grad)):
        assert _rel(got[name], exp) < 1e-12, f"{case} {name}: relFro {_rel(got[name], exp)}"
