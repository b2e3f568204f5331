"""Context parallelism: one packed batch's attention over the ranks of a
torch.distributed group (docs/distributed.md).

The batch's tokens are cut into chunks of equal size (`chunks_per_rank` per
rank) and each rank holds some of them, chosen so that the ranks' work (the
visible (query, key) pairs of their rows, read from the batch's interval
table) is balanced. A rank computes the attention of its own rows against
every key they see: it receives the keys and values of a chunk held by
another rank only when one of its chunks sees a key of that chunk, and in
the backward it returns the gradients of those keys and values to their
owner, the same pairs in reverse. Which chunk pairs see each other comes from
the interval table too, so the pairs the descriptor proves empty cost neither
communication nor compute.

Locally, each of a rank's chunks is one attention call on a windowed
descriptor (docs/descriptor.md, Windows): the chunk's rows, as windows of
their sequences, against the whole sequences' keys.

    plan = cmask.distributed.plan_batch(mask, cu_seqlens, world_size, **metadata)
    rows = plan.rows(rank)                       # the global rows this rank holds
    cp = cmask.distributed.ContextParallel(mask, plan, group, **metadata)
    out = cp.attention(q[rows], k[rows], v[rows])  # [local rows, H, D], with autograd

The plan is the same on every rank (it is a function of the batch), so each
rank builds it for itself: no communication, one host synchronization per
batch (reading the chunk pairs), as a BlockMask's build.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist


# --------------------------------------------------------------------------
# The plan: chunks, their owners, the chunk pairs that see each other.
# --------------------------------------------------------------------------

@dataclasses.dataclass
class Plan:
    """A batch's tokens over `world_size` ranks.

    bounds: int64 [C + 1], chunk c holds the global (packed) rows
    [bounds[c], bounds[c + 1]); owner [C]: its rank; visible [C, C] bool:
    visible[c, d] when a row of chunk c sees a key of chunk d; work [C]: the
    visible (query, key) pairs of chunk c's rows (its slots' lengths summed).
    cu_seqlens: the batch's sequence starts (ints), the same for queries
    and keys (self-attention)."""

    world_size: int
    cu_seqlens: list
    bounds: list
    owner: list
    visible: torch.Tensor
    work: list

    @property
    def num_chunks(self) -> int:
        return len(self.owner)

    def chunks(self, rank: int) -> list:
        """The chunks `rank` holds, in the order of their rows (its local
        tokens are their rows, one chunk after the other)."""
        return [c for c in range(self.num_chunks) if self.owner[c] == rank]

    def rows(self, rank: int) -> torch.Tensor:
        """The global rows `rank` holds, in its local order (int64)."""
        return torch.cat([torch.arange(self.bounds[c], self.bounds[c + 1])
                          for c in self.chunks(rank)])

    def local_start(self, rank: int, chunk: int) -> int:
        """Where `chunk` begins among `rank`'s local rows."""
        start = 0
        for c in self.chunks(rank):
            if c == chunk:
                return start
            start += self.bounds[c + 1] - self.bounds[c]
        raise ValueError(f"chunk {chunk} is not held by rank {rank}")

    def needed(self, rank: int) -> list:
        """The chunks of other ranks whose keys `rank`'s rows see."""
        mine = self.chunks(rank)
        return [d for d in range(self.num_chunks) if self.owner[d] != rank and
                bool(self.visible[mine, d].any())]

    def readers(self, chunk: int) -> list:
        """The other ranks whose rows see a key of `chunk`."""
        return [r for r in range(self.world_size) if r != self.owner[chunk] and
                chunk in self.needed(r)]

    def rank_pairs(self) -> torch.Tensor:
        """[R, R] bool: rank r's rows see a key held by rank s."""
        owner = torch.tensor(self.owner)
        onehot = torch.nn.functional.one_hot(owner, self.world_size).to(torch.float64)
        return (onehot.T @ self.visible.to(torch.float64) @ onehot) > 0

    def messages(self) -> int:
        """Chunk transfers of a forward (each brings a chunk's keys and
        values to a rank that sees them; the backward returns as many)."""
        return sum(len(self.readers(c)) for c in range(self.num_chunks))

    def summary(self) -> str:
        pairs = self.rank_pairs()
        loads = [sum(self.work[c] for c in self.chunks(r)) for r in range(self.world_size)]
        mean = sum(loads) / max(1, len(loads))
        return (f"{self.num_chunks} chunks over {self.world_size} ranks; rank pairs that "
                f"see each other {int(pairs.sum())}/{self.world_size ** 2}; chunk "
                f"transfers {self.messages()} of {self.num_chunks * (self.world_size - 1)}; "
                f"work max/mean {max(loads) / mean if mean else 1.0:.3f}")


def plan_intervals(intervals: torch.Tensor, cu_seqlens, world_size: int,
                   chunks_per_rank: int = 2, align: int = 128) -> Plan:
    """The plan from a batch's interval table (int32 [total, K, 2], each row's
    slots in its sequence's key positions; any device) and its sequence
    starts. Chunk boundaries are multiples of `align` rows (the attention's
    tile), as equal as that allows; chunks go to ranks heaviest first, each to
    the least loaded rank that holds fewer than `chunks_per_rank`."""
    cu = [int(x) for x in cu_seqlens]
    total = cu[-1]
    if intervals.dim() != 3 or intervals.shape[0] != total or intervals.shape[2] != 2:
        raise ValueError(f"cmask: the interval table must be [{total}, K, 2], got "
                         f"{tuple(intervals.shape)}")
    C = world_size * chunks_per_rank
    if world_size < 1 or chunks_per_rank < 1 or total < C * align:
        raise ValueError(f"cmask: {total} tokens cannot be cut into {C} chunks of at least "
                         f"{align} rows ({world_size} ranks x {chunks_per_rank} chunks)")
    units = total // align
    bounds = [min(total, (units * c // C) * align) for c in range(C)] + [total]
    dev = intervals.device
    bounds_t = torch.tensor(bounds, dtype=torch.int64, device=dev)
    cu_t = torch.tensor(cu, dtype=torch.int64, device=dev)
    rows = torch.arange(total, device=dev)
    seq = torch.searchsorted(cu_t, rows, right=True) - 1
    chunk = torch.searchsorted(bounds_t, rows, right=True) - 1
    lo = intervals[..., 0].to(torch.int64)
    hi = intervals[..., 1].to(torch.int64)
    live = lo < hi
    start = cu_t[seq].unsqueeze(1)
    # The key chunks of each live slot: [first, last] (keys are global rows).
    first = torch.searchsorted(bounds_t, (start + lo).contiguous(), right=True) - 1
    last = torch.searchsorted(bounds_t, (start + hi - 1).contiguous(), right=True) - 1
    qc = chunk.unsqueeze(1).expand_as(lo)
    marks = torch.zeros((C, C + 1), dtype=torch.int64, device=dev)
    ones = live.to(torch.int64)
    marks.index_put_((qc[live], first[live]), ones[live], accumulate=True)
    marks.index_put_((qc[live], last[live] + 1), -ones[live], accumulate=True)
    visible = marks.cumsum(1)[:, :C] > 0
    work = torch.zeros(C, dtype=torch.int64, device=dev)
    work.index_add_(0, chunk, ((hi - lo) * live).sum(1))
    visible, work = visible.cpu(), work.cpu().tolist()
    # Heaviest first, to the least loaded rank with room (ties: lowest rank).
    owner, load, held = [0] * C, [0] * world_size, [0] * world_size
    for c in sorted(range(C), key=lambda c: (-work[c], c)):
        r = min((r for r in range(world_size) if held[r] < chunks_per_rank),
                key=lambda r: (load[r], r))
        owner[c], load[r], held[r] = r, load[r] + work[c], held[r] + 1
    return Plan(world_size, cu, bounds, owner, visible, work)


def _intervals_of(prepared) -> torch.Tensor:
    """The row direction's interval table of a prepared descriptor, as an
    int32 [total_q, K, 2] view of its storage."""
    from . import _capi
    mask = prepared.mask
    ptr = _capi.lib().cmask_descriptor_intervals(prepared.descriptor, 0)
    k = int(mask.manifest["num_slots"])
    total = prepared.layout[1]
    offset = ptr - prepared.storage.data_ptr()
    words = prepared.storage[offset:offset + total * k * 2 * 4].view(torch.int32)
    return words.view(total, k, 2)


def plan_batch(mask, cu_seqlens, world_size: int, *, max_seqlen: int,
               chunks_per_rank: int = 2, align: int = 128, **metadata) -> Plan:
    """The plan of a packed batch (self-attention: one cu_seqlens for queries
    and keys) from the interval table of its descriptor, built on the mask's
    device (one preprocess of the whole batch's rows, then one host
    synchronization to read the chunk pairs)."""
    cu = [int(x) for x in cu_seqlens]
    prepared = mask.prepare(q=(cu[-1], 1, 64), k=(cu[-1], 1, 64), cu_seqlens_q=cu,
                            cu_seqlens_k=cu, max_seqlen_q=max_seqlen, max_seqlen_k=max_seqlen,
                            columns=False, **metadata)
    return plan_intervals(_intervals_of(prepared), cu, world_size, chunks_per_rank, align)


# --------------------------------------------------------------------------
# A chunk's attention call: its sequences, windows and keys.
# --------------------------------------------------------------------------

@dataclasses.dataclass
class ChunkLayout:
    """The attention call of one chunk: its rows as windows of sequences
    first..last, against those sequences' whole keys (global rows
    [key_start, key_end))."""

    chunk: int
    first: int
    last: int
    cu_q: list       # the chunk's rows per sequence, from 0
    cu_k: list       # the sequences' keys, from key_start
    window_q: list   # (first present row, whole length) per sequence
    key_start: int
    key_end: int

    @property
    def max_seqlen_q(self) -> int:
        return max(b - a for a, b in zip(self.cu_q, self.cu_q[1:]))

    @property
    def max_seqlen_k(self) -> int:
        return max(b - a for a, b in zip(self.cu_k, self.cu_k[1:]))


def chunk_layout(plan: Plan, chunk: int) -> ChunkLayout:
    cu = plan.cu_seqlens
    s, e = plan.bounds[chunk], plan.bounds[chunk + 1]
    seqs = [b for b in range(len(cu) - 1) if cu[b] < e and cu[b + 1] > s]
    first, last = seqs[0], seqs[-1]
    cu_q, window = [0], []
    for b in seqs:
        a, z = max(s, cu[b]), min(e, cu[b + 1])
        cu_q.append(cu_q[-1] + z - a)
        window.append((a - cu[b], cu[b + 1] - cu[b]))
    cu_k = [cu[b] - cu[first] for b in range(first, last + 2)]
    return ChunkLayout(chunk, first, last, cu_q, cu_k, window, cu[first], cu[last + 1])


def slice_metadata(mask_metadata, metadata: dict, first: int, last: int) -> dict:
    """The metadata of sequences first..last (per-sequence values and offsets
    cut; scalars as they are). `mask_metadata`: the spec's (name, role)."""
    out = {}
    for name, role in mask_metadata:
        value = metadata[name]
        if role == "scalar":
            out[name] = value
        elif role == "per_sequence":
            out[name] = value[first:last + 1]
        elif isinstance(value, tuple):  # (values, starts): starts index the values
            out[name] = (value[0], value[1][first:last + 2])
        else:
            out[name] = value[first:last + 1]
    return out


# --------------------------------------------------------------------------
# Local attention of a chunk: cmask's kernels, or a float64 reference (tests).
# --------------------------------------------------------------------------

class CmaskChunks:
    """A rank's chunks on cmask's kernels: one windowed descriptor each
    (rows for the forward, columns for the backward), built once per batch."""

    def __init__(self, mask, plan: Plan, rank: int, heads: int, kv_heads: int,
                 head_dim: int, scale=None, deterministic=False, **metadata):
        self.mask, self.scale, self.deterministic = mask, scale, deterministic
        self.layouts, self.prepared = {}, {}
        for c in plan.chunks(rank):
            lay = chunk_layout(plan, c)
            rows = lay.cu_q[-1]
            self.layouts[c] = lay
            self.prepared[c] = mask.prepare(
                q=(rows, heads, head_dim), k=(lay.key_end - lay.key_start, kv_heads, head_dim),
                cu_seqlens_q=lay.cu_q, cu_seqlens_k=lay.cu_k, max_seqlen_q=lay.max_seqlen_q,
                max_seqlen_k=lay.max_seqlen_k, window_q=lay.window_q,
                **slice_metadata(mask.metadata, metadata, lay.first, lay.last))

    def forward(self, chunk, q, k, v):
        from .mask import _attention
        p = self.prepared[chunk]
        scale = -1.0 if self.scale is None else float(self.scale)
        return _attention(self.mask, q, k, v, p.storage, p.cu_seqlens_q, p.cu_seqlens_k,
                          p.bounds, p.layout, scale, -1)

    def backward(self, chunk, q, k, v, out, lse, dout):
        from .mask import _attention_backward
        p = self.prepared[chunk]
        scale = -1.0 if self.scale is None else float(self.scale)
        return _attention_backward(self.mask, q, k, v, out, lse, dout, p.storage,
                                   p.cu_seqlens_q, p.cu_seqlens_k, p.bounds, p.layout,
                                   scale, self.deterministic)


def dense_chunk_mask(plan: Plan, chunk: int, intervals: torch.Tensor) -> torch.Tensor:
    """[chunk rows, chunk keys] bool from the whole batch's interval table:
    row i sees key j of its own sequence when a slot holds j."""
    lay = chunk_layout(plan, chunk)
    cu = plan.cu_seqlens
    s, e = plan.bounds[chunk], plan.bounds[chunk + 1]
    rows = torch.arange(s, e)
    keys = torch.arange(lay.key_start, lay.key_end)
    cu_t = torch.tensor(cu)
    rseq = torch.searchsorted(cu_t, rows, right=True) - 1
    kseq = torch.searchsorted(cu_t, keys, right=True) - 1
    j = (keys - cu_t[kseq]).view(1, -1, 1)
    slots = intervals[s:e].to(torch.int64)
    sees = ((slots[:, None, :, 0] <= j) & (j < slots[:, None, :, 1])).any(-1)
    return sees & (rseq.view(-1, 1) == kseq.view(1, -1))


def reference_attention(q, k, v, visible, scale=None):
    """out, lse [H, rows] of masked attention in q's dtype (the tests run it in
    float64): GQA by repeating k and v; rows that see nothing give 0, -inf."""
    h, hk = q.shape[1], k.shape[1]
    k, v = k.repeat_interleave(h // hk, 1), v.repeat_interleave(h // hk, 1)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = torch.einsum("qhd,khd->hqk", q, k) * scale
    s = s.masked_fill(~visible, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse.unsqueeze(-1).clamp_min(torch.finfo(s.dtype).min))
    p = torch.where(visible, p, torch.zeros_like(p))
    return torch.einsum("hqk,khd->qhd", p, v), lse


class ReferenceChunks:
    """A rank's chunks in float64 on the CPU (the gloo tests): the masks from
    the whole batch's interval table, gradients by autograd."""

    def __init__(self, plan: Plan, rank: int, intervals: torch.Tensor, scale=None):
        self.scale = scale
        self.layouts = {c: chunk_layout(plan, c) for c in plan.chunks(rank)}
        self.masks = {c: dense_chunk_mask(plan, c, intervals) for c in plan.chunks(rank)}

    def forward(self, chunk, q, k, v):
        return reference_attention(q, k, v, self.masks[chunk], self.scale)

    def backward(self, chunk, q, k, v, out, lse, dout):
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            o, _ = reference_attention(*leaves, self.masks[chunk], self.scale)
            return torch.autograd.grad(o, leaves, dout)


# --------------------------------------------------------------------------
# The exchange and the autograd function.
# --------------------------------------------------------------------------

class ContextParallel:
    """Attention of this rank's rows in a context-parallel group, forward and
    backward (autograd). `chunks`: the local calls (CmaskChunks, made from
    the mask and metadata when not given, or ReferenceChunks)."""

    def __init__(self, mask, plan: Plan, group=None, *, chunks=None, heads=None,
                 kv_heads=None, head_dim=None, scale=None, deterministic=False, **metadata):
        self.plan, self.group = plan, group
        self.rank = dist.get_rank(group)
        if dist.get_world_size(group) != plan.world_size:
            raise ValueError(f"cmask: the plan is for {plan.world_size} ranks, the group has "
                             f"{dist.get_world_size(group)}")
        if chunks is None:
            if None in (heads, kv_heads, head_dim):
                raise TypeError("cmask: ContextParallel needs heads=, kv_heads= and head_dim= "
                                "(the descriptors' shapes)")
            chunks = CmaskChunks(mask, plan, self.rank, heads, kv_heads, head_dim, scale,
                                 deterministic, **metadata)
        self.calls = chunks
        self.mine = plan.chunks(self.rank)
        self.needed = plan.needed(self.rank)
        self.sent = {c: plan.readers(c) for c in self.mine}
        self.messages = 0  # point-to-point transfers run (the tests count them)

    def _peer(self, rank: int) -> int:
        """The global rank of the group's `rank`."""
        return dist.get_global_rank(self.group, rank) if self.group is not None else rank

    def _exchange(self, sends, recvs):
        """Point-to-point transfers: sends [(tensor, peer)], recvs [(tensor,
        peer)], matched per peer pair in the order both sides list them.
        Over gloo, CUDA tensors travel through host copies (gloo sends host
        memory; e.g. two ranks sharing one GPU in the tests)."""
        staged = []
        if dist.get_backend(self.group) == "gloo":
            sends = [(t.cpu() if t.is_cuda else t, p) for t, p in sends]
            for n, (t, p) in enumerate(recvs):
                if t.is_cuda:
                    staged.append((t, torch.empty(t.shape, dtype=t.dtype)))
                    recvs[n] = (staged[-1][1], p)
        ops = [dist.P2POp(dist.isend, t, self._peer(p), self.group) for t, p in sends]
        ops += [dist.P2POp(dist.irecv, t, self._peer(p), self.group) for t, p in recvs]
        self.messages += len(sends)
        if ops:
            for req in dist.batch_isend_irecv(ops):
                req.wait()
        for device, host in staged:
            device.copy_(host)

    def _local_slice(self, chunk):
        start = self.plan.local_start(self.rank, chunk)
        return slice(start, start + self.plan.bounds[chunk + 1] - self.plan.bounds[chunk])

    def _rows(self, chunk):
        return slice(self.plan.bounds[chunk], self.plan.bounds[chunk + 1])

    def gather_keys(self, k, v):
        """The whole batch's keys and values as this rank sees them: its own
        chunks, the chunks its rows see from other ranks, zeros elsewhere."""
        plan = self.plan
        total = plan.cu_seqlens[-1]
        kg = k.new_empty((total,) + tuple(k.shape[1:]))
        vg = v.new_empty((total,) + tuple(v.shape[1:]))
        for c in range(plan.num_chunks):
            if c in self.mine:
                kg[self._rows(c)] = k[self._local_slice(c)]
                vg[self._rows(c)] = v[self._local_slice(c)]
            elif c not in self.needed:  # never seen: zeros, so no stale NaN reaches P @ V
                kg[self._rows(c)] = 0
                vg[self._rows(c)] = 0
        sends = [(t[self._local_slice(c)].contiguous(), r) for c in self.mine
                 for r in self.sent[c] for t in (k, v)]
        recvs = [(t[self._rows(c)], plan.owner[c]) for c in self.needed for t in (kg, vg)]
        self._exchange(sends, recvs)
        return kg, vg

    def forward(self, q, k, v):
        kg, vg = self.gather_keys(k, v)
        out = torch.empty_like(q)
        lses = {}
        for c in self.mine:
            lay = self.calls.layouts[c]
            keys = slice(lay.key_start, lay.key_end)
            o, lses[c] = self.calls.forward(c, q[self._local_slice(c)], kg[keys], vg[keys])
            out[self._local_slice(c)] = o
        return out, kg, vg, lses

    def backward(self, q, kg, vg, out, lses, dout):
        plan = self.plan
        dq = torch.empty_like(q)
        acc = dict(dtype=torch.float32 if kg.dtype != torch.float64 else torch.float64,
                   device=kg.device)
        dkg = torch.zeros(kg.shape, **acc)
        dvg = torch.zeros(vg.shape, **acc)
        for c in self.mine:
            lay = self.calls.layouts[c]
            keys = slice(lay.key_start, lay.key_end)
            sl = self._local_slice(c)
            dq_c, dk_c, dv_c = self.calls.backward(c, q[sl], kg[keys], vg[keys], out[sl],
                                                   lses[c], dout[sl].contiguous())
            dq[sl] = dq_c
            dkg[keys] += dk_c
            dvg[keys] += dv_c
        # The gradients of other ranks' keys go back to their owners; ours
        # come from every rank that saw them.
        sends = [(t[self._rows(c)], plan.owner[c]) for c in self.needed for t in (dkg, dvg)]
        inbox = [(c, r, torch.empty_like(dkg[self._rows(c)]), torch.empty_like(dvg[self._rows(c)]))
                 for c in self.mine for r in self.sent[c]]
        recvs = [(t, r) for c, r, dk_r, dv_r in inbox for t in (dk_r, dv_r)]
        self._exchange(sends, recvs)
        for c, r, dk_r, dv_r in inbox:
            dkg[self._rows(c)] += dk_r
            dvg[self._rows(c)] += dv_r
        local = torch.cat([torch.arange(plan.bounds[c], plan.bounds[c + 1]) for c in self.mine])
        local = local.to(kg.device)
        return dq, dkg[local].to(kg.dtype), dvg[local].to(vg.dtype)

    def attention(self, q, k, v):
        """out [local rows, H, D] of this rank's rows (q, k, v: its local
        tokens, [local rows, H or H_kv, D], its chunks in order), with autograd."""
        return _ContextParallelAttention.apply(q, k, v, self)


class _ContextParallelAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, cp):
        out, kg, vg, lses = cp.forward(q, k, v)
        ctx.cp, ctx.lses = cp, lses
        ctx.save_for_backward(q, kg, vg, out)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, kg, vg, out = ctx.saved_tensors
        dq, dk, dv = ctx.cp.backward(q, kg, vg, out, ctx.lses, dout)
        return dq, dk, dv, None
