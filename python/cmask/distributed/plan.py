"""The plan of a context-parallel batch: chunks, their owners, the chunk
pairs that see each other, each rank's attention calls and the key ranges
it receives (pure torch, any device; the same on every rank)."""

from __future__ import annotations

import dataclasses

import torch


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
    from .. import _capi
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
            continue
        if cu[b] >= s and cu[b + 1] <= e:  # whole (empty ones inside too)
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
