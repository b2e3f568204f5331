"""A rank's attention calls: cmask's kernels on windowed descriptors, or a
float64 reference (the CPU tests)."""

from __future__ import annotations

import torch

from .plan import Call, Plan, slice_metadata


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
        from ..mask import _forward
        _, lse = _forward(self.mask, q, k, v, self.prepared[n], self.scale, None, None,
                          out=out)
        return lse

    def backward(self, n, q, k, v, out, lse, dout, dq, dk, dv):
        """Call n's gradients, written into dq, dk, dv."""
        from ..mask import _launch_backward
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
