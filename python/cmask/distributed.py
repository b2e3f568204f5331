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

Locally, a rank's consecutive chunks form segments, each cut into attention
calls on windowed descriptors (docs/descriptor.md, Windows): a run of whole
sequences against their own keys, or one sequence's rows in the segment
against the hull of the keys they see (docs/distributed.md).

    plan = cmask.distributed.plan_batch(mask, cu_seqlens, world_size, **metadata)
    rows = plan.rows(rank)                       # the global rows this rank holds
    cp = cmask.distributed.ContextParallel(mask, plan, group, heads=H, kv_heads=H_kv,
                                           head_dim=D, **metadata)
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
    # (chunk, sequence) -> (first, end) of the global keys its rows see (a
    # hull; first >= end when they see none).
    piece_keys: dict = dataclasses.field(default_factory=dict)

    @property
    def num_chunks(self) -> int:
        return len(self.owner)

    def chunks(self, rank: int) -> list:
        """The chunks `rank` holds, in the order of their rows (its local
        tokens are their rows, one chunk after the other)."""
        return [c for c in range(self.num_chunks) if self.owner[c] == rank]

    def segments(self, rank: int) -> list:
        """`rank`'s runs of consecutive chunks (lists of chunk indices): rows
        that follow each other both in the batch and locally."""
        out = []
        for c in self.chunks(rank):
            if out and out[-1][-1] == c - 1:
                out[-1].append(c)
            else:
                out.append([c])
        return out

    def calls(self, rank: int) -> list:
        """`rank`'s attention calls (calls_of each of its segments)."""
        return [call for seg in self.segments(rank) for call in calls_of(self, seg)]

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
    # Pieces: a chunk's rows of one sequence; the hull of the keys they see.
    cuts = sorted(set(bounds) | set(cu))
    cuts_t = torch.tensor(cuts, dtype=torch.int64, device=dev)
    piece = torch.searchsorted(cuts_t, rows, right=True) - 1
    big = torch.iinfo(torch.int64).max
    kmin = torch.where(live, start + lo, big).amin(1)
    kmax = torch.where(live, start + hi, -1).amax(1)
    n = len(cuts) - 1
    pmin = torch.full((n,), big, dtype=torch.int64, device=dev).scatter_reduce(
        0, piece, kmin, "amin")
    pmax = torch.full((n,), -1, dtype=torch.int64, device=dev).scatter_reduce(
        0, piece, kmax, "amax")
    visible, work = visible.cpu(), work.cpu().tolist()
    pmin, pmax = pmin.cpu().tolist(), pmax.cpu().tolist()
    piece_keys = {}
    for p_ in range(n):
        a = cuts[p_]
        if a == cuts[p_ + 1]:
            continue
        c = next(c for c in range(C) if bounds[c] <= a < bounds[c + 1])
        b = next(b for b in range(len(cu) - 1) if cu[b] <= a < cu[b + 1])
        piece_keys[(c, b)] = (pmin[p_], pmax[p_])
    # Heaviest first, to the least loaded rank with room (ties: lowest rank).
    owner, load, held = [0] * C, [0] * world_size, [0] * world_size
    for c in sorted(range(C), key=lambda c: (-work[c], c)):
        r = min((r for r in range(world_size) if held[r] < chunks_per_rank),
                key=lambda r: (load[r], r))
        owner[c], load[r], held[r] = r, load[r] + work[c], held[r] + 1
    return Plan(world_size, cu, bounds, owner, visible, work, piece_keys)


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


def plan_batch(mask, cu_seqlens, world_size: int, *, max_seqlen: int | None = None,
               chunks_per_rank: int = 2, align: int = 128, **metadata) -> Plan:
    """The plan of a packed batch (self-attention: one cu_seqlens, ints, for
    queries and keys) from the interval table of its descriptor, built on
    the mask's device (one preprocess of the whole batch's rows, then one
    host synchronization to read the chunk pairs). max_seqlen: the longest
    sequence (default: from cu_seqlens)."""
    cu = [int(x) for x in cu_seqlens]
    if max_seqlen is None:
        max_seqlen = max((b - a for a, b in zip(cu, cu[1:])), default=0)
    prepared = mask.prepare(q=(cu[-1], 1, 64), k=(cu[-1], 1, 64), cu_seqlens_q=cu,
                            cu_seqlens_k=cu, max_seqlen_q=max_seqlen, max_seqlen_k=max_seqlen,
                            columns=False, **metadata)
    return plan_intervals(_intervals_of(prepared), cu, world_size, chunks_per_rank, align)


# --------------------------------------------------------------------------
# A chunk's attention call: its sequences, windows and keys.
# --------------------------------------------------------------------------

@dataclasses.dataclass
class Call:
    """One attention call of a rank: the global rows [row_start, row_end)
    of one segment (consecutive chunks of the rank; sequences first..last)
    against the global keys [key_start, key_end). An exclusive call's rows
    are whole sequences inside the segment (its keys are seen by these rows
    only); else it is one sequence's rows (a window of it) against the hull
    of the keys they see (a window too)."""

    chunks: list
    row_start: int
    row_end: int
    first: int
    last: int
    key_start: int
    key_end: int
    exclusive: bool
    cu_q: list = None
    cu_k: list = None
    window_q: list = None  # (first present row, whole length) per sequence
    window_k: list = None

    @property
    def max_seqlen_q(self) -> int:
        return max(b - a for a, b in zip(self.cu_q, self.cu_q[1:]))

    @property
    def max_seqlen_k(self) -> int:
        return max(b - a for a, b in zip(self.cu_k, self.cu_k[1:]))


def calls_of(plan: Plan, segment: list) -> list:
    """The calls of a segment (consecutive chunks), in row order: each run of
    whole sequences inside it (exclusive), and each sequence it holds only
    part of (at most its first and its last)."""
    cu = plan.cu_seqlens
    s, e = plan.bounds[segment[0]], plan.bounds[segment[-1] + 1]
    calls, run = [], []

    def flush():
        if run and cu[run[0]] == cu[run[-1] + 1]:
            run.clear()  # only empty sequences: no rows, no call
        if run:
            first, last = run[0], run[-1]
            calls.append(Call(segment, cu[first], cu[last + 1], first, last, cu[first],
                              cu[last + 1], True,
                              cu_q=[cu[b] - cu[first] for b in range(first, last + 2)],
                              cu_k=[cu[b] - cu[first] for b in range(first, last + 2)]))
            run.clear()

    for b in range(len(cu) - 1):
        if cu[b + 1] <= s or cu[b] >= e:
            if run and cu[b] == cu[b + 1] and s <= cu[b] <= e:
                run.append(b)  # an empty sequence between whole ones
            continue
        if cu[b] >= s and cu[b + 1] <= e:
            run.append(b)
            continue
        flush()
        a, z = max(s, cu[b]), min(e, cu[b + 1])
        hulls = [plan.piece_keys[(c, b)] for c in segment if (c, b) in plan.piece_keys]
        k0 = min((h[0] for h in hulls), default=a)
        k1 = max((h[1] for h in hulls), default=a)
        k0, k1 = max(k0, cu[b]), min(k1, cu[b + 1])
        if k0 >= k1:  # its rows see nothing: one key, never visible
            k0, k1 = a, a + 1
        length = cu[b + 1] - cu[b]
        calls.append(Call(segment, a, z, b, b, k0, k1, False, cu_q=[0, z - a],
                          cu_k=[0, k1 - k0], window_q=[(a - cu[b], length)],
                          window_k=[(k0 - cu[b], length)]))
    while run and cu[run[-1]] == cu[run[-1] + 1]:
        run.pop()  # trailing empty sequences belong to no run
    flush()
    return calls


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
    """A rank's calls on cmask's kernels: one windowed descriptor each (rows
    for the forward, columns for the backward), built once per batch."""

    def __init__(self, mask, plan: Plan, rank: int, heads: int, kv_heads: int,
                 head_dim: int, scale=None, deterministic=False, **metadata):
        self.mask, self.deterministic = mask, deterministic
        self.scale = -1.0 if scale is None else float(scale)
        self.calls = plan.calls(rank)
        self.prepared = [
            mask.prepare(q=(call.row_end - call.row_start, heads, head_dim),
                         k=(call.key_end - call.key_start, kv_heads, head_dim),
                         cu_seqlens_q=call.cu_q, cu_seqlens_k=call.cu_k,
                         max_seqlen_q=call.max_seqlen_q, max_seqlen_k=call.max_seqlen_k,
                         window_q=call.window_q, window_k=call.window_k,
                         **slice_metadata(mask.metadata, metadata, call.first, call.last))
            for call in self.calls]

    def forward(self, n, q, k, v, out):
        """Call n's out (written into `out`) and lse."""
        from .mask import _forward
        _, lse = _forward(self.mask, q, k, v, self.prepared[n], self.scale, None, None,
                          out=out)
        return lse

    def backward(self, n, q, k, v, out, lse, dout, dq, dk, dv):
        """Call n's gradients, written into dq, dk, dv."""
        from .mask import _launch_backward
        p = self.prepared[n]
        _launch_backward(self.mask, p.descriptor, q, k, v, out, lse, dout, dq, dk, dv,
                         p.layout, self.scale, self.deterministic)


def dense_call_mask(plan: Plan, call: Call, intervals: torch.Tensor) -> torch.Tensor:
    """[call rows, call keys] bool from the whole batch's interval table: row
    i sees key j of its own sequence when a slot holds j."""
    cu_t = torch.tensor(plan.cu_seqlens)
    rows = torch.arange(call.row_start, call.row_end)
    keys = torch.arange(call.key_start, call.key_end)
    rseq = torch.searchsorted(cu_t, rows, right=True) - 1
    kseq = torch.searchsorted(cu_t, keys, right=True) - 1
    j = (keys - cu_t[kseq]).view(1, -1, 1)
    slots = intervals[call.row_start:call.row_end].to(torch.int64)
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
    """A rank's calls in float64 on the CPU (the gloo tests): the masks from
    the whole batch's interval table, gradients by autograd."""

    def __init__(self, plan: Plan, rank: int, intervals: torch.Tensor, scale=None):
        self.scale = scale
        self.calls = plan.calls(rank)
        self.masks = [dense_call_mask(plan, call, intervals) for call in self.calls]

    def forward(self, n, q, k, v, out):
        o, lse = reference_attention(q, k, v, self.masks[n], self.scale)
        out.copy_(o)
        return lse

    def backward(self, n, q, k, v, out, lse, dout, dq, dk, dv):
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            o, _ = reference_attention(*leaves, self.masks[n], self.scale)
            for dst, g in zip((dq, dk, dv), torch.autograd.grad(o, leaves, dout)):
                dst.copy_(g)


# --------------------------------------------------------------------------
# The exchange and the autograd function.
# --------------------------------------------------------------------------

def _merge(ranges):
    """Sorted, merged [start, end) ranges."""
    out = []
    for a, z in sorted(r for r in ranges if r[0] < r[1]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], z))
        else:
            out.append((a, z))
    return out


def received(plan: Plan, rank: int) -> list:
    """(chunk, start, end): the keys `rank` receives, per chunk of another
    rank whose keys its calls see: the part of that chunk inside the key
    ranges of its calls (the hull over them), in chunk order."""
    hulls = {}
    for call in plan.calls(rank):
        for d in range(plan.num_chunks):
            if plan.owner[d] == rank or not bool(plan.visible[call.chunks, d].any()):
                continue
            a = max(call.key_start, plan.bounds[d])
            z = min(call.key_end, plan.bounds[d + 1])
            if a < z:
                h = hulls.get(d, (a, z))
                hulls[d] = (min(h[0], a), max(h[1], z))
    return [(d, a, z) for d, (a, z) in sorted(hulls.items())]


class ContextParallel:
    """Attention of this rank's rows in a context-parallel group, forward and
    backward (autograd). `chunks`: the local calls (CmaskChunks, made from
    the mask and metadata when not given, or ReferenceChunks).

    Keys: a call whose keys lie in its own segment reads the rank's own k
    and v in place; the others read a buffer that holds their key ranges
    and what the rank receives (own rows copied in, other ranks' rows
    received, the rows of chunks they do not see zeroed), laid out range
    after range. Gradients of keys: an exclusive call writes them in place;
    the others add them into fp32 accumulators over their key ranges and the
    received ranges, whose rows of other ranks go back to their owners.

    Every rank of the group takes part in each exchange, also one with
    nothing to send or receive, and the group's first use runs a barrier
    (NCCL sets a communicator up in the first collective, which every rank
    must join)."""

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
        self.backend = chunks
        self.calls = chunks.calls
        self.mine = plan.chunks(self.rank)
        self.recv = received(plan, self.rank)
        # What this rank sends each other rank: the ranges of its chunks the
        # other receives, in the order it receives them.
        self.send = {r: [(d, a, z) for d, a, z in received(plan, r)
                         if plan.owner[d] == self.rank]
                     for r in range(plan.world_size) if r != self.rank}
        self.local = [self._in_own_chunk(call) for call in self.calls]
        # The key buffer: the rows the calls that need it read, and what the
        # rank receives (a hull per chunk, which may span rows no call reads).
        self.buffer_ranges = _merge(
            [(c.key_start, c.key_end) for c, loc in zip(self.calls, self.local) if loc is None] +
            [(a, z) for _, a, z in self.recv])
        self.buffer_at, at = [], 0
        for a, z in self.buffer_ranges:
            self.buffer_at.append(at)
            at += z - a
        self.buffer_rows = at
        got = {(a, z) for _, a, z in self.recv}
        own = [(plan.bounds[c], plan.bounds[c + 1]) for c in self.mine]
        self.copy_in, self.zero = [], []
        for a, z in self.buffer_ranges:
            for d in range(plan.num_chunks):
                x, y = max(a, plan.bounds[d]), min(z, plan.bounds[d + 1])
                if x >= y:
                    continue
                if (plan.bounds[d], plan.bounds[d + 1]) in own:
                    self.copy_in.append((x, y))
                elif not any(r0 <= x and y <= r1 for r0, r1 in got):
                    self.zero.append((x, y))
        # fp32 gradient accumulators: the keys of the non-exclusive calls, the
        # ranges received and the own rows other ranks receive. Own rows an
        # exclusive call writes in place are not written back from them (a
        # received hull may hold such rows, whose gradients come back zero).
        self.acc_ranges = _merge(
            [(c.key_start, c.key_end) for c in self.calls if not c.exclusive] +
            [(a, z) for _, a, z in self.recv] +
            [(a, z) for sends in self.send.values() for _, a, z in sends])
        exclusive = _merge((c.key_start, c.key_end) for c in self.calls if c.exclusive)
        self.write_back = [
            (x, y) for a0, z0 in self.acc_ranges for ch in self.mine
            for x, y in _subtract((max(a0, plan.bounds[ch]), min(z0, plan.bounds[ch + 1])),
                                  exclusive)]
        covered = _merge(exclusive + self.acc_ranges)
        self.unseen = [r for ch in self.mine
                       for r in _subtract((plan.bounds[ch], plan.bounds[ch + 1]), covered)]
        self.messages = 0  # tensors this rank sent (the tests count them)
        key = id(group) if group is not None else None
        if key not in _GROUPS_USED:  # NCCL's communicator: every rank joins
            dist.barrier(group)
            _GROUPS_USED.add(key)

    # ---------------------------------------------------------------- layout
    def _local(self, start: int, end: int) -> slice:
        """The local rows of global rows [start, end) (inside one own
        segment)."""
        for seg in self.plan.segments(self.rank):
            s, e = self.plan.bounds[seg[0]], self.plan.bounds[seg[-1] + 1]
            if s <= start and end <= e:
                base = self.plan.local_start(self.rank, seg[0]) - s
                return slice(base + start, base + end)
        raise ValueError(f"cmask: rows [{start}, {end}) are not in one segment of rank "
                         f"{self.rank}")

    def _buf(self, start: int, end: int) -> slice:
        """The key buffer's rows of global keys [start, end) (inside one of
        its ranges)."""
        for (a, z), at in zip(self.buffer_ranges, self.buffer_at):
            if a <= start and end <= z:
                return slice(at + start - a, at + end - a)
        raise AssertionError(f"no range of the key buffer holds keys [{start}, {end})")

    def _in_own_chunk(self, call):
        try:
            return self._local(call.key_start, call.key_end)
        except ValueError:
            return None

    def _peer(self, rank: int) -> int:
        """The global rank of the group's `rank`."""
        return dist.get_global_rank(self.group, rank) if self.group is not None else rank

    def _exchange(self, sends, recvs):
        """Starts point-to-point transfers: sends [(tensor, peer)], recvs
        [(tensor, peer)], matched per peer pair in the order both sides list
        them; returns the function that waits for them (over NCCL: makes the
        current stream wait, so work queued before it overlaps them). Over
        gloo, CUDA tensors travel through host copies (gloo sends host
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
        reqs = dist.batch_isend_irecv(ops) if ops else []

        def finish():
            for req in reqs:
                req.wait()
            for device, host in staged:
                device.copy_(host)
        return finish

    # --------------------------------------------------------------- forward
    def gather_keys(self, k, v):
        """The key buffers (empty when no call needs them) and the function
        that waits for the exchange filling them, which every rank joins."""
        kg = k.new_empty((self.buffer_rows,) + tuple(k.shape[1:]))
        vg = v.new_empty((self.buffer_rows,) + tuple(v.shape[1:]))
        for a, z in self.copy_in:
            kg[self._buf(a, z)] = k[self._local(a, z)]
            vg[self._buf(a, z)] = v[self._local(a, z)]
        for a, z in self.zero:  # never seen: zeros, so no stale NaN reaches P @ V
            kg[self._buf(a, z)] = 0
            vg[self._buf(a, z)] = 0
        sends = [(t[self._local(a, z)], r) for r, ranges in self.send.items()
                 for _, a, z in ranges for t in (k, v)]
        recvs = [(t[self._buf(a, z)], self.plan.owner[d]) for d, a, z in self.recv
                 for t in (kg, vg)]
        return kg, vg, self._exchange(sends, recvs)

    def _keys(self, n, k, v, kg, vg):
        call, loc = self.calls[n], self.local[n]
        if loc is not None:
            return k[loc], v[loc]
        keys = self._buf(call.key_start, call.key_end)
        return kg[keys], vg[keys]

    def forward(self, q, k, v):
        kg, vg, received = self.gather_keys(k, v)
        out = torch.empty_like(q)
        lses = [None] * len(self.calls)
        # The calls on the rank's own keys run while the keys travel.
        in_place = [n for n in range(len(self.calls)) if self.local[n] is not None]
        rest = [n for n in range(len(self.calls)) if self.local[n] is None]
        for n in in_place + [None] + rest:
            if n is None:
                received()
                continue
            call = self.calls[n]
            rows = self._local(call.row_start, call.row_end)
            kc, vc = self._keys(n, k, v, kg, vg)
            lses[n] = self.backend.forward(n, q[rows], kc, vc, out[rows])
        return out, kg, vg, lses

    # -------------------------------------------------------------- backward
    def backward(self, q, k, v, kg, vg, out, lses, dout):
        acc_dtype = torch.float64 if k.dtype == torch.float64 else torch.float32
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        acc = [(a, z, k.new_zeros((z - a,) + tuple(k.shape[1:]), dtype=acc_dtype),
                v.new_zeros((z - a,) + tuple(v.shape[1:]), dtype=acc_dtype))
               for a, z in self.acc_ranges]

        def accumulator(a, z):
            for a0, z0, ka, va in acc:
                if a0 <= a and z <= z0:
                    return ka[a - a0:z - a0], va[a - a0:z - a0]
            raise AssertionError(f"no accumulator holds keys [{a}, {z})")

        def run(n):
            call = self.calls[n]
            rows = self._local(call.row_start, call.row_end)
            kc, vc = self._keys(n, k, v, kg, vg)
            if call.exclusive:  # its keys' gradients come from it alone
                keys = self.local[n]
                self.backend.backward(n, q[rows], kc, vc, out[rows], lses[n],
                                      dout[rows].contiguous(), dq[rows], dk[keys], dv[keys])
                return
            dkc, dvc = torch.empty_like(kc), torch.empty_like(vc)
            self.backend.backward(n, q[rows], kc, vc, out[rows], lses[n],
                                  dout[rows].contiguous(), dq[rows], dkc, dvc)
            ka, va = accumulator(call.key_start, call.key_end)
            ka += dkc
            va += dvc

        # The calls that feed the accumulators first; the exclusive ones run
        # while the gradients travel.
        for n, call in enumerate(self.calls):
            if not call.exclusive:
                run(n)
        # Other ranks' keys go back to their owners; our rows others saw come
        # back from each of them.
        sends = []
        for d, a, z in self.recv:
            ka, va = accumulator(a, z)
            sends += [(ka, self.plan.owner[d]), (va, self.plan.owner[d])]
        inbox = [(a, z, torch.empty_like(accumulator(a, z)[0]),
                  torch.empty_like(accumulator(a, z)[1]), r)
                 for r, ranges in self.send.items() for _, a, z in ranges]
        returned = self._exchange(
            sends, [(t, r) for _, _, dk_r, dv_r, r in inbox for t in (dk_r, dv_r)])
        for n, call in enumerate(self.calls):
            if call.exclusive:
                run(n)
        returned()
        for a, z, dk_r, dv_r, _ in inbox:
            ka, va = accumulator(a, z)
            ka += dk_r
            va += dv_r
        for a, z in self.write_back:  # own rows of the accumulators
            ka, va = accumulator(a, z)
            dk[self._local(a, z)] = ka
            dv[self._local(a, z)] = va
        for a, z in self.unseen:  # keys no row sees
            dk[self._local(a, z)] = 0
            dv[self._local(a, z)] = 0
        return dq, dk, dv

    def attention(self, q, k, v):
        """out [local rows, H, D] of this rank's rows (q, k, v: its local
        tokens, [local rows, H or H_kv, D], its chunks in order), with autograd."""
        return _ContextParallelAttention.apply(q, k, v, self)


def _subtract(span, ranges):
    """span minus the merged `ranges`, as ranges."""
    a, z = span
    out = []
    for r0, r1 in ranges:
        if r1 <= a or r0 >= z:
            continue
        if r0 > a:
            out.append((a, r0))
        a = max(a, r1)
    if a < z:
        out.append((a, z))
    return out


# The process groups a ContextParallel has run its first barrier on.
_GROUPS_USED: set = set()


class _ContextParallelAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, cp):
        # Contiguous: the calls write out in place, NCCL sends whole rows.
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        out, kg, vg, lses = cp.forward(q, k, v)
        ctx.cp, ctx.lses, ctx.buffers = cp, lses, (kg, vg)
        ctx.save_for_backward(q, k, v, out)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out = ctx.saved_tensors
        kg, vg = ctx.buffers
        dq, dk, dv = ctx.cp.backward(q, k, v, kg, vg, out, ctx.lses, dout)
        return dq, dk, dv, None
