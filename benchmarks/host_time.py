#!/usr/bin/env python3
"""Host time of eager attention calls on a prepared descriptor, the GPU kept busy.

Issue 16's measure: CPU time per forward+backward call on a descriptor the
batch prepared once, with a spin kernel queued first so that no call waits
for the GPU (a run where the GPU went idle is flagged). In one process, in
interleaved rounds (median of ROUNDS), for the two eager bindings (the C++
operator of csrc/torch_binding.cpp and the Python autograd.Function) and
PyTorch's own floors:

  call      one layer: out = attention(q, k, v); out.backward(dout)
  layer     a stack of LAYERS attention calls (each one's output the next
            one's query), one backward: per layer (CALLS / LAYERS stacks, so
            that the launch queue, about a thousand launches deep, does not
            fill behind the spin kernel: the host would then wait)
  own k, v  the stack with every layer's own k and v (leaves, as a model's
            projections give each layer its own), gradients taken with
            torch.autograd.grad: per layer, without the additions of the
            shared k and v's gradients that the plain stack makes autograd run
  backward  the own k, v stack's torch.autograd.grad alone, per layer (its
            forward run untimed just before; the graph's teardown, freeing
            its nodes and saved tensors, falls in the next untimed forward,
            so recording + backward comes out a little under "own")
  forward   one call recording its autograd graph (no backward), and one
            under torch.no_grad()
  floor     the same shapes with x * 1 in place of attention
  SDPA      on causal shapes, PyTorch's scaled_dot_product_attention with
            its cuDNN and FlashAttention-2 backends, the same cases
  graph     (--graph) the call and the layer stack captured once in a CUDA
            graph (forward and torch.autograd.grad, at the prepared shape),
            then replayed: what a training step captured whole pays on the
            host per layer, for cmask, SDPA and x * 1 alike

    python3 benchmarks/host_time.py ARTIFACTS [--shapes causal:1024,hstu:1024] [--layers 8] [--graph]
        [--binding-source FILE] [--profile N]

--profile N: after each shape's table, N own k, v stacks of the C++ binding
under torch.profiler (CPU only, the GPU kept busy), its operators by self
CPU time (the binding names its runtime calls cmask_runtime::attention_forward
and ::attention_backward): what a layer calls and how often. Not its host
time: under the profiler every CUDA driver call costs several microseconds
more (the runtime's forward, about 15 driver calls, measured 146 us a call
under it against a whole recorded forward of 36-44 us without it).

ARTIFACTS is a directory of <mask>/ artifacts (scripts/gpu/prepare_attention.sh);
SHAPES as benchmarks/ab_forward.py takes them (mask[:N[:tile[:B]]]).
B = 1 unless the shape says, H = 32, D = 128, bf16, [B, L, H, D] leaves.

--binding-source FILE builds the C++ binding from FILE instead of the
package's python/cmask/csrc/torch_binding.cpp (cached under its own key):
an A/B of a binding change, e.g. `git show HEAD~1:python/cmask/csrc/torch_binding.cpp
> old.cpp`, then processes in the order old, new, old, new (one binding per
process; this host's time drifts between processes, so compare each pair
and the `x * 1` floor of the same process).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

import cmask

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_forward  # noqa: E402
import peers  # noqa: E402


def spin_rate() -> float:
    """torch.cuda._sleep cycles per ms."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    end.synchronize()
    return 10_000_000 / start.elapsed_time(end)


def layer_inputs(artifacts: Path, shape: str):
    """A shape's workload (mask[:N[:tile[:B]]]), its loaded mask, the q, k,
    v leaves ([B, L, H, D]), dout and the batch's prepared descriptor."""
    parts = shape.split(":")
    wl = ab_forward.workload(parts[0], int(parts[1]) if len(parts) > 1 else 1024,
                             int(parts[3]) if len(parts) > 3 else None)
    x = peers.Inputs(wl, seed=0, train=True)
    m = cmask.load(artifacts / wl.artifact)
    q, k, v = x.leaves("blhd")
    prepared = m.prepare(q=q, k=k, **(wl.layout_kwargs | wl.meta))
    return wl, m, (q, k, v), x.dout["blhd"], prepared


def host_us(fn, rate: float, calls: int, per: int = 1):
    """Host us per call (divided by `per`) of `calls` calls behind a spin
    kernel, and whether the GPU stayed busy throughout."""
    torch.cuda._sleep(int(rate * 60))
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    us = (time.perf_counter() - t0) / calls / per * 1e6
    busy = not torch.cuda.current_stream().query()
    torch.cuda.synchronize()
    return us, busy


def host_us_backward(build, rate: float, calls: int, per: int = 1):
    """host_us of the second half of `build`'s result: build() runs the
    forward (untimed) and returns a callable that runs the backward."""
    torch.cuda._sleep(int(rate * 60))
    total = 0.0
    for _ in range(calls):
        backward = build()
        t0 = time.perf_counter()
        backward()
        total += time.perf_counter() - t0
    busy = not torch.cuda.current_stream().query()
    torch.cuda.synchronize()
    return total / calls / per * 1e6, busy


def profile_table(fn, rate: float, iterations: int) -> str:
    """fn() run `iterations` times under torch.profiler (CPU activity only)
    behind a spin kernel: its operators by self CPU time."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(rate * 200))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(iterations):
            fn()
    busy = not torch.cuda.current_stream().query()
    torch.cuda.synchronize()
    return (("" if busy else "(the GPU went idle during the profile)\n") +
            prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30,
                                      max_name_column_width=90))


def captured(fn):
    """fn captured in a CUDA graph (warmed on a side stream first, as
    PyTorch asks): a callable that replays it."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("artifacts")
    p.add_argument("--shapes", default="causal:1024,hstu:1024,causal:4096")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--graph", action="store_true",
                   help="also replay the call and the layer stack from CUDA graphs")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="N own k, v stacks under torch.profiler per shape (CPU time per operator)")
    p.add_argument("--binding-source", type=Path,
                   help="build the C++ binding from this file (an A/B of a binding change)")
    a = p.parse_args()
    if a.binding_source:  # before the first cmask.load builds or loads the binding
        cmask._binding._SOURCE = a.binding_source.resolve()
    rate = spin_rate()
    print(f"binding: {cmask._binding.status()}; torch {torch.__version__}", flush=True)
    rows = []
    for shape in a.shapes.split(","):
        wl, m, (q, k, v), dout, prepared = layer_inputs(Path(a.artifacts), shape)

        def call():
            m.attention(q, k, v, prepared=prepared).backward(dout)

        def layers():
            y = q
            for _ in range(a.layers):
                y = m.attention(y, k, v, prepared=prepared)
            y.backward(dout)

        # Every layer's own k and v (the stack above shares one pair).
        own_kv = [(k.detach().clone().requires_grad_(), v.detach().clone().requires_grad_())
                  for _ in range(a.layers)]

        def own_layers(one, q0, kvs, dy, split=False):
            """The stack with every layer's own k, v; split: a callable that
            runs its forward and returns its backward (host_us_backward)."""
            def build():
                y = q0
                for ki, vi in kvs:
                    y = one(y, ki, vi)
                return lambda: torch.autograd.grad(y, [q0, *(t for kv in kvs for t in kv)], dy)
            return build if split else lambda: build()()

        def forward():
            with torch.no_grad():
                m.attention(q, k, v, prepared=prepared)

        def forward_grad():  # the forward recording its graph, no backward
            m.attention(q, k, v, prepared=prepared)

        descriptor = prepared._native_id() if m._native is not None else None

        def operator():  # the binding's operator alone, no grad
            with torch.no_grad():
                torch.ops.cmask_native.attention.default(q, k, v, descriptor, -1.0, -1, False)

        def floor_call():
            (q * 1).backward(dout)

        def floor_layers():
            y = q
            for _ in range(a.layers):
                y = y * 1
            y.backward(dout)

        def attend(y, ki, vi):
            return m.attention(y, ki, vi, prepared=prepared)

        own = own_layers(attend, q, own_kv, dout)
        cases = [("call", call, 1), ("layer", layers, a.layers), ("own", own, a.layers),
                 ("forward", forward, 1), ("forward_grad", forward_grad, 1),
                 ("backward", own_layers(attend, q, own_kv, dout, split=True), a.layers)]
        # CUDA graphs: forward and gradients (torch.autograd.grad, nothing
        # accumulated into .grad) captured once, then replayed.
        graphs = {}

        def graph_cases(one, leaves, dy):
            """The call and the layer stack of layer function `one`, each
            captured in a CUDA graph: (case, replay, layers) as `cases`."""
            def stack(n):
                def body():
                    y = leaves[0]
                    for _ in range(n):
                        y = one(y)
                    return torch.autograd.grad(y, leaves, dy)
                return body
            return [("call", captured(stack(1)), 1),
                    ("layer", captured(stack(a.layers)), a.layers)]

        if a.graph:
            m._eager_binding = True
            graphs["cmask"] = graph_cases(
                lambda y: m.attention(y, k, v, prepared=prepared), [q, k, v], dout)
            graphs["x * 1"] = graph_cases(lambda y: y * 1, [q], dout)
        # PyTorch's SDPA on the same causal shapes (cuDNN and FlashAttention-2
        # backends), as a user's host-time reference.
        sdpa = {}
        if wl.artifact == "causal" and not wl.packed:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            qs, ks, vs = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
            ds = dout.transpose(1, 2)
            for label, backend in (("SDPA cuDNN", SDPBackend.CUDNN_ATTENTION),
                                   ("SDPA flash", SDPBackend.FLASH_ATTENTION)):
                def one(y=None, kk=None, vv=None, backend=backend):
                    with sdpa_kernel(backend):
                        return torch.nn.functional.scaled_dot_product_attention(
                            qs if y is None else y, ks if kk is None else kk,
                            vs if vv is None else vv, is_causal=True,
                            enable_gqa=qs.shape[1] != ks.shape[1])

                def stack(one=one):
                    y = qs
                    for _ in range(a.layers):
                        y = one(y)
                    y.backward(ds)

                def fwd_nograd(one=one):
                    with torch.no_grad():
                        one()

                own_kvs = [(ki.detach().transpose(1, 2).requires_grad_(),
                            vi.detach().transpose(1, 2).requires_grad_()) for ki, vi in own_kv]
                sdpa[label] = [("call", lambda one=one: one().backward(ds), 1),
                               ("layer", stack, a.layers),
                               ("own", own_layers(one, qs, own_kvs, ds), a.layers),
                               ("forward", fwd_nograd, 1),
                               ("forward_grad", one, 1),
                               ("backward", own_layers(one, qs, own_kvs, ds, split=True),
                                a.layers)]
                if a.graph:
                    try:  # eager first: a backend that refuses the shape raises here
                        one()
                    except RuntimeError:
                        continue  # the rounds below report it
                    graphs[f"{label}"] = graph_cases(one, [qs, ks, vs], ds)
        results = {}
        for _ in range(a.rounds):
            for binding in (True, False):
                m._eager_binding = binding
                for name, fn, per in cases:
                    timer = host_us_backward if name == "backward" else host_us
                    for _ in range(2):  # warm (allocator, autograd)
                        fn()() if name == "backward" else fn()
                    torch.cuda.synchronize()
                    results.setdefault((binding, name), []).append(
                        timer(fn, rate, max(2, a.calls // per), per))
            m._eager_binding = True
            if descriptor is not None:
                operator()
                results.setdefault(("operator", "forward"), []).append(
                    host_us(operator, rate, a.calls))
            for label, sdpa_cases in list(sdpa.items()):
                try:
                    sdpa_cases[0][1]()
                except RuntimeError as e:  # that backend does not take the shape
                    print(f"{shape}: {label}: {str(e).splitlines()[0]}")
                    del sdpa[label]
                    continue
                for name, fn, per in sdpa_cases:
                    timer = host_us_backward if name == "backward" else host_us
                    fn()() if name == "backward" else fn()
                    results.setdefault((label, name), []).append(
                        timer(fn, rate, max(2, a.calls // per), per))
            for name, fn, per in (("call", floor_call, 1), ("layer", floor_layers, a.layers)):
                fn()
                results.setdefault(("floor", name), []).append(
                    host_us(fn, rate, max(2, a.calls // per), per))
            for who, graph_cases_of in graphs.items():
                for name, fn, per in graph_cases_of:
                    fn()
                    results.setdefault((f"graph: {who}", name), []).append(
                        host_us(fn, rate, max(2, a.calls // per), per))
        for who in (True, False, "operator", *sdpa, "floor", *(f"graph: {g}" for g in graphs)):
            label = {True: "C++ binding", False: "autograd.Function",
                     "operator": "the binding's operator alone",
                     "floor": "x * 1"}.get(who, who)
            if str(who).startswith("graph: "):
                label = f"{who[len('graph: '):]}, CUDA graph replay"
            if not any(key[0] == who for key in results):
                continue
            row = [shape, label]
            for name in ("call", "layer", "own", "backward", "forward_grad", "forward"):
                got = results.get((who, name))
                if got is None:
                    row.append("-")
                    continue
                us = statistics.median(u for u, _ in got)
                idle = not all(b for _, b in got)
                row.append(f"{us:.0f}{' (idle)' if idle else ''}")
            rows.append(row)
        if a.profile:
            m._eager_binding = True
            print(f"\n{shape}: C++ binding, {a.profile} stacks of {a.layers} layers with their own "
                  f"k, v under torch.profiler\n" + profile_table(own, rate, a.profile), flush=True)
        q = k = v = dout = prepared = graphs = own_kv = None  # free them before the next shape
        torch.cuda.empty_cache()
    print(f"\nhost us per call, median of {a.rounds} rounds of {a.calls} calls "
          f"(layer: per layer of a {a.layers}-layer stack, one backward)")
    print("| shape | eager path | call (fwd+bwd) | layer (fwd+bwd) | layer, own k, v "
          "| its backward | forward, recording | forward, no grad |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
