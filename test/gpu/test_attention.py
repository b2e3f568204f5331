"""Forward attention on the GPU against a float64 reference (DESIGN.md's bounds).

Needs PyTorch with a CUDA device (sm_90 for the attention kernels) and the
cmask package (pip install .); skipped otherwise. Artifacts come from
$CMASK_ARTIFACTS/<mask>/ (scripts/gpu/prepare_attention.sh builds them where
the compiler is) or are compiled on the spot when cmask-translate is found.
The masks are checked with masks/reference.py, written without the compiler.

Run on the H200: scripts/gpu/check_attention.sh.
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if torch.cuda.get_device_capability() < (9, 0):
    pytest.skip("the attention kernels need sm_90", allow_module_level=True)
cmask = pytest.importorskip("cmask")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "masks"))
import reference  # noqa: E402

DEV = torch.device("cuda")
TOL = {torch.bfloat16: 1e-2, torch.float16: 3e-3}
_masks: dict = {}


def load(name: str):
    if name not in _masks:
        art = os.environ.get("CMASK_ARTIFACTS")
        if art and (Path(art) / name / "manifest.json").is_file():
            _masks[name] = cmask.load(Path(art) / name)
        else:
            spec = ROOT / "masks" / f"{name}.mlir"
            if not spec.is_file():  # a test-only spec (test/gpu/Inputs)
                spec = Path(__file__).parent / "Inputs" / f"{name}.mlir"
            _masks[name] = cmask.compile(spec)
    return _masks[name]


# --------------------------------------------------------------------------
# Batches: lengths that are not tile multiples, every catalog mask
# --------------------------------------------------------------------------

def batch_for(name: str, lens_q, lens_k=None, rng=None):
    """{"sequences", "metadata"} for a catalog mask (JSON form, reference.py's)."""
    rng = rng or np.random.default_rng(0)
    lens_k = lens_k or lens_q
    seqs = [{"q_len": int(q), "k_len": int(k)} for q, k in zip(lens_q, lens_k)]
    md: dict = {}
    if name == "sliding_window":
        md["window"] = 200
    elif name in ("document", "causal_document"):
        md["docs"] = [sorted(rng.choice(np.arange(1, max(s["q_len"], s["k_len"])), 4,
                                        replace=False).tolist()) for s in seqs]
    elif name == "prefix_lm":
        md["prefix_len"] = [int(rng.integers(0, s["k_len"] + 1)) for s in seqs]
    elif name == "reward_model":
        md["prompt_len"], md["responses"] = [], []
        for s in seqs:
            L = s["q_len"]
            p = L // 4
            md["prompt_len"].append(p)
            md["responses"].append([p + (L - p) * r // 4 for r in range(4)])
    elif name == "hstu":
        md["context"] = 37
        md["num_targets"] = [s["q_len"] // 8 for s in seqs]
    elif name == "clear":
        T, H, W = 64, 12, 32
        md.update(text_len=T, height=H, width=W, radius=5)
    return {"sequences": seqs, "metadata": md}


def clear_lens():
    n = 64 + 12 * 32
    return [n, n, n - 100]  # the last one stops inside the grid


def metadata_kwargs(batch):
    return dict(batch["metadata"])


def packed_inputs(batch, heads=4, kv_heads=None, dim=128, dtype=torch.bfloat16, seed=0):
    kv_heads = kv_heads or heads
    g = torch.Generator(device=DEV).manual_seed(seed)
    tq = sum(s["q_len"] for s in batch["sequences"])
    tk = sum(s["k_len"] for s in batch["sequences"])
    q = torch.randn(tq, heads, dim, device=DEV, dtype=dtype, generator=g)
    k = torch.randn(tk, kv_heads, dim, device=DEV, dtype=dtype, generator=g)
    v = torch.randn(tk, kv_heads, dim, device=DEV, dtype=dtype, generator=g)
    cq = np.cumsum([0] + [s["q_len"] for s in batch["sequences"]])
    ck = np.cumsum([0] + [s["k_len"] for s in batch["sequences"]])
    cu_q = torch.tensor(cq, dtype=torch.int32, device=DEV)
    cu_k = torch.tensor(ck, dtype=torch.int32, device=DEV)
    return q, k, v, cu_q, cu_k


def reference_attention(name, batch, q, k, v, cu_q, cu_k, scale, dtype_math=None):
    """float64 attention with the reference masks, per sequence: (out [tq, H, D],
    lse [H, tq]); rows that see nothing: out 0, lse -inf. With dtype_math:
    PyTorch's math SDPA in that dtype instead (its rows that see nothing, NaN
    there, count as 0)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    masks = reference.reference_batch(name, batch)
    outs, lses = [], []
    H, Hk = q.shape[1], k.shape[1]
    cq, ck = cu_q.tolist(), cu_k.tolist()
    for b, m in enumerate(masks):
        mask = torch.from_numpy(m).to(DEV)
        if dtype_math is not None:
            qs, ks, vs = (t[None].transpose(1, 2) for t in
                          (q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]]))
            with sdpa_kernel(SDPBackend.MATH):
                o = torch.nn.functional.scaled_dot_product_attention(
                    qs, ks, vs, attn_mask=mask, scale=scale, enable_gqa=H != Hk)
            outs.append(o[0].transpose(0, 1).double().nan_to_num(0.0))
            continue
        qs = q[cq[b]:cq[b + 1]].double().transpose(0, 1)          # [H, Lq, D]
        ks = k[ck[b]:ck[b + 1]].double().transpose(0, 1).repeat_interleave(H // Hk, 0)
        vs = v[ck[b]:ck[b + 1]].double().transpose(0, 1).repeat_interleave(H // Hk, 0)
        s = (qs @ ks.transpose(1, 2)) * scale
        s = s.masked_fill(~mask, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)                           # [H, Lq]
        p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
        outs.append((p @ vs).transpose(0, 1))                      # [Lq, H, D]
        lses.append(lse)
    return torch.cat(outs), (torch.cat(lses, dim=1) if lses else None)


def rel(x, ref):
    """relFro; the absolute norm of the difference when the reference is 0."""
    x, ref = x.double(), ref.double()
    norm = torch.linalg.vector_norm(ref)
    diff = torch.linalg.vector_norm(x - ref)
    return (diff / norm if norm > 0 else diff).item()


def check_against_reference(name, batch, dtype=torch.bfloat16, heads=4, kv_heads=None,
                            dim=128, tile_shape=None, seed=None, schedule=None,
                            gqa_packing=None):
    m = load(name)
    q, k, v, cu_q, cu_k = packed_inputs(batch, heads, kv_heads, dim, dtype,
                                        seed=seed if seed is not None else
                                        int.from_bytes(os.urandom(4), "little"))
    scale = 1.0 / math.sqrt(dim)
    prepared = m.prepare(q=q, k=k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                         max_seqlen_q=max(s["q_len"] for s in batch["sequences"]),
                         max_seqlen_k=max(s["k_len"] for s in batch["sequences"]),
                         checked=True, **metadata_kwargs(batch))
    out = torch.full_like(q, float("nan"))                          # poisoned
    lse = torch.full((heads, q.shape[0]), float("nan"), device=DEV)
    m.attention(q, k, v, prepared=prepared, out=out, lse_out=lse, tile_shape=tile_shape,
                schedule=schedule, gqa_packing=gqa_packing)
    ref_o, ref_l = reference_attention(name, batch, q, k, v, cu_q, cu_k, scale)
    assert not torch.isnan(out).any(), "NaN in the output"
    assert not torch.isnan(lse).any(), "NaN in the LSE"
    empty = torch.isinf(ref_l)                                     # rows that see nothing
    assert torch.equal(torch.isinf(lse) & (lse < 0), empty), "LSE -inf exactly on empty rows"
    assert (out.transpose(0, 1)[empty] == 0).all(), "empty rows must give O = 0"
    err = rel(out, ref_o)
    err_lse = rel(lse[~empty], ref_l[~empty]) if (~empty).any() else 0.0
    # PyTorch's own math attention in the input dtype, against the same reference.
    math_o, _ = reference_attention(name, batch, q, k, v, cu_q, cu_k, scale, dtype_math=dtype)
    err_math = rel(math_o, ref_o)
    assert err <= TOL[dtype], f"{name}: relFro(O) {err:.3e} > {TOL[dtype]}"
    assert err <= 2 * err_math + 1e-6, f"{name}: relFro(O) {err:.3e} > 2 x math {err_math:.3e}"
    assert err_lse <= 1e-3, f"{name}: relFro(LSE) {err_lse:.3e}"
    # A rerun is bitwise identical.
    out2 = torch.full_like(q, float("nan"))
    m.attention(q, k, v, prepared=prepared, out=out2, tile_shape=tile_shape, schedule=schedule,
                gqa_packing=gqa_packing)
    assert torch.equal(out.view(torch.int16), out2.view(torch.int16)), "rerun differs"
    print(f"{name} {dtype} D={dim} H={heads}/{kv_heads or heads} tile={tile_shape} "
          f"schedule={schedule} gqa_packing={gqa_packing}: "
          f"relFro(O) {err:.3e} (math {err_math:.3e}), relFro(LSE) {err_lse:.2e}, "
          f"empty rows {int(empty.sum())}")
    return out, lse


CATALOG = ["causal", "sliding_window", "document", "causal_document", "prefix_lm",
           "reward_model", "hstu", "clear"]


@pytest.mark.parametrize("name", CATALOG)
@pytest.mark.parametrize("tile", ["128x128", "128x64"])
def test_catalog_bf16_d128_varlen(name, tile):
    lens = clear_lens() if name == "clear" else [300, 1000, 517]
    check_against_reference(name, batch_for(name, lens), tile_shape=tile)


@pytest.mark.parametrize("name", CATALOG)
def test_catalog_persistent(name):
    """The persistent kernel (128x128), with more work items than SMs (32
    heads) so that CTAs take several items each."""
    lens = clear_lens() if name == "clear" else [300, 1000, 517, 64]
    check_against_reference(name, batch_for(name, lens), heads=32, tile_shape="128x128",
                            schedule="persistent")


@pytest.mark.parametrize("dim,dtype", [(128, torch.bfloat16), (64, torch.float16)])
def test_column_windows(dim, dtype):
    """Partial tiles in column windows (the 128x128 grid kernel,
    docs/attention.md): CLEAR on grid rows of 128 keys (each image tile of a
    query tile is partial, seen by its warpgroups in keys [0, 80) and
    [48, 128)), one sequence stopping inside a grid row; a sliding window of
    20 (warpgroup 0 windowed in both tiles of a query tile, warpgroup 1 in
    one: the two take different step bodies); a CLEAR whose text length is
    not a multiple of 128 (windows too wide: the plain steps)."""
    n = 128 + 8 * 128
    clear = {"sequences": [{"q_len": n, "k_len": n}, {"q_len": n - 200, "k_len": n - 200}],
             "metadata": {"text_len": 128, "height": 8, "width": 128, "radius": 16}}
    check_against_reference("clear", clear, dim=dim, dtype=dtype, tile_shape="128x128",
                            schedule="grid")
    # GQA packed (8/2: 32 positions of 4 heads per item): a warpgroup's 16
    # positions take the window of the half of the query tile they lie in.
    packed, plain = (check_against_reference(
        "clear", clear, dim=dim, dtype=dtype, heads=8, kv_heads=2, tile_shape="128x128",
        schedule="grid", gqa_packing=p, seed=7)[0] for p in (True, False))
    assert torch.equal(packed.view(torch.int16), plain.view(torch.int16))
    window = batch_for("sliding_window", [1000, 517])
    window["metadata"]["window"] = 20
    check_against_reference("sliding_window", window, dim=dim, dtype=dtype,
                            tile_shape="128x128", schedule="grid")
    clear["metadata"]["text_len"] = 100
    for s in clear["sequences"]:
        s["q_len"] = s["k_len"] = s["q_len"] - 28
    check_against_reference("clear", clear, dim=dim, dtype=dtype, tile_shape="128x128",
                            schedule="grid")


def test_persistent_gqa_fp16_d64():
    check_against_reference("reward_model", batch_for("reward_model", [640, 333, 900]),
                            heads=32, kv_heads=8, schedule="persistent")
    check_against_reference("hstu", batch_for("hstu", [700, 129, 2000]), heads=32,
                            dtype=torch.float16, dim=64, schedule="persistent")


def test_persistent_sections():
    """Items in sections of heads (rt::sectionHeads, 132 SMs): 6 heads in
    sections of 4 and 2 (SECTIONS_LENS), GQA 32/8 in eight sections of 4
    heads (one KV head: 16 MiB of K/V), 12 heads at D=64 in three sections
    of 4 (4 x 4096 keys: 4 MiB of K/V a KV head)."""
    check_against_reference("causal", batch_for("causal", SECTIONS_LENS),
                            heads=SECTIONS_HEADS, schedule="persistent")
    check_against_reference("hstu", batch_for("hstu", [4096] * 8), heads=32, kv_heads=8,
                            schedule="persistent")
    check_against_reference("reward_model", batch_for("reward_model", [4096] * 4), heads=12,
                            dim=64, dtype=torch.float16, schedule="persistent")


@pytest.mark.parametrize("lens,height,width,expect", [
    ([64 + 12 * 32] * 2, 12, 32, "128x128"),       # short sequences
    ([64 + 512 * 128], 512, 128, "128x64")])      # 65600 keys: the default
def test_tile_shape_choice(lens, height, width, expect):
    """A call with no tile_shape= runs 128x128 where the default is 128x64
    (CLEAR) on sequences of at most 65536 keys on average, the default on
    longer ones: Prepared.tile_shape says which, and the call computes that
    tile's bits."""
    m = load("clear")
    assert m.tile_shapes[m.default_tile_index] == "128x64"
    batch = batch_for("clear", lens)
    batch["metadata"].update(height=height, width=width)
    q, k, v, cu_q, cu_k = packed_inputs(batch, heads=2, seed=3)
    prepared = m.prepare(q=q, k=k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                         max_seqlen_q=max(lens), max_seqlen_k=max(lens), checked=True,
                         **metadata_kwargs(batch))
    assert prepared.tile_shape == expect
    auto = m.attention(q, k, v, prepared=prepared)
    named = m.attention(q, k, v, prepared=prepared, tile_shape=expect)
    other = m.attention(q, k, v, prepared=prepared,
                        tile_shape="128x64" if expect == "128x128" else "128x128")
    assert torch.equal(auto.view(torch.int16), named.view(torch.int16))
    assert rel(auto, other) <= 1e-2          # the same attention, other tiles
    # The plain call (metadata, no prepared=) makes the same choice.
    plain = m.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                        max_seqlen_q=max(lens), max_seqlen_k=max(lens),
                        **metadata_kwargs(batch))
    assert torch.equal(plain.view(torch.int16), named.view(torch.int16))


def test_fp16_d64():
    check_against_reference("hstu", batch_for("hstu", [700, 129]), dtype=torch.float16, dim=64)
    check_against_reference("clear", batch_for("clear", clear_lens()), dtype=torch.float16,
                            dim=64, tile_shape="128x64")


@pytest.mark.parametrize("kv_heads", [2, 1])  # GQA, MQA
def test_gqa_mqa(kv_heads):
    check_against_reference("reward_model", batch_for("reward_model", [640, 333]), heads=8,
                            kv_heads=kv_heads)


@pytest.mark.parametrize("name", CATALOG)
@pytest.mark.parametrize("tile,schedule", [("128x128", "grid"), ("128x128", "persistent"),
                                           ("128x64", "grid")])
def test_gqa_packing(name, tile, schedule):
    """GQA packing (docs/attention.md): a work item's rows are the query
    heads of one KV head at 128 / group positions each. Against float64 at
    groups 2, 4 (fp16, D = 64) and 16 (MQA), and bitwise equal to the
    unpacked kernel: a row's steps are the same in either (the same key
    tiles, in the same order, in the same wgmma shapes)."""
    lens = clear_lens() if name == "clear" else [300, 1000, 517, 64]
    batch = batch_for(name, lens)
    for heads, kv_heads, dim, dtype in ((8, 4, 128, torch.bfloat16),
                                        (16, 4, 64, torch.float16),
                                        (16, 2, 128, torch.bfloat16),
                                        (16, 1, 128, torch.bfloat16)):
        packed, _ = check_against_reference(name, batch, heads=heads, kv_heads=kv_heads,
                                            dim=dim, dtype=dtype, tile_shape=tile,
                                            schedule=schedule, gqa_packing=True, seed=5)
        plain, _ = check_against_reference(name, batch, heads=heads, kv_heads=kv_heads,
                                           dim=dim, dtype=dtype, tile_shape=tile,
                                           schedule=schedule, gqa_packing=False, seed=5)
        assert torch.equal(packed.view(torch.int16), plain.view(torch.int16)), \
            f"{name} {heads}/{kv_heads}: packed and unpacked outputs differ"


@pytest.mark.parametrize("schedule", ["grid", "persistent"])
def test_gqa_packing_skips_positions_past_q_len(schedule):
    """A packed item takes 128 / G positions of its query tile: one whose
    positions all lie past q_len runs no step. The debug counters then count,
    per tile state, each listed tile once per KV head and per part of the
    query tile that holds a position (test_tiles_processed_match_the_bitmap's
    count when none is skipped)."""
    m = load("causal")
    lens = [300, 40, 517, 64, 1]
    batch = batch_for("causal", lens)
    heads, kv_heads, group = 32, 8, 4
    q, k, v, cu_q, cu_k = packed_inputs(batch, heads=heads, kv_heads=kv_heads)
    prepared = m.prepare(q=q, k=k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                         max_seqlen_q=max(lens), max_seqlen_k=max(lens))
    stats = torch.zeros(3, dtype=torch.int32, device=DEV)
    m.attention(q, k, v, prepared=prepared, tile_shape="128x128", stats=stats,
                schedule=schedule, gqa_packing=True)
    view = prepared.tile_view(m.tile_shapes.index("128x128"))
    nqt = int(_download(view.counts, 1)[0])
    offsets = _download(view.tile_offsets, nqt + 1)
    entries = _download(view.tile_entries, int(offsets[-1]))
    seq_of = _download(view.q_tile_seq, nqt)
    base = _download(view.q_tile_base, len(lens))
    state = cmask._capi.tile_entry_field(entries, "state")
    kt = cmask._capi.tile_entry_field(entries, "tile")
    expect = [0, 0, 0]
    for qt in range(nqt):
        seq = int(seq_of[qt])
        present = min(128, lens[seq] - 128 * (qt - int(base[seq])))
        parts = -(-present // (128 // group))          # parts holding a position
        for e in range(int(offsets[qt]), int(offsets[qt + 1])):
            crossing = (int(kt[e]) + 1) * 128 > lens[seq]
            col = 0 if state[e] == 1 else (2 if crossing else 1)
            expect[col] += parts * kv_heads
    assert stats.tolist() == expect, (stats.tolist(), expect)
    # Fewer tiles than unpacked: 40, 64 and 1 positions fill 2, 2 and 1 of 4 parts.
    plain = torch.zeros(3, dtype=torch.int32, device=DEV)
    m.attention(q, k, v, prepared=prepared, tile_shape="128x128", stats=plain,
                schedule=schedule, gqa_packing=False)
    assert sum(expect) < sum(plain.tolist())


@pytest.mark.parametrize("heads", [32, 64])
def test_gqa_packing_wide_groups_batched(heads):
    """MQA groups of 32 and 64 (a box of 2 or 1 positions x 32 or 64
    heads, 4 or 2 positions per item) on batched [B, L, H, D] inputs whose
    q is a strided view, sequences shorter than an item's positions
    included: bitwise the unpacked output, near PyTorch's float64 SDPA."""
    m = load("causal")
    g = torch.Generator(device=DEV).manual_seed(11)
    for length in (3, 130, 257):
        big = torch.randn(2, length, heads, 256, device=DEV, dtype=torch.bfloat16,
                          generator=g)
        q = big[..., 64:192]                                   # strided heads and tokens
        k, v = (torch.randn(2, length, 1, 128, device=DEV, dtype=torch.bfloat16,
                            generator=g) for _ in range(2))
        prepared = m.prepare(q=q, k=k)
        packed = m.attention(q, k, v, prepared=prepared, gqa_packing=True)
        plain = m.attention(q, k, v, prepared=prepared, gqa_packing=False)
        assert torch.equal(packed.view(torch.int16), plain.view(torch.int16)), length
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.double().transpose(1, 2), k.double().transpose(1, 2),
            v.double().transpose(1, 2), is_causal=True, enable_gqa=True).transpose(1, 2)
        assert rel(packed, ref) <= TOL[torch.bfloat16], (length, rel(packed, ref))


def test_gqa_packing_errors():
    m = load("causal")
    batch = batch_for("causal", [300])
    q, k, v, cu_q, cu_k = packed_inputs(batch, heads=12, kv_heads=4)
    prepared = m.prepare(q=q, k=k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=300,
                         max_seqlen_k=300)
    with pytest.raises(cmask._capi.RuntimeError_,
                       match="gqa_packing on: 12 query heads over 4 key/value heads"):
        m.attention(q, k, v, prepared=prepared, gqa_packing=True)
    with pytest.raises(ValueError, match="gqa_packing 1"):
        m.attention(q, k, v, prepared=prepared, gqa_packing=1)
    # A group of 3 cannot pack: the runtime's choice and False agree.
    auto = m.attention(q, k, v, prepared=prepared)
    off = m.attention(q, k, v, prepared=prepared, gqa_packing=False)
    assert torch.equal(auto.view(torch.int16), off.view(torch.int16))


@pytest.mark.parametrize("kv_heads", [32, 8])
def test_section_heads(kv_heads):
    """section_heads= only orders the persistent kernel's items: any section
    (one head, a size that splits a KV head's group, more than all heads)
    gives the runtime's own sections' output bitwise, packed or not."""
    m = load("causal")
    batch = batch_for("causal", [300, 1000, 517, 64])
    q, k, v, cu_q, cu_k = packed_inputs(batch, heads=32, kv_heads=kv_heads, seed=3)
    prepared = m.prepare(q=q, k=k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=1000,
                         max_seqlen_k=1000)
    ref = m.attention(q, k, v, prepared=prepared, schedule="persistent")
    # 252645136 x 17 query tiles wraps to 16 in 32 bits: the runtime clamps
    # a section to all heads.
    for heads in (1, 3, 8, 64, 252645136):
        out = torch.full_like(q, float("nan"))
        m.attention(q, k, v, prepared=prepared, out=out, schedule="persistent",
                    section_heads=heads)
        assert torch.equal(out.view(torch.int16), ref.view(torch.int16)), \
            f"section_heads={heads} differs"
    for bad in (0, -1, True, 2.0, 2**31):
        with pytest.raises(ValueError, match="section_heads"):
            m.attention(q, k, v, prepared=prepared, section_heads=bad)
    with pytest.raises(TypeError, match="section_heads= go with prepared="):
        m.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=1000,
                    max_seqlen_k=1000, section_heads=4)
    # The C API's own check (the Python layer bypassed).
    lse = torch.empty(32, q.shape[0], device=DEV)
    t = cmask.mask._tensor
    args = cmask._capi.AttentionArgs(t(q), t(k), t(v), t(torch.empty_like(q)), lse.data_ptr(),
                                     0.0, -1, 0, 0, 0, -2)
    lib = cmask._capi.lib()
    assert lib.cmask_attention_forward(m._handle, prepared.descriptor, ctypes.byref(args),
                                       torch.cuda.current_stream().cuda_stream) != 0
    assert "section_heads -2" in lib.cmask_last_error().decode()


def test_cross_attention_lengths():
    check_against_reference("causal", batch_for("causal", [200, 700], [900, 150]))
    check_against_reference("prefix_lm", batch_for("prefix_lm", [129, 300], [1000, 64]))


def test_rows_that_see_nothing():
    # A negative window: no row sees anything; a window of 0 sees itself only.
    b = batch_for("sliding_window", [300, 77])
    b["metadata"]["window"] = -1
    out, lse = check_against_reference("sliding_window", b)
    assert (out == 0).all() and torch.isinf(lse).all()
    # HSTU with targets only and no context: target rows see themselves.
    b = batch_for("hstu", [256, 300])
    b["metadata"]["context"] = 0
    b["metadata"]["num_targets"] = [256, 0]
    check_against_reference("hstu", b)


@pytest.mark.parametrize("schedule", ["grid", "persistent"])
def test_output_not_16_byte_aligned(schedule):
    # The epilogue stores 16 bytes per lane when O and its strides allow it
    # and 4-byte pairs otherwise: an out= 4 bytes off 16-byte alignment gets
    # the same bits as a fresh tensor.
    m = load("causal")
    q, k, v, cu_q, cu_k = packed_inputs(batch_for("causal", [700, 300]), 4, None, 128,
                                        torch.bfloat16, seed=7)
    prepared = m.prepare(q=q, k=k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                         max_seqlen_q=700, max_seqlen_k=700, checked=True)
    ref = torch.empty_like(q)
    m.attention(q, k, v, prepared=prepared, out=ref, schedule=schedule)
    T, H, D = q.shape
    shifted = torch.full((T * H * D + 2,), float("nan"), device=DEV,
                         dtype=q.dtype)[2:].view(T, H, D)          # data 4 bytes off
    assert shifted.data_ptr() % 16 == 4
    m.attention(q, k, v, prepared=prepared, out=shifted, schedule=schedule)
    assert torch.equal(shifted.view(torch.int16), ref.view(torch.int16))


def test_batched_layout_and_op():
    m = load("hstu")
    B, L, H, D = 2, 640, 4, 128
    q, k, v = (torch.randn(B, L, H, D, device=DEV, dtype=torch.bfloat16) for _ in range(3))
    out, lse = m.attention(q, k, v, return_lse=True, context=16, num_targets=[80, 0])
    assert out.shape == q.shape and lse.shape == (B, H, L)
    batch = {"sequences": [{"q_len": L, "k_len": L}] * B,
             "metadata": {"context": 16, "num_targets": [80, 0]}}
    cu = torch.arange(0, (B + 1) * L, L, dtype=torch.int32, device=DEV)
    ref_o, ref_l = reference_attention("hstu", batch, q.reshape(B * L, H, D),
                                       k.reshape(B * L, H, D), v.reshape(B * L, H, D), cu, cu,
                                       1 / math.sqrt(D))
    assert rel(out.reshape(B * L, H, D), ref_o) <= 1e-2
    assert rel(lse.transpose(0, 1).reshape(H, B * L), ref_l) <= 1e-3


def test_torch_compile_no_graph_break():
    m = load("causal")
    q, k, v = (torch.randn(1, 384, 4, 64, device=DEV, dtype=torch.bfloat16) for _ in range(3))

    def f(q, k, v):
        return m.attention(q, k, v) * 2

    compiled = torch.compile(f, fullgraph=True)  # fails on a graph break
    torch.testing.assert_close(compiled(q, k, v), f(q, k, v), rtol=0, atol=0)


def _download(ptr: int, n: int) -> np.ndarray:
    out = np.empty(n, dtype=np.int32)
    torch.cuda.synchronize()
    cuda = ctypes.CDLL("libcuda.so.1")
    assert cuda.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(ptr),
                                ctypes.c_size_t(4 * n)) == 0
    return out


# 8 x 1024 keys at 6 heads: the persistent kernel's sections of 4 heads
# (rt::sectionHeads on 132 SMs: 4 readers a stream at 4 KV heads over 8
# sequences, and 16 MiB of K/V hold 4), the last of 2; with GQA 12/6
# sections of 8 query heads (4 KV heads), the last of 4.
SECTIONS_LENS, SECTIONS_HEADS = [1024] * 8, 6


@pytest.mark.parametrize("name,tile,schedule,lens,H,KV", [
    ("causal", "128x128", None, None, 3, None), ("clear", "128x64", None, None, 3, None),
    ("reward_model", "128x64", None, None, 3, None),
    ("causal", "128x128", "persistent", None, 3, None),
    ("hstu", "128x128", "grid", None, 3, None),
    ("causal", "128x128", "persistent", SECTIONS_LENS, SECTIONS_HEADS, None),
    ("causal", "128x128", "persistent", SECTIONS_LENS, 2 * SECTIONS_HEADS, SECTIONS_HEADS)])
def test_tiles_processed_match_the_bitmap(name, tile, schedule, lens, H, KV):
    """The debug counters: every non-empty tile once per head, by state."""
    m = load(name)
    lens = lens or (clear_lens() if name == "clear" else [300, 1000, 517])
    batch = batch_for(name, lens)
    q, k, v, cu_q, cu_k = packed_inputs(batch, heads=H, kv_heads=KV)
    prepared = m.prepare(q=q, k=k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                         max_seqlen_q=max(lens), max_seqlen_k=max(lens), **metadata_kwargs(batch))
    stats = torch.zeros(3, dtype=torch.int32, device=DEV)
    m.attention(q, k, v, prepared=prepared, tile_shape=tile, stats=stats, schedule=schedule)
    view = prepared.tile_view(m.tile_shapes.index(tile))
    nqt = int(_download(view.counts, 1)[0])
    offsets = _download(view.tile_offsets, nqt + 1)
    entries = _download(view.tile_entries, int(offsets[-1]))
    seq_of = _download(view.q_tile_seq, nqt)
    tk = int(tile.split("x")[1])
    state = cmask._capi.tile_entry_field(entries, "state")
    kt = cmask._capi.tile_entry_field(entries, "tile")
    klen = np.array([s["k_len"] for s in batch["sequences"]])
    tile_seq = np.repeat(seq_of, np.diff(offsets))
    crossing = (kt + 1) * tk > klen[tile_seq]
    partial = int((state == 1).sum())
    full = int(((state == 2) & ~crossing).sum())
    full_checked = int(((state == 2) & crossing).sum())
    assert partial + full + full_checked == len(entries)
    assert stats.tolist() == [H * partial, H * full, H * full_checked], \
        (stats.tolist(), partial, full, full_checked)


def test_errors_are_clear():
    m = load("hstu")
    q = torch.randn(256, 4, 128, device=DEV, dtype=torch.bfloat16)
    cu = torch.tensor([0, 256], dtype=torch.int32, device=DEV)
    kw = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=256, max_seqlen_k=256)
    with pytest.raises(TypeError, match="missing num_targets"):
        m.attention(q, q, q, context=1, **kw)
    with pytest.raises(TypeError, match="unknown bogus"):
        m.attention(q, q, q, context=1, num_targets=[0], bogus=3, **kw)
    with pytest.raises(TypeError, match="float32"):
        m.attention(q.float(), q.float(), q.float(), context=1, num_targets=[0], **kw)
    with pytest.raises(ValueError, match="is on cpu"):
        m.attention(q.cpu(), q, q, context=1, num_targets=[0], **kw)
    with pytest.raises(ValueError, match="needs cu_seqlens"):
        m.attention(q, q, q, context=1, num_targets=[0])
    with pytest.raises(ValueError, match="head dims differ"):
        m.attention(q, q[..., :64], q[..., :64], context=1, num_targets=[0], **kw)
    with pytest.raises(cmask._capi.RuntimeError_, match="no kernel for bf16, head dim 96"):
        x = torch.randn(256, 4, 96, device=DEV, dtype=torch.bfloat16)
        m.attention(x, x, x, context=1, num_targets=[0], **kw)
    with pytest.raises(cmask._capi.RuntimeError_, match="TMA"):
        x = torch.randn(256, 4, 130, device=DEV, dtype=torch.bfloat16)[..., :128]
        m.attention(x, x, x, context=1, num_targets=[0], **kw)


def test_schedule_choice_and_errors():
    m = load("hstu")
    batch = batch_for("hstu", [300, 1000])
    q, k, v, cu_q, cu_k = packed_inputs(batch, heads=4)
    prepared = m.prepare(q=q, k=k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=1000,
                         max_seqlen_k=1000, **metadata_kwargs(batch))
    with pytest.raises(cmask._capi.RuntimeError_,
                       match="no kernel of the persistent schedule for bf16, head dim 128, "
                             "tile shape 128x64"):
        m.attention(q, k, v, prepared=prepared, tile_shape="128x64", schedule="persistent")
    with pytest.raises(ValueError, match="schedule 'fast'"):
        m.attention(q, k, v, prepared=prepared, schedule="fast")
    with pytest.raises(TypeError, match="go with prepared="):
        m.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=1000,
                    max_seqlen_k=1000, schedule="grid", **metadata_kwargs(batch))
    # Both schedules and the runtime's choice compute the same rows.
    outs = [m.attention(q, k, v, prepared=prepared, tile_shape="128x128", schedule=s)
            for s in (None, "grid", "persistent")]
    assert rel(outs[1], outs[2]) <= 1e-6 and rel(outs[0], outs[1]) <= 1e-6


def _persistent_causal():
    """A causal batch with more work items than SMs (32 heads): the mask,
    q, k, v, their descriptor and the persistent kernel's output."""
    m = load("causal")
    batch = batch_for("causal", [2000, 1500, 700])
    q, k, v, cu_q, cu_k = packed_inputs(batch, heads=32)
    prepared = m.prepare(q=q, k=k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=2000,
                         max_seqlen_k=2000)
    return m, q, k, v, prepared, m.attention(q, k, v, prepared=prepared,
                                             schedule="persistent")


def _same_bits(outs, ref):
    for o in outs:
        assert torch.equal(o.view(torch.int16), ref.view(torch.int16))


def test_persistent_launches_on_two_streams():
    """Concurrent persistent launches take distinct scheduler counters."""
    m, q, k, v, prepared, ref = _persistent_causal()
    streams = [torch.cuda.Stream() for _ in range(2)]
    outs = [[], []]
    torch.cuda.synchronize()
    for _ in range(8):
        for s, o in zip(streams, outs):
            with torch.cuda.stream(s):
                o.append(m.attention(q, k, v, prepared=prepared, schedule="persistent"))
    torch.cuda.synchronize()
    _same_bits(outs[0] + outs[1], ref)


def test_persistent_per_thread_default_stream():
    """Two host threads on the per-thread default stream (one stream handle)
    take a counter pair each."""
    import threading
    m, q, k, v, prepared, ref = _persistent_causal()
    torch.cuda.synchronize()
    outs, errors = [[], []], []

    def work(o):
        try:
            with torch.cuda.stream(torch.cuda.ExternalStream(2)):  # cudaStreamPerThread
                for _ in range(8):
                    o.append(m.attention(q, k, v, prepared=prepared, schedule="persistent"))
                torch.cuda.current_stream().synchronize()
        except Exception as e:  # reported by the main thread
            errors.append(e)
    threads = [threading.Thread(target=work, args=(o,)) for o in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    _same_bits(outs[0] + outs[1], ref)


def test_persistent_in_a_cuda_graph():
    """A captured persistent launch zeroes its own counters: replays match."""
    m, q, k, v, prepared, ref = _persistent_causal()
    out = torch.empty_like(ref)
    lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=DEV)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        m.attention(q, k, v, prepared=prepared, out=out, lse_out=lse, schedule="persistent")
    for _ in range(4):
        out.zero_()
        graph.replay()
        torch.cuda.synchronize()
        _same_bits([out], ref)


def test_runtime_checks_devices():
    """The C API refuses host memory (the Python layer is bypassed here)."""
    m = load("causal")
    x = torch.randn(128, 1, 64, device=DEV, dtype=torch.bfloat16)
    cu = torch.tensor([0, 128], dtype=torch.int32, device=DEV)
    prepared = m.prepare(q=x, k=x, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=128,
                         max_seqlen_k=128)
    host = torch.empty(128, 1, 64, dtype=torch.bfloat16).pin_memory()
    lse = torch.empty(1, 128, device=DEV)
    t = cmask.mask._tensor
    args = cmask._capi.AttentionArgs(t(host), t(x), t(x), t(x), lse.data_ptr(), 0.0, -1, 0)
    lib = cmask._capi.lib()
    assert lib.cmask_attention_forward(m._handle, prepared.descriptor, ctypes.byref(args),
                                       torch.cuda.current_stream().cuda_stream) != 0
    assert lib.cmask_last_error().decode() == "attention: q is not device memory"
