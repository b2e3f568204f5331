"""Backward attention on the GPU against float64 autograd (issue 5).

The backward kernels are built but not yet validated: this file is what
validates them (it sets CMASK_UNVALIDATED_BACKWARD=1, which autograd needs
until they are). Same requirements and artifacts as test_attention.py.
"""

from __future__ import annotations

import math
import os

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
    pytest.skip("the attention kernels need an sm_90 GPU", allow_module_level=True)
os.environ["CMASK_UNVALIDATED_BACKWARD"] = "1"

from test_attention import (DEV, TOL, batch_for, clear_lens, load, packed_inputs,  # noqa: E402
                            reference, rel)


def reference_grads(name, batch, q, k, v, cu_q, cu_k, scale, dout, dtype=None):
    """dq, dk, dv of sum(out * dout): float64 (dtype None) or PyTorch's math SDPA
    in `dtype`; rows that see nothing contribute nothing."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    masks = reference.reference_batch(name, batch)
    H, Hk = q.shape[1], k.shape[1]
    work = [t.detach().to(dtype or torch.float64).requires_grad_() for t in (q, k, v)]
    cq, ck = cu_q.tolist(), cu_k.tolist()
    outs = []
    for b_, m in enumerate(masks):
        mask = torch.from_numpy(m).to(DEV)
        qs, ks, vs = (t[None].transpose(1, 2) for t in
                      (work[0][cq[b_]:cq[b_ + 1]], work[1][ck[b_]:ck[b_ + 1]],
                       work[2][ck[b_]:ck[b_ + 1]]))
        if dtype is None:
            ks, vs = ks.repeat_interleave(H // Hk, 1), vs.repeat_interleave(H // Hk, 1)
            s = (qs @ ks.transpose(-1, -2)) * scale
            s = s.masked_fill(~mask, float("-inf"))
            p = torch.softmax(s, -1).nan_to_num(0.0)
            o = p @ vs
        else:
            with sdpa_kernel(SDPBackend.MATH):
                o = torch.nn.functional.scaled_dot_product_attention(
                    qs, ks, vs, attn_mask=mask, scale=scale, enable_gqa=H != Hk)
            o = o.nan_to_num(0.0)
        outs.append(o[0].transpose(0, 1))
    out = torch.cat(outs)
    (out * dout.to(out.dtype)).sum().backward()
    return [t.grad.double().nan_to_num(0.0) for t in work]


def check_grads(name, batch, dtype=torch.bfloat16, heads=4, kv_heads=None, dim=128):
    m = load(name)
    q, k, v, cu_q, cu_k = packed_inputs(batch, heads, kv_heads, dim, dtype,
                                        seed=int.from_bytes(os.urandom(4), "little"))
    scale = 1.0 / math.sqrt(dim)
    kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
              max_seqlen_q=max(s["q_len"] for s in batch["sequences"]),
              max_seqlen_k=max(s["k_len"] for s in batch["sequences"]))
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    out = m.attention(qg, kg, vg, **kw, **batch["metadata"])
    dout = torch.randn_like(out)
    out.backward(dout)
    ref = reference_grads(name, batch, q, k, v, cu_q, cu_k, scale, dout)
    base = reference_grads(name, batch, q, k, v, cu_q, cu_k, scale, dout, dtype=dtype)
    for label, got, r, b_ in zip(("dq", "dk", "dv"), (qg.grad, kg.grad, vg.grad), ref, base):
        assert not torch.isnan(got).any(), f"{name}: NaN in {label}"
        err, err_math = rel(got, r), rel(b_, r)
        print(f"{name} {dtype} D={dim} H={heads}/{kv_heads or heads}: {label} relFro "
              f"{err:.3e} (math {err_math:.3e})")
        assert err <= TOL[dtype], f"{name}: {label} relFro {err:.3e}"
        assert err <= 2 * err_math + 1e-6, f"{name}: {label} {err:.3e} > 2 x {err_math:.3e}"
    return qg.grad, kg.grad, vg.grad


CATALOG = ["causal", "sliding_window", "document", "causal_document", "prefix_lm",
           "reward_model", "hstu", "clear"]


@pytest.mark.parametrize("name", CATALOG)
def test_catalog_bf16_d128_varlen(name):
    lens = clear_lens() if name == "clear" else [300, 1000, 517]
    check_grads(name, batch_for(name, lens))


def test_fp16_d64_and_gqa():
    check_grads("hstu", batch_for("hstu", [700, 129]), dtype=torch.float16, dim=64)
    check_grads("reward_model", batch_for("reward_model", [640, 333]), heads=8, kv_heads=2)
    check_grads("causal", batch_for("causal", [640, 333]), heads=8, kv_heads=1)


def test_rows_that_see_nothing_have_zero_gradients():
    b = batch_for("sliding_window", [300, 77])
    b["metadata"]["window"] = -1
    dq, dk, dv = check_grads("sliding_window", b)
    assert (dq == 0).all() and (dk == 0).all() and (dv == 0).all()


def test_without_the_gate_backward_is_refused(monkeypatch):
    monkeypatch.delenv("CMASK_UNVALIDATED_BACKWARD")
    m = load("causal")
    q = torch.randn(1, 256, 2, 64, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    with pytest.raises(NotImplementedError, match="not yet validated"):
        m.attention(q, q, q).sum().backward()
