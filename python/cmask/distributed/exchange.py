"""The exchange of keys and their gradients between the ranks, and the
autograd function of context-parallel attention."""

from __future__ import annotations

import torch
import torch.distributed as dist

from .local import CmaskChunks
from .plan import Plan, received


def _merge(ranges):
    """Sorted, merged [start, end) ranges."""
    out = []
    for a, z in sorted(r for r in ranges if r[0] < r[1]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], z))
        else:
            out.append((a, z))
    return out


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
