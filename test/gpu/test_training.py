"""In a training loop (issue 16): one descriptor per batch for every layer,
under autograd; no host-device synchronization on the attention path.

Same requirements and artifacts as test_attention.py.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
    pytest.skip("the attention kernels need an sm_90 GPU", allow_module_level=True)

import cmask  # noqa: E402
from test_attention import (DEV, batch_for, clear_lens, load, metadata_kwargs,  # noqa: E402
                            packed_inputs)


class CountKernels:
    """Counts, under torch.profiler, a mask's preprocess runs (launches of its
    first preprocess kernel) and its forward and backward main kernels."""

    def __init__(self, m):
        self.stage0 = m.manifest["preprocess_kernels"][0]["kernel"]
        kernels = m.manifest["attention"]["kernels"]
        self.fwd = {k["kernel"] for k in kernels if k["pass"] == "forward"}
        self.bwd = {k["kernel"] for k in kernels if k["pass"] == "backward"}

    def __enter__(self):
        self.prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
        self.prof.__enter__()
        return self

    def __exit__(self, *exc):
        torch.cuda.synchronize()
        self.prof.__exit__(*exc)
        counts = {e.key: e.count for e in self.prof.key_averages()}
        self.preprocess = counts.get(self.stage0, 0)
        self.forward = sum(counts.get(k, 0) for k in self.fwd)
        self.backward = sum(counts.get(k, 0) for k in self.bwd)


def _layers(n, H, D, seed=0):
    g = torch.Generator(device=DEV).manual_seed(seed)
    return [torch.randn(H * D, 3 * H * D, device=DEV, dtype=torch.bfloat16, generator=g)
            .mul_(D ** -0.5).requires_grad_() for _ in range(n)]


def _model(m, x, weights, H, D, attention_kw, deterministic=False):
    """n layers of x + attention(x W): q, k, v from one projection each."""
    for w in weights:
        q, k, v = (x @ w).view(x.shape[0], 3, H, D).unbind(1)
        x = x + m.attention(q, k, v, deterministic=deterministic, **attention_kw).reshape(
            x.shape)
    return x


@pytest.mark.parametrize("name", ["hstu", "reward_model", "clear"])
def test_one_descriptor_per_batch(name):
    """A 4-layer model: with prepared= the preprocess runs once per batch
    (forward and backward of every layer read it), and the gradients equal
    the plain calls' (which build one descriptor per layer: rows and columns
    in the forward, none in the backward), bitwise with deterministic=True."""
    m = load(name)
    lens = clear_lens() if name == "clear" else [300, 1000, 517]
    batch = batch_for(name, lens)
    H, D = 4, 64
    q, _, _, cu, _ = packed_inputs(batch, heads=H, dim=D)
    layout = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lens),
                  max_seqlen_k=max(lens))
    x0 = torch.randn(q.shape[0], H * D, device=DEV, dtype=torch.bfloat16)
    dout = torch.randn_like(x0)
    weights = _layers(4, H, D)

    def grads(kw):
        x = x0.clone().requires_grad_()
        for w in weights:
            w.grad = None
        with CountKernels(m) as count:
            if kw is None:  # the batch's descriptor, prepared once
                kw = dict(prepared=m.prepare(q=q, k=q, **layout, **metadata_kwargs(batch)))
            else:
                kw = dict(kw, **layout)
            _model(m, x, weights, H, D, kw, deterministic=True).backward(dout)
        return [x.grad] + [w.grad for w in weights], count

    prepared_grads, prepared = grads(None)
    plain_grads, plain = grads(metadata_kwargs(batch))
    assert (prepared.preprocess, prepared.forward, prepared.backward) == (1, 4, 4)
    assert (plain.preprocess, plain.forward, plain.backward) == (4, 4, 4)
    for a, b in zip(prepared_grads, plain_grads):
        assert torch.equal(a, b)
    assert all(torch.isfinite(g).all() for g in prepared_grads)


def test_prepared_descriptors_are_independent():
    """A Prepared keeps its batch when the mask prepares others (its storage
    is its own), and one prepared without columns refuses a backward."""
    m = load("hstu")
    b1, b2 = batch_for("hstu", [300, 700]), batch_for("hstu", [900])
    q1, k1, v1, cu1, _ = packed_inputs(b1)
    q2, k2, v2, cu2, _ = packed_inputs(b2)
    p1 = m.prepare(q=q1, k=k1, cu_seqlens_q=cu1, cu_seqlens_k=cu1, max_seqlen_q=700,
                   max_seqlen_k=700, **metadata_kwargs(b1))
    first = m.attention(q1, k1, v1, prepared=p1)
    p2 = m.prepare(q=q2, k=k2, cu_seqlens_q=cu2, cu_seqlens_k=cu2, max_seqlen_q=900,
                   max_seqlen_k=900, **metadata_kwargs(b2))
    m.attention(q2, k2, v2, prepared=p2)
    assert torch.equal(m.attention(q1, k1, v1, prepared=p1), first)
    fwd_only = m.prepare(q=q1, k=k1, cu_seqlens_q=cu1, cu_seqlens_k=cu1, max_seqlen_q=700,
                         max_seqlen_k=700, columns=False, **metadata_kwargs(b1))
    assert torch.equal(m.attention(q1, k1, v1, prepared=fwd_only), first)
    with pytest.raises(ValueError, match="columns=True"):
        m.attention(q1.requires_grad_(), k1, v1, prepared=fwd_only)
    with pytest.raises(ValueError, match="another mask"):
        load("reward_model").attention(q1, k1, v1, prepared=p1)


def _busy_stream(ms=150.0):
    """Queues about `ms` of GPU work on the current stream (a spin kernel)."""
    if not hasattr(_busy_stream, "rate"):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(10_000_000)
        end.record()
        end.synchronize()
        _busy_stream.rate = 10_000_000 / start.elapsed_time(end)  # cycles per ms
    torch.cuda._sleep(int(ms * _busy_stream.rate))


METADATA_FORMS = {
    "lists": lambda v: v,
    "cpu": lambda v: torch.tensor(v, dtype=torch.int32),
    "cuda": lambda v: torch.tensor(v, dtype=torch.int32, device=DEV),
}


def _metadata_as(form, batch):
    """The batch's metadata keyword arguments in `form` (METADATA_FORMS)."""
    to = METADATA_FORMS[form]
    meta = {}
    for key, value in metadata_kwargs(batch).items():
        if isinstance(value, int):
            meta[key] = value
        elif value and isinstance(value[0], list):  # offsets: (values, starts)
            starts = [0]
            for x in value:
                starts.append(starts[-1] + len(x))
            meta[key] = value if form == "lists" else (
                to([y for x in value for y in x]), to(starts))
        else:
            meta[key] = to(value)
    return meta


@pytest.mark.parametrize("name", ["causal", "hstu", "reward_model", "clear"])
def test_preprocess_in_at_most_three_launches(name):
    """A training descriptor (rows and columns) from CUDA metadata takes at
    most 3 GPU operations: one memset (the error flags and the preprocess
    kernel's sync words), the preprocess kernel (its seven stages in one
    launch), and for a symmetric spec on self-attention one copy of the rows'
    descriptor into the columns'."""
    m = load(name)
    lens = clear_lens() if name == "clear" else [300, 1000, 517]
    batch = batch_for(name, lens)
    q, k, _, cu, _ = packed_inputs(batch, heads=4)
    layout = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lens),
                  max_seqlen_k=max(lens))
    meta = _metadata_as("cuda", batch)
    m.prepare(q=q, k=k, **layout, **meta)  # warm
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        m.prepare(q=q, k=k, **layout, **meta)
        torch.cuda.synchronize()
    ops = [e.name for e in prof.events()
           if e.device_type == torch.autograd.DeviceType.CUDA]
    kernels = {k["kernel"] for k in m.manifest["preprocess_kernels"]}
    assert len(m.manifest["preprocess_kernels"]) == 1
    assert sum(op in kernels for op in ops) == 1, ops
    assert len(ops) <= 3, ops


@pytest.mark.parametrize("form", sorted(METADATA_FORMS))
@pytest.mark.parametrize("name", ["hstu", "reward_model", "causal"])
def test_no_host_synchronization(name, form):
    """With 150 ms of GPU work queued first, a forward+backward call (plain,
    and prepare + prepared) returns while that work still runs, whatever form
    the metadata and cu_seqlens take (lists, CPU or CUDA int32 tensors)."""
    m = load(name)
    lens = [300, 1000, 517]
    batch = batch_for(name, lens)
    q, k, v, cu, _ = packed_inputs(batch, heads=4)
    meta = _metadata_as(form, batch)
    cu_form = METADATA_FORMS[form](cu.tolist())
    layout = dict(cu_seqlens_q=cu_form, cu_seqlens_k=cu_form, max_seqlen_q=max(lens),
                  max_seqlen_k=max(lens))
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    dout = torch.randn_like(q)

    def plain():
        m.attention(qg, kg, vg, **layout, **meta).backward(dout)

    def prepared():
        p = m.prepare(q=q, k=k, **layout, **meta)
        m.attention(qg, kg, vg, prepared=p).backward(dout)

    for call in (plain, prepared):
        call()  # warm: pinned host blocks, kernels loaded
        torch.cuda.synchronize()
        _busy_stream(150.0)
        t0 = time.perf_counter()
        call()
        host_ms = (time.perf_counter() - t0) * 1e3
        still_busy = not torch.cuda.current_stream().query()
        torch.cuda.synchronize()
        assert still_busy and host_ms < 50.0, \
            f"{call.__name__}: {host_ms:.1f} ms of host time; GPU still busy: {still_busy}"


def test_prepared_under_torch_compile():
    """A compiled layer on a descriptor prepared outside it: no graph break,
    the same output and gradients as eager (deterministic=True: bitwise)."""
    m = load("hstu")
    batch = batch_for("hstu", [300, 700])
    q, k, v, cu, _ = packed_inputs(batch)
    p = m.prepare(q=q, k=k, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=700,
                  max_seqlen_k=700, **metadata_kwargs(batch))
    dout = torch.randn_like(q)

    def f(q, k, v):
        return m.attention(q, k, v, prepared=p, deterministic=True) * 2

    compiled = torch.compile(f, fullgraph=True)  # fails on a graph break
    results = []
    for fn in (f, compiled):
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        out = fn(*leaves)
        out.backward(dout)
        results.append([out] + [t.grad for t in leaves])
    for a, b in zip(*results):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", ["hstu", "reward_model"])
def test_training_step_in_a_cuda_graph(name):
    """Preprocess, forward and backward of a 2-layer model captured in one
    CUDA graph at a fixed maximum shape (total rows, sequence count,
    max_seqlen); each replay takes the lengths and metadata copied into the
    static tensors, and its gradients equal eager's bitwise
    (deterministic=True). Scalar metadata are captured values."""
    m = load(name)
    H, D, total = 4, 64, 2048
    batches = [[700, 1000, 348], [1500, 300, 248], [128, 128, 1792], [1000, 1000, 48]]
    metas = [metadata_kwargs(batch_for(name, lens)) for lens in batches]
    scalars = {key: v for key, v in metas[0].items() if isinstance(v, int)}

    def arrays(lens, meta):
        """cu_seqlens and every non-scalar metadata value as flat int32 lists
        (offsets as values and starts: a fixed count of values per batch)."""
        out = {"cu": [0] + list(np.cumsum(lens))}
        for key, value in meta.items():
            if isinstance(value, int):
                assert value == scalars[key]
            elif value and isinstance(value[0], list):
                out[key] = [y for x in value for y in x]
                out[key + ".starts"] = list(np.cumsum([0] + [len(x) for x in value]))
            else:
                out[key] = value
        return out

    static = {key: torch.tensor(v, dtype=torch.int32, device=DEV)
              for key, v in arrays(batches[0], metas[0]).items()}

    def load_batch(i):
        for key, v in arrays(batches[i], metas[i]).items():
            static[key].copy_(torch.tensor(v, dtype=torch.int32))

    def metadata():
        meta = dict(scalars)
        for key, value in metas[0].items():
            if key not in scalars:
                meta[key] = (static[key], static[key + ".starts"]) \
                    if key + ".starts" in static else static[key]
        return meta

    g = torch.Generator(device=DEV).manual_seed(1)
    x = torch.randn(total, H * D, device=DEV, dtype=torch.bfloat16, generator=g)
    x.requires_grad_()
    dout = torch.randn(total, H * D, device=DEV, dtype=torch.bfloat16, generator=g)
    weights = _layers(2, H, D)

    def step():
        p = m.prepare(q=(total, H, D), k=(total, H, D), cu_seqlens_q=static["cu"],
                      cu_seqlens_k=static["cu"], max_seqlen_q=total, max_seqlen_k=total,
                      **metadata())
        y = _model(m, x, weights, H, D, dict(prepared=p), deterministic=True)
        return torch.autograd.grad(y, [x] + weights, dout)

    load_batch(0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as PyTorch asks
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    replayed = []
    for i in range(len(batches)):
        load_batch(i)
        graph.replay()
        replayed.append([t.clone() for t in captured])
        eager = step()
        for a, b in zip(replayed[-1], eager):
            assert torch.equal(a, b), f"batch {i}: replay differs from eager"
    # The batches differ, so the replays must (the graph read the new lengths).
    assert not torch.equal(replayed[0][0], replayed[1][0])


def test_torch_compile_does_not_recompile():
    """torch.compile(dynamic=True) of a layer that prepares and attends:
    one graph for 5 packed batches of other lengths and sequence counts,
    new metadata values and a second Mask of the same spec, and one for 5
    batched lengths; results and gradients equal eager's bitwise."""
    m = load("hstu")
    masks = [m, cmask.load(m.path)]  # a second Mask of the same artifact
    H, D = 4, 64

    def packed(mask, q, k, v, cu, max_len, context, targets):
        p = mask.prepare(q=q, k=k, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max_len,
                         max_seqlen_k=max_len, context=context, num_targets=targets)
        return mask.attention(q, k, v, prepared=p, deterministic=True) * 2

    def batched(mask, q, k, v, context, targets):
        return mask.attention(q, k, v, context=context, num_targets=targets,
                              deterministic=True) * 2

    def run(fn, args):
        leaves = [a.detach().clone().requires_grad_() for a in args[1:4]]
        out = fn(args[0], *leaves, *args[4:])
        out.backward(torch.ones_like(out))
        return [out] + [t.grad for t in leaves]

    def targets(lens):
        return torch.tensor([n // 8 for n in lens], dtype=torch.int32, device=DEV)

    g = torch.Generator(device=DEV).manual_seed(2)
    cases = {
        packed: [[300, 700], [1000, 24, 250], [512, 512, 3, 77], [2000, 65], [128, 129, 1]],
        batched: [300, 517, 1024, 77, 1500],
    }
    for fn, lengths in cases.items():
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        compiled = torch.compile(fn, fullgraph=True, dynamic=True)
        for i, lens in enumerate(lengths):
            mask = masks[i % 2]
            if fn is packed:
                q, k, v = (torch.randn(sum(lens), H, D, device=DEV, dtype=torch.bfloat16,
                                       generator=g) for _ in range(3))
                cu = torch.tensor([0] + list(np.cumsum(lens)), dtype=torch.int32, device=DEV)
                args = (mask, q, k, v, cu, max(lens), 30 + i, targets(lens))
            else:
                q, k, v = (torch.randn(2, lens, H, D, device=DEV, dtype=torch.bfloat16,
                                       generator=g) for _ in range(3))
                args = (mask, q, k, v, 30 + i, targets([lens, lens // 2]))
            for a, b in zip(run(compiled, args), run(fn, args)):
                assert torch.equal(a, b), f"{fn.__name__} {lens}: compiled differs from eager"
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        assert graphs == 1, f"{fn.__name__}: {graphs} graphs for {len(lengths)} batches"


def test_lse_carries_no_gradient():
    """lse is marked non-differentiable (no zero gradient is made for it, and
    a loss through it fails instead of getting a silent zero); out's
    gradients still flow. Eager and compiled."""
    m = load("causal")
    batch = batch_for("causal", [300, 200])
    q, k, v, cu, _ = packed_inputs(batch)
    p = m.prepare(q=q, k=k, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=300,
                  max_seqlen_k=300)

    def f(q, k, v):
        return m.attention(q, k, v, prepared=p, return_lse=True)

    for fn in (f, torch.compile(f, fullgraph=True)):
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        out, lse = fn(*leaves)
        assert out.requires_grad and not lse.requires_grad
        with pytest.raises(RuntimeError, match="does not require grad"):
            lse.sum().backward()
        out.float().sum().backward()
        assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in leaves)


def test_torch_binding_is_loaded():
    """The eager path runs through the C++ binding here (a machine with a C++
    compiler): a suite on the Python fallback would not test what users get."""
    assert cmask._binding.status() == "loaded"
    assert load("causal")._eager_binding


def _binding_and_function(m, leaves, dout, **kw):
    """out, lse and the gradients through the C++ binding and through the
    autograd.Function, in that order."""
    results = []
    for binding in (True, False):
        m._eager_binding = binding
        try:
            xs = [t.detach().clone().requires_grad_() for t in leaves]
            out, lse = m.attention(*xs, return_lse=True, **kw)
            out.backward(dout)
            results.append([out, lse] + [t.grad for t in xs])
        finally:
            m._eager_binding = True
    return results


@pytest.mark.parametrize("name", ["causal", "hstu", "reward_model", "interleaved", "clear"])
def test_binding_equals_the_function_path(name):
    """The C++ binding and the autograd.Function launch the same kernels:
    out, lse, dq, dk and dv bitwise equal (deterministic=True; GQA 8/2,
    packed), prepared and with metadata."""
    m = load(name)
    batch = batch_for(name, clear_lens() if name == "clear" else [300, 1000, 517])
    q, k, v, cu_q, cu_k = packed_inputs(batch, heads=8, kv_heads=2)
    lens = [(s["q_len"], s["k_len"]) for s in batch["sequences"]]
    kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(a for a, _ in lens),
              max_seqlen_k=max(b for _, b in lens))
    dout = torch.randn_like(q)
    plain = kw | metadata_kwargs(batch)
    prepared = dict(prepared=m.prepare(q=q, k=k, **plain))
    for call in (plain, prepared):
        a, b = _binding_and_function(m, (q, k, v), dout, deterministic=True, **call)
        for x, y, what in zip(a, b, ("out", "lse", "dq", "dk", "dv")):
            assert torch.equal(x, y), f"{name}: {what} differs"


def test_binding_without_grad_records_nothing():
    """Where autograd records nothing (no input requires grad, torch.no_grad,
    torch.inference_mode) the binding launches without its autograd node:
    out and lse bitwise those of a call that records, and no grad_fn."""
    m = load("hstu")
    batch = batch_for("hstu", [700, 300])
    q, k, v, cu_q, cu_k = packed_inputs(batch, heads=8, kv_heads=2)
    p = m.prepare(q=q, k=k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=700,
                  max_seqlen_k=700, **metadata_kwargs(batch))
    xs = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    want_out, want_lse = m.attention(*xs, prepared=p, return_lse=True)
    assert want_out.grad_fn is not None
    for context in (torch.enable_grad, torch.no_grad, torch.inference_mode):
        with context():
            for inputs in ((q, k, v), xs):
                if context is torch.enable_grad and inputs is xs:
                    continue  # records: the call above
                out, lse = m.attention(*inputs, prepared=p, return_lse=True)
                assert out.grad_fn is None and not out.requires_grad, context.__name__
                assert torch.equal(out, want_out.detach()), context.__name__
                assert torch.equal(lse, want_lse), context.__name__


def test_binding_node_retains_and_frees_as_pytorch_does():
    """The binding's autograd node as PyTorch's own: retain_graph=True runs
    the backward again (the gradients accumulate, bitwise twice), without
    it a second backward is refused; inputs of which only some require
    grad get gradients, the others none."""
    m = load("hstu")
    batch = batch_for("hstu", [700, 300])
    q, k, v, cu_q, cu_k = packed_inputs(batch, heads=8, kv_heads=2)
    p = m.prepare(q=q, k=k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=700,
                  max_seqlen_k=700, **metadata_kwargs(batch))
    dout = torch.randn_like(q)
    xs = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = m.attention(*xs, prepared=p, deterministic=True)
    out.backward(dout, retain_graph=True)
    once = [t.grad.clone() for t in xs]
    out.backward(dout)
    for t, g in zip(xs, once):
        assert torch.equal(t.grad, g + g)
    with pytest.raises(RuntimeError, match="second time"):
        out.backward(dout)
    q1 = q.detach().clone().requires_grad_()
    m.attention(q1, k, v, prepared=p, deterministic=True).backward(dout)
    assert torch.equal(q1.grad, once[0])
    assert k.grad is None and v.grad is None


def test_binding_keeps_what_the_backward_needs():
    """An autograd graph holds the descriptor, its storage and the artifact:
    the backward runs after the Mask and the Prepared are gone, and gives the
    gradients it gave while they lived."""
    import gc

    batch = batch_for("hstu", [700, 300])
    q, k, v, cu_q, cu_k = packed_inputs(batch, heads=4)
    kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=700, max_seqlen_k=700)
    dout = torch.randn_like(q)

    def grads(drop: bool):
        m = cmask.load(load("hstu").path)  # a Mask of its own
        xs = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        p = m.prepare(q=q, k=k, **kw, **metadata_kwargs(batch))
        out = m.attention(*xs, prepared=p, deterministic=True)
        if drop:
            del m, p
            gc.collect()
            torch.cuda.empty_cache()
            torch.empty(1 << 26, dtype=torch.uint8, device=DEV).fill_(0xFF)  # reuse memory
        out.backward(dout)
        return [t.grad for t in xs]

    for a, b in zip(grads(False), grads(True)):
        assert torch.equal(a, b)


def test_binding_frees_the_descriptor_with_its_last_user():
    """A descriptor's storage is freed when neither the Prepared nor an
    autograd graph holds it; a stale descriptor id is refused, not used."""
    import gc

    m = load("causal")
    q, k, v = (torch.randn(1, 4096, 8, 128, device=DEV, dtype=torch.bfloat16)
               .requires_grad_() for _ in range(3))
    m.prepare(q=q, k=k)  # the mask caches the batched layout's cu_seqlens
    torch.cuda.synchronize()
    gc.collect()
    before = torch.cuda.memory_allocated()
    p = m.prepare(q=q, k=k)
    stale = p._native_id()
    out = m.attention(q, k, v, prepared=p)
    del p
    gc.collect()
    out.sum().backward()
    del out
    gc.collect()
    q.grad = k.grad = v.grad = None
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before
    with pytest.raises(RuntimeError, match=f"descriptor {stale} is gone"):
        torch.ops.cmask_native.attention(q, k, v, stale, -1.0, -1, False)


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_binding_batched_equals_the_function_path(layout):
    """Batched [B, L, H, D] inputs (B = 3) through the binding, whose batch and
    length dimensions merge (contiguous) or do not (a [L, B, H, D] tensor
    transposed: the binding copies it contiguous): out, lse ([B, H, L]) and the
    gradients (in the inputs' shapes) bitwise equal to the Python path's."""
    m = load("hstu")
    B, L, H, Hk, D = 3, 700, 8, 2, 128
    g = torch.Generator(device=DEV).manual_seed(5)

    def make(h):
        if layout == "contiguous":
            return torch.randn(B, L, h, D, device=DEV, dtype=torch.bfloat16, generator=g)
        return torch.randn(L, B, h, D, device=DEV, dtype=torch.bfloat16,
                           generator=g).transpose(0, 1)

    q, k, v = make(H), make(Hk), make(Hk)
    p = m.prepare(q=q, k=k, context=16, num_targets=[80, 0, 33])
    dout = torch.randn(B, L, H, D, device=DEV, dtype=torch.bfloat16, generator=g)
    a, b = _binding_and_function(m, (q, k, v), dout, prepared=p, deterministic=True)
    assert a[1].shape == (B, H, L)
    for x, y, what in zip(a, b, ("out", "lse", "dq", "dk", "dv")):
        assert x.shape == y.shape, what
        assert torch.equal(x, y), f"{layout}: {what} differs"


def test_binding_length_one_strided():
    """[B, 1, H, D] inputs and dout whose length stride is not B's over L
    (a [B, H, 1, D] tensor transposed): PyTorch calls them contiguous (a
    size-1 dimension's stride is ignored), so the binding takes them as they
    are and must step its tokens by the batch stride. One key per query:
    out is v exactly (its query heads' key/value head), and the binding's
    out, lse and gradients are bitwise the Python path's."""
    m = load("causal")
    B, H, Hk, D = 3, 8, 2, 128
    g = torch.Generator(device=DEV).manual_seed(11)

    def make(h):
        return torch.randn(B, h, 1, D, device=DEV, dtype=torch.bfloat16,
                           generator=g).transpose(1, 2)

    q, k, v, dout = make(H), make(Hk), make(Hk), make(H)
    assert q.is_contiguous() and q.stride(0) != q.size(1) * q.stride(1)
    p = m.prepare(q=q, k=k)
    a, b = _binding_and_function(m, (q, k, v), dout, prepared=p)
    assert torch.equal(a[0], v.repeat_interleave(H // Hk, dim=2)), "out is not v"
    for x, y, what in zip(a, b, ("out", "lse", "dq", "dk", "dv")):
        assert x.shape == y.shape, what
        assert torch.equal(x, y), f"{what} differs"


def test_binding_errors_read_as_the_python_path():
    """With prepared=, the binding's path raises the Python path's errors."""
    m = load("causal")
    q = torch.randn(1, 256, 4, 128, device=DEV, dtype=torch.bfloat16)
    p = m.prepare(q=q, k=q)
    with pytest.raises(ValueError, match="is on cpu"):
        m.attention(q.cpu(), q, q, prepared=p)
    with pytest.raises(TypeError, match="float32"):
        m.attention(q.float(), q.float(), q.float(), prepared=p)
    with pytest.raises(TypeError, match="q must be a torch.Tensor"):
        m.attention("q", q, q, prepared=p)
    with pytest.raises(ValueError, match="head dimension must be contiguous"):
        x = torch.randn(1, 256, 4, 256, device=DEV, dtype=torch.bfloat16)[..., ::2]
        m.attention(x, q, q, prepared=p)
    with pytest.raises(cmask._capi.RuntimeError_,
                       match="q has 128 tokens and k 128; the descriptor's batch has 256"):
        x = torch.randn(1, 128, 4, 128, device=DEV, dtype=torch.bfloat16)
        m.attention(x, x, x, prepared=p)
