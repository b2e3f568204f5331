"""PyTorch's own context parallelism for FlexAttention (torch 2.11): the peer
of cmask.distributed in bench_context_parallel.py.

What torch 2.11 provides (paths under torch/distributed/tensor/experimental/;
_attention.py there is a re-export stub of _context_parallel/):

* The flex path is all-gather CP, not a ring: _ContextParallel(seq_dim,
  AttentionType.FLEX) (_context_parallel/_attention.py:1304) applied to a
  module by parallelize_module registers flex_input_fn (1334-1362) as a
  forward pre-hook. It swaps the module's key/value for the whole sequence,
  all-gathered by the custom op cplib::flex_cp_allgather
  (_context_parallel/_cp_custom_ops.py:8; its autograd, 36-88, reduce-scatters
  dK/dV back to their owners). The query stays local. The module then runs
  plain flex_attention on the local queries against the global K/V.
* The BlockMask for a rank's query shard comes from _create_cp_block_mask
  (_attention.py:1162), called by _context_parallel_shard (1406, via
  _context_parallel_buffers 1053-1159) when a BlockMask is among the buffers.
  It rewrites the mask_mod (1225-1268) so that a local query index and a
  gathered key index map back, through the load balancer's permutation, to
  the original global indices. Then it builds the mask with its own
  torch.compile(create_block_mask, dynamic=False, fullgraph=True) (1220).
  It requires Q_LEN % (world * 128) == 0 (1212): we pad the token axis to
  that multiple. Pad tokens see only themselves, no real token sees them,
  and they are dropped on unshard.
* Load balancers (_context_parallel/_load_balancer.py): _HeadTailLoadBalancer
  (78), _PerDocumentHeadTailLoadBalancer (177: every document's length must
  be a multiple of 2 * world, which arbitrary packed lengths are not) and
  _PTRRLoadBalancer (304: "should only be used for flex_attention()", deals
  whole 128-blocks of the global BlockMask to ranks by their non-empty-block
  counts). Here "causal" uses HeadTail and "hstu" uses PTRR. Set
  CMASK_CP_FLEX_LB=none|headtail|ptrr to override.
* context_parallel() (1498) and the DTensor ring dispatcher are the SDPA
  path only (they monkey-patch F.scaled_dot_product_attention). The flex
  path does not use them. set_rotate_method logs "FlexAttention CP doesn't
  support alltoall yet" (1685).
* Packed varlen documents: there is no cu_seqlens API. The documents are
  expressed in the mask_mod over one B=1 sequence of all tokens (the same
  as torch's own test_cp_flex_attention_document_mask in
  test/distributed/tensor/test_attention.py, which this follows: wrapper
  module + _ContextParallel(FLEX) + _context_parallel_shard +
  context_parallel_unshard). So "hstu" is supported.
* GQA: the all-gather is head-agnostic, and flex_attention(enable_gqa=True)
  (torch/nn/attention/flex_attention.py:1468/1475) broadcasts the K/V heads.
  So K/V keep kv_heads heads and are not repeated.
* Compilation: CP does not require a compiled flex_attention (the hook only
  changes the inputs), but uncompiled flex builds the full score matrix. We
  use torch.compile(flex_attention, dynamic=False) as torch's test and
  peers.py do. The all-gather hook runs eagerly outside it. The kernel is
  Triton (BACKEND "AUTO"). CMASK_CP_FLEX_BACKEND=FLASH etc. passes
  kernel_options={"BACKEND": ...} (not tested).

Layout: shard(t) takes the global [total, H, D] and returns this rank's
[1, H, Lp / world, D] (bhld, B=1, Lp = total padded to world*128, rows in the
load balancer's order). unshard(x), an attribute of shard, inverts it to
[total, H, D].

Nothing here enables NVLS or symmetric-memory multicast.

Checked (benchmarks/cp_flex_peer_selftest.py): 2 ranks on gloo/CPU, forward
only (compiled flex has no CPU backward), and 1 rank on an H200 with NCCL,
forward and backward. Not yet run: 2 ranks on GPUs.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import torch
import torch.distributed as dist
import torch.nn.functional as F

FLEX_BLOCK = 128  # torch.nn.attention.flex_attention._DEFAULT_SPARSE_BLOCK_SIZE

_COMPILED = {}


def _compiled(name):
    """torch.compile(flex_attention / create_block_mask), once per process,
    with dynamo's recompile limits raised: one graph per length and mask."""
    if name not in _COMPILED:
        import torch._dynamo
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        cfg = torch._dynamo.config
        cfg.recompile_limit = max(cfg.recompile_limit, 256)
        cfg.accumulated_recompile_limit = max(cfg.accumulated_recompile_limit, 4096)
        if name == "flex":
            _COMPILED[name] = torch.compile(flex_attention, dynamic=False)
        else:
            _COMPILED[name] = torch.compile(create_block_mask, dynamic=False, fullgraph=True)
    return _COMPILED[name]


def padded_len(total, world):
    m = world * FLEX_BLOCK
    return -(-total // m) * m


def token_tables(cu_seqlens, context, num_targets, padded):
    """Per-token int32 tables over the padded packed axis: the sequence id
    (len(cu) - 1 for padding), its start and its absolute hist_end. Pure
    python plus torch on CPU, so it can be checked without a GPU."""
    nseq = len(cu_seqlens) - 1
    lens = [cu_seqlens[b + 1] - cu_seqlens[b] for b in range(nseq)]
    total = cu_seqlens[-1]
    doc = torch.full((padded,), nseq, dtype=torch.int32)
    start = torch.full((padded,), total, dtype=torch.int32)
    hend = torch.full((padded,), total, dtype=torch.int32)
    for b in range(nseq):
        s, e = cu_seqlens[b], cu_seqlens[b + 1]
        doc[s:e] = b
        start[s:e] = s
        hend[s:e] = s + lens[b] - int(num_targets[b])
    return doc, start, hend


def hstu_mask_mod(doc, start, hend, context, total):
    """The packed HSTU mask over absolute indices (first matching row class):
    contextual rows (i < c) see j < hist_end; history rows (i < hist_end) see
    j < c or c <= j <= i; target rows see j < hist_end or j == i; nothing
    across sequences. Padding rows (>= total) see themselves only."""
    def mm(b, h, q, k):
        s = start[q]
        e = hend[q]
        c_end = s + context
        see_ctx = k < e
        see_hist = (k < c_end) | ((k >= c_end) & (k <= q))
        see_tgt = (k < e) | (k == q)
        m = torch.where(q < c_end, see_ctx, torch.where(q < e, see_hist, see_tgt))
        m = m & (doc[q] == doc[k])
        return torch.where(q >= total, k == q, m)
    return mm


def causal_mask_mod(b, h, q, k):
    # Padding rows sit after all real rows and only real rows are kept, so
    # plain causal stays exact with padding.
    return k <= q


class _FlexModule(torch.nn.Module):
    """What _ContextParallel(FLEX) hooks: forward(query, key, value, **kw)
    with flex_attention's signature."""

    def __init__(self, kernel_options=None):
        super().__init__()
        self.kernel_options = kernel_options

    def forward(self, query, key, value, **kw):
        if self.kernel_options:
            kw["kernel_options"] = self.kernel_options
        return _compiled("flex")(query, key, value, **kw)


def build_flex_cp(kind, cu_seqlens, heads, kv_heads, dim, group, *, context=0,
                  num_targets=None, device_type=None):
    """Everything make_flex_cp builds, as a namespace (shard, unshard, fwd,
    fwd_bwd, mesh, load_balancer, block_mask, global_block_mask, ...)."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor.experimental._attention import (
        _context_parallel_shard,
        _ContextParallel,
        _cp_options,
        _HeadTailLoadBalancer,
        _PTRRLoadBalancer,
        context_parallel_unshard,
    )
    from torch.distributed.tensor.parallel import parallelize_module

    cu = [int(x) for x in cu_seqlens]
    if cu[0] != 0 or any(b < a for a, b in zip(cu, cu[1:])):
        raise ValueError(f"bad cu_seqlens {cu[:8]}...")
    total = cu[-1]
    if kind == "causal":
        if len(cu) != 2:
            raise ValueError("causal: cu_seqlens must be [0, L]")
    elif kind == "hstu":
        if num_targets is None or len(num_targets) != len(cu) - 1:
            raise ValueError("hstu: num_targets needs one entry per sequence")
    else:
        raise ValueError(f"unknown kind {kind!r}")
    if heads % kv_heads:
        raise ValueError(f"heads {heads} not a multiple of kv_heads {kv_heads}")

    group = group if group is not None else dist.distributed_c10d._get_default_group()
    if device_type is None:
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device_type, torch.cuda.current_device()) \
        if device_type == "cuda" else torch.device(device_type)
    mesh = DeviceMesh.from_group(group, device_type, mesh_dim_names=("cp",))
    world = mesh.size()
    Lp = padded_len(total, world)

    if kind == "causal":
        mm = causal_mask_mod
    else:
        doc, start, hend = (t.to(device) for t in token_tables(cu, context, num_targets, Lp))
        mm = hstu_mask_mod(doc, start, hend, int(context), total)

    # The global BlockMask (B=1, H=1: the same for all heads), built once: CP
    # reads its mask_mod and shape, and PTRR its block counts.
    global_bm = _compiled("block_mask")(mm, 1, 1, Lp, Lp, device=device,
                                        BLOCK_SIZE=FLEX_BLOCK)

    lb_name = os.environ.get("CMASK_CP_FLEX_LB", "auto")
    if lb_name == "auto":
        lb_name = "headtail" if kind == "causal" else "ptrr"
    if lb_name == "none":
        lb = None
    elif lb_name == "headtail":
        lb = _HeadTailLoadBalancer(Lp, world, device)
    elif lb_name == "ptrr":
        lb = _PTRRLoadBalancer(global_bm, world)
    else:
        raise ValueError(f"CMASK_CP_FLEX_LB={lb_name!r}")

    # This rank's BlockMask: its query shard against the gathered K/V.
    (cp_bm,) = _context_parallel_shard(mesh, [global_bm], [2], load_balancer=lb)

    backend = os.environ.get("CMASK_CP_FLEX_BACKEND")
    attn = parallelize_module(
        _FlexModule({"BACKEND": backend} if backend else None), mesh,
        _ContextParallel(seq_dim=2, attention_type=_ContextParallel.AttentionType.FLEX))
    gqa = heads != kv_heads

    def shard(t):
        """Global [total, h, D] -> this rank's [1, h, Lp/world, D]."""
        if t.dim() != 3 or t.shape[0] != total:
            raise ValueError(f"expected [{total}, H, D], got {tuple(t.shape)}")
        x = t.transpose(0, 1).unsqueeze(0)
        if Lp != total:
            x = F.pad(x, (0, 0, 0, Lp - total))
        (local,) = _context_parallel_shard(mesh, [x.contiguous()], [2], load_balancer=lb)
        return local.contiguous()

    def unshard(x):
        """This rank's [1, h, Lp/world, D] -> the global [total, h, D]
        (all ranks call it)."""
        _cp_options.enable_load_balance = lb is not None
        (full,) = context_parallel_unshard(mesh, [x.detach().contiguous()], [2],
                                           load_balancer=lb)
        return full[0, :, :total].transpose(0, 1).contiguous()

    def fwd(q, k, v):
        with torch.no_grad():
            return attn(q, k, v, block_mask=cp_bm, enable_gqa=gqa)

    def fwd_bwd(q, k, v, dout):
        attn(q, k, v, block_mask=cp_bm, enable_gqa=gqa).backward(dout)

    shard.unshard = unshard
    return SimpleNamespace(shard=shard, unshard=unshard, fwd=fwd, fwd_bwd=fwd_bwd,
                           mesh=mesh, world=world, total=total, padded=Lp,
                           load_balancer=lb, lb_name=lb_name, block_mask=cp_bm,
                           global_block_mask=global_bm, mask_mod=mm, module=attn)


def make_flex_cp(kind, cu_seqlens, heads, kv_heads, dim, group, *, context=0, num_targets=None):
    """Returns (shard, fwd, fwd_bwd) for PyTorch's context parallelism of
    FlexAttention over the process group `group` (all ranks call it; None:
    the default group).
    kind: "causal" (cu_seqlens = [0, L]: one causal sequence) or "hstu"
    (a packed batch of sequences given by cu_seqlens, a python list of ints,
    with the HSTU mask). shard(t): this rank's shard of a global
    [total_tokens, H, D] tensor as [1, H, Lp/world, D] (bhld, padded, in the
    load balancer's order); shard.unshard(x) inverts it. fwd(q, k, v) -> out
    [1, H, Lp/world, D] under no_grad; fwd_bwd(q, k, v, dout) -> None runs
    forward and backward (the caller makes q, k, v require grad). The
    BlockMask is built here, once.
    """
    ns = build_flex_cp(kind, cu_seqlens, heads, kv_heads, dim, group, context=context,
                       num_targets=num_targets)
    return ns.shard, ns.fwd, ns.fwd_bwd
