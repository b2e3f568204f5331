"""Backward attention on the GPU against float64 autograd (issue 5).

Same requirements and artifacts as test_attention.py (DESIGN.md's bounds:
relFro <= 1e-2 bf16 / 3e-3 fp16 and <= 2x PyTorch's math attention in the
input dtype).
"""

from __future__ import annotations

import math
import os

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
    pytest.skip("the attention kernels need an sm_90 GPU", allow_module_level=True)

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


def poison_allocator(*tensors):
    """Frees NaN-filled blocks of the tensors' sizes, so that the op's own
    torch.empty outputs (dq, dk, dv) start as NaN: an element the kernels do
    not write shows up."""
    blocks = [torch.full_like(t, float("nan")) for t in tensors for _ in range(2)]
    del blocks


def check_grads(name, batch, dtype=torch.bfloat16, heads=4, kv_heads=None, dim=128,
                deterministic=False):
    q, k, v, cu_q, cu_k = packed_inputs(batch, heads, kv_heads, dim, dtype,
                                        seed=int.from_bytes(os.urandom(4), "little"))
    kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
              max_seqlen_q=max(s["q_len"] for s in batch["sequences"]),
              max_seqlen_k=max(s["k_len"] for s in batch["sequences"]))
    return compare_grads(name, batch, q, k, v, cu_q, cu_k, kw, 1.0 / math.sqrt(dim),
                         deterministic=deterministic)


def compare_grads(name, batch, q, k, v, cu_q, cu_k, kw, scale, explicit_scale=False,
                  deterministic=False):
    """cmask's gradients of q, k, v (packed, or batched [B, L, H, D] with kw
    empty) against the float64 reference; returns them packed."""
    m = load(name)
    dtype, dim = q.dtype, q.shape[-1]
    heads, kv_heads = q.shape[-2], k.shape[-2]
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    out = m.attention(qg, kg, vg, scale=scale if explicit_scale else None, **kw,
                      deterministic=deterministic, **batch["metadata"])
    dout = torch.randn_like(out)
    poison_allocator(q, k, v)
    out.backward(dout)
    packed = [t.reshape(-1, t.shape[-2], dim) for t in (q, k, v, dout, qg.grad, kg.grad,
                                                        vg.grad)]
    q, k, v, dout = packed[:4]
    ref = reference_grads(name, batch, q, k, v, cu_q, cu_k, scale, dout)
    base = reference_grads(name, batch, q, k, v, cu_q, cu_k, scale, dout, dtype=dtype)
    failures = []
    for label, got, r, b_ in zip(("dq", "dk", "dv"), packed[4:], ref, base):
        if torch.isnan(got).any():
            failures.append(f"NaN in {label}")
            continue
        err, err_math = rel(got, r), rel(b_, r)
        print(f"{name} {dtype} D={dim} H={heads}/{kv_heads or heads}"
              f"{' deterministic' if deterministic else ''}: {label} relFro "
              f"{err:.3e} (math {err_math:.3e})")
        if err > TOL[dtype] or err > 2 * err_math + 1e-6:
            failures.append(f"{label} relFro {err:.3e} (bound {TOL[dtype]:.0e}, "
                            f"math {err_math:.3e})")
    assert not failures, f"{name}: " + "; ".join(failures)
    return packed[4:]


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


def test_dq_accumulator_on_both_sides_of_the_first_store_rule():
    """abi::backward::firstStoreFor: ungrouped heads at D = 128 store each dQ
    unit's first contribution up to 4096-token query sequences and add to a
    zeroed accumulator past them (max_seqlen_q 4097 and more)."""
    check_grads("causal", batch_for("causal", [4096, 300]), heads=2)
    check_grads("causal", batch_for("causal", [4097, 300]), heads=2)
    check_grads("hstu", batch_for("hstu", [4500, 700]), heads=2)


def test_rows_that_see_nothing_have_zero_gradients():
    b = batch_for("sliding_window", [300, 77])
    b["metadata"]["window"] = -1
    dq, dk, dv = check_grads("sliding_window", b)
    assert (dq == 0).all() and (dk == 0).all() and (dv == 0).all()


def test_cross_attention_lengths():
    check_grads("causal", batch_for("causal", [200, 700], [900, 150]))
    check_grads("prefix_lm", batch_for("prefix_lm", [129, 300], [1000, 64]))


def test_batched_layout_and_scale():
    B, L, H, D = 2, 640, 4, 64
    q, k, v = (torch.randn(B, L, H, D, device=DEV, dtype=torch.bfloat16) for _ in range(3))
    batch = {"sequences": [{"q_len": L, "k_len": L}] * B,
             "metadata": {"context": 16, "num_targets": [80, 0]}}
    cu = torch.arange(0, (B + 1) * L, L, dtype=torch.int32, device=DEV)
    compare_grads("hstu", batch, q, k, v, cu, cu, {}, 0.3, explicit_scale=True)


def _inputs(L=700, H=4, Hk=2, D=128):
    g = torch.Generator(device=DEV).manual_seed(int.from_bytes(os.urandom(4), "little"))
    return [torch.randn(1, L, h, D, device=DEV, dtype=torch.bfloat16, generator=g)
            .requires_grad_() for h in (H, Hk, Hk)]


def _grads(f, inputs, dout):
    for t in inputs:
        t.grad = None
    f(*inputs).backward(dout)
    return [t.grad.clone() for t in inputs]


def test_deterministic_dk_dv():
    """dK and dV are summed in a fixed order (bitwise equal run to run); dQ
    with fp32 atomics (equal up to the order of its fp32 sums)."""
    m = load("reward_model")
    inputs = _inputs()
    meta = dict(prompt_len=[100], responses=[[100, 300, 450, 600]])
    dout = torch.randn_like(inputs[0])
    f = lambda q, k, v: m.attention(q, k, v, **meta)  # noqa: E731
    first = _grads(f, inputs, dout)
    for _ in range(3):
        again = _grads(f, inputs, dout)
        assert torch.equal(again[1], first[1]) and torch.equal(again[2], first[2])
        assert rel(again[0], first[0]) < 1e-3


@pytest.mark.parametrize("name", CATALOG)
def test_deterministic_catalog_bf16_d128_varlen(name):
    """deterministic=True: dq from the row pass, same bounds as the default."""
    lens = clear_lens() if name == "clear" else [300, 1000, 517]
    check_grads(name, batch_for(name, lens), deterministic=True)


def test_deterministic_other_axes():
    check_grads("hstu", batch_for("hstu", [700, 129]), dtype=torch.float16, dim=64,
                deterministic=True)
    check_grads("reward_model", batch_for("reward_model", [640, 333]), heads=8, kv_heads=2,
                deterministic=True)
    check_grads("causal", batch_for("causal", [200, 700], [900, 150]), heads=8, kv_heads=1,
                deterministic=True)
    b = batch_for("sliding_window", [300, 77])
    b["metadata"]["window"] = -1
    dq, dk, dv = check_grads("sliding_window", b, deterministic=True)
    assert (dq == 0).all() and (dk == 0).all() and (dv == 0).all()


def test_deterministic_is_bitwise():
    """deterministic=True: dq, dk and dv bitwise equal run to run."""
    m = load("reward_model")
    inputs = _inputs()
    meta = dict(prompt_len=[100], responses=[[100, 300, 450, 600]])
    dout = torch.randn_like(inputs[0])
    f = lambda q, k, v: m.attention(q, k, v, deterministic=True, **meta)  # noqa: E731
    first = _grads(f, inputs, dout)
    for _ in range(3):
        again = _grads(f, inputs, dout)
        for a, b in zip(again, first):
            assert torch.equal(a, b)


def test_gradients_not_16_byte_aligned():
    """The epilogues store 16 bytes per lane where dq, dk, dv and their
    strides allow it and 4-byte pairs otherwise (the C API takes 4-byte
    aligned gradients): outputs 4 bytes off 16-byte alignment get the same
    bits as fresh tensors (deterministic=True, so dq, written by the row
    pass's epilogue, is bitwise too)."""
    from cmask import mask as mm
    m = load("causal")
    q, k, v, cu_q, cu_k = packed_inputs(batch_for("causal", [700, 300]), 4, 2, 128,
                                        torch.bfloat16, seed=7)
    p = m.prepare(q=q, k=k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=700,
                  max_seqlen_k=700, columns=True)
    out, lse = m.attention(q, k, v, prepared=p, return_lse=True)
    dout = torch.randn_like(q)

    def grads(shift):
        outs = []
        for t in (q, k, v):
            buf = torch.full((t.numel() + 8,), float("nan"), device=DEV, dtype=t.dtype)
            outs.append(buf[shift:shift + t.numel()].view(t.shape))
        mm._launch_backward(m, p.descriptor, q, k, v, out, lse, dout, *outs, p.layout, -1.0,
                            True)
        return outs

    fresh, shifted = grads(0), grads(2)
    assert all(t.data_ptr() % 16 == 4 for t in shifted)
    for a, b in zip(fresh, shifted):
        assert not torch.isnan(a).any()
        assert torch.equal(a.view(torch.int16), b.view(torch.int16))


def test_deterministic_errors():
    """deterministic= needs the row pass in the artifact (manifest
    dq_rows_tile_shape), with or without prepared=."""
    m = load("causal")
    q, k, v = (t.detach() for t in _inputs(L=256, Hk=4))
    m.deterministic_backward = False  # as loaded from an artifact without the pass
    try:
        with pytest.raises(ValueError, match="no deterministic dQ pass"):
            m.attention(q, k, v, deterministic=True)
        with pytest.raises(ValueError, match="no deterministic dQ pass"):
            m.attention(q, k, v, prepared=m.prepare(q=q, k=k), deterministic=True)
    finally:
        m.deterministic_backward = True


def interleaved(q_len, k_len, b, metadata):
    """test/gpu/Inputs/interleaved.mlir, brute force: even rows causal; odd
    rows a sink of 16 keys and the 96 keys before them."""
    import numpy as np
    i, j = np.arange(q_len)[:, None], np.arange(k_len)[None, :]
    odd = (j < 16) | ((i - j >= 0) & (i - j <= 96))
    return np.where(i % 2 == 0, j <= i, odd)


reference.REFERENCES["interleaved"] = interleaved


def _interleaved(lens_q, lens_k=None):
    lens_k = lens_k or lens_q
    return {"sequences": [{"q_len": q, "k_len": k} for q, k in zip(lens_q, lens_k)],
            "metadata": {}}


def test_row_intervals():
    """A spec without a column direction (column mode "rows"): the main kernel
    lists each key tile's query tiles from the row direction's tiles and masks
    with the row intervals. Varlen with a sequence past 32 query tiles of 128
    (two rounds of the list's warp), fp16 D=64 with GQA, cross lengths with
    MQA, deterministic=True."""
    m = load("interleaved")
    assert m.manifest["columns"]["mode"] == "rows"
    assert all(k.get("intervals") == "rows" for k in m.manifest["attention"]["kernels"]
               if k["pass"] == "backward")
    check_grads("interleaved", _interleaved([300, 4500, 517]))
    check_grads("interleaved", _interleaved([700, 129]), dtype=torch.float16, dim=64,
                heads=8, kv_heads=2)
    check_grads("interleaved", _interleaved([200, 700], [900, 150]), heads=8, kv_heads=1)
    check_grads("interleaved", _interleaved([300, 1000, 517]), deterministic=True)


def test_row_intervals_longest_query_sequence():
    """Without a column direction, a query sequence longer than the list holds
    is refused before anything runs, with the limit."""
    m = load("interleaved")
    limit = next(k["max_seqlen_q"] for k in m.manifest["attention"]["kernels"]
                 if k["pass"] == "backward")
    q, k, v = (t.detach().requires_grad_() for t in _inputs(L=256, Hk=4))
    cu = torch.tensor([0, 256], dtype=torch.int32, device=DEV)
    out = m.attention(q[0], k[0], v[0], cu_seqlens_q=cu, cu_seqlens_k=cu,
                      max_seqlen_q=limit + 1, max_seqlen_k=256)
    with pytest.raises(RuntimeError, match=f"at most {limit} tokens"):
        out.sum().backward()


def test_torch_compile_backward():
    m = load("hstu")
    inputs = _inputs()
    dout = torch.randn_like(inputs[0])

    def f(q, k, v):
        return m.attention(q, k, v, context=8, num_targets=[90]) * 2

    compiled = torch.compile(f, fullgraph=True)  # fails on a graph break
    got, want = _grads(compiled, inputs, dout), _grads(f, inputs, dout)
    torch.testing.assert_close(got[1:], want[1:], rtol=0, atol=0)
    assert rel(got[0], want[0]) < 1e-3


def test_opcheck():
    """torch.library.opcheck: schema, fake (meta) implementations, autograd
    registration and AOT dispatch of the three ops."""
    from cmask.mask import _encode_metadata
    m = load("reward_model")
    q, k, v = (t.detach()[0] for t in _inputs(L=300))
    cu = torch.tensor([0, 300], dtype=torch.int32, device=DEV)
    tensors, ints = _encode_metadata(m, dict(prompt_len=[60], responses=[[60, 200]]), 1)
    bounds, batch = [1, 300, 300, 1, 300, 300], [1, 300, 300, 300, 300]
    pargs = (cu, cu, tensors, ints, m.id, bounds, batch, False)
    # Not test_aot_dispatch_dynamic for the preprocess: it compares two runs'
    # outputs bytewise, and the storage's padding and the tiles past the
    # batch's are never written (nothing reads them).
    torch.library.opcheck(torch.ops.cmask.preprocess.default, pargs,
                          test_utils=("test_schema", "test_autograd_registration",
                                      "test_faketensor"))
    storage = torch.ops.cmask.preprocess(*pargs)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    for deterministic in (False, True):
        args = (q, k, v, storage, cu, cu, m.id, bounds, batch, -1.0, -1, deterministic)
        torch.library.opcheck(torch.ops.cmask.attention_forward.default, args)
        out, lse = torch.ops.cmask.attention_forward(*args)
        bargs = (q.detach(), k.detach(), v.detach(), out.detach(), lse.detach(),
                 torch.randn_like(out), storage, cu, cu, m.id, bounds, batch, -1.0,
                 deterministic)
        torch.library.opcheck(torch.ops.cmask.attention_backward.default, bargs)
