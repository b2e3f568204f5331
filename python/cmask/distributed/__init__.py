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

The package: plan.py (the plan and each rank's calls), local.py (a call on
cmask's kernels or the float64 reference), exchange.py (the transfers and
the autograd function).
"""

from .exchange import ContextParallel
from .local import CmaskChunks, ReferenceChunks, dense_call_mask, reference_attention
from .plan import (Call, Plan, calls_of, plan_batch, plan_intervals, received,
                   slice_metadata)

__all__ = ["Call", "CmaskChunks", "ContextParallel", "Plan", "ReferenceChunks", "calls_of",
           "dense_call_mask", "plan_batch", "plan_intervals", "received",
           "reference_attention", "slice_metadata"]
