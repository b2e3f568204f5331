#!/usr/bin/env python3
"""Where a layer's host time goes, by clocks inside the C++ binding.

    python3 benchmarks/host_split.py ARTIFACTS [SHAPES] [--layers 8] [--stacks 40]

host_time.py times whole calls from Python, and torch.profiler inflates every
CUDA driver call (docs/performance.md, thirty-ninth session). This builds the
binding from python/cmask/csrc/torch_binding.cpp with steady_clock segments
inserted at named places (INSTRUMENT below: a place the binding no longer
has is an error that names it) and an operator torch.ops.cmask_native.timers()
that returns and resets their sums and medians. It then runs STACKS stacks of LAYERS
layers, each layer with its own k and v, behind spin kernels (the GPU kept
busy), and times each stack's forward and its torch.autograd.grad from
Python. Per layer, us:

  fwd py, bwd py  the Python-side forward and backward
  get             the forward's descriptor lookup
  apply           torch::autograd::Function::apply, whole: the next five
                  and the node's own bookkeeping
  asTokens, alloc (out, lse), views (the runtime's arguments),
  runtime         (cmask_attention_forward: its checks and one launch), save
                  (save_for_backward, saved_data)
  unpack          the node's backward body: the saved tensors, the
                  descriptor, dout.contiguous()
  alloc           dq, dk, dv and the scratch
  views, runtime  (cmask_attention_backward: its checks and three launches)
  node            the node's backward body, whole: the four before
  engine          bwd py - node: autograd's engine, outside the node

SHAPES as host_time.py takes them (mask[:N[:tile[:B]]]); H = 32, D = 128, bf16.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

BINDING = Path(__file__).resolve().parents[1] / "python" / "cmask" / "csrc" / "torch_binding.cpp"

SEGS = ["FGet", "FApply", "FAsTokens", "FAlloc", "FViews", "FRun", "FSave",
        "BUnpack", "BAlloc", "BViews", "BRun", "BTotal", "NFwd", "NBwd"]

# (a place in torch_binding.cpp, what it becomes), in order.
INSTRUMENT = [
    ("#include <dlfcn.h>\n", "#include <dlfcn.h>\n\n#include <algorithm>\n#include <atomic>\n#include <chrono>\n"),
    ("namespace {\n\nusing at::Tensor;", """namespace {

using at::Tensor;

enum Seg { """ + ", ".join(SEGS) + """, NSeg };
std::atomic<int64_t> timer[NSeg];
// Each segment's samples, for its median (a segment is timed by one thread at
// a time: the forward's by the caller's, the backward's by autograd's).
std::vector<int64_t> samples[NSeg];
inline int64_t nowNs() {
  return std::chrono::steady_clock::now().time_since_epoch().count();
}
inline void add(Seg s, int64_t &t) {
  int64_t n = nowNs();
  timer[s] += n - t;
  samples[s].push_back(n - t);
  t = n;
}"""),
    ("  const Tensor &c = callerQ;\n",
     "  const Tensor &c = callerQ;\n  int64_t t = nowNs();\n"),
    ("  cmask_attention_args args{", "  add(FAlloc, t);\n  cmask_attention_args args{"),
    ("                            /*section_heads=*/0};\n",
     "                            /*section_heads=*/0};\n  add(FViews, t);\n"),
    ("""  check(rt.cmask_attention_forward(d.artifact->handle, d.handle, &args,
                                   currentStream(q)));
""", """  check(rt.cmask_attention_forward(d.artifact->handle, d.handle, &args,
                                   currentStream(q)));
  add(FRun, t);
  timer[NFwd] += 1;
"""),
    ("  Tensor dq = at::empty(", "  int64_t t = nowNs();\n  Tensor dq = at::empty("),
    ("  cmask_backward_args args{", "  add(BAlloc, t);\n  cmask_backward_args args{"),
    ("      d.maxSeqlenQ};\n", "      d.maxSeqlenQ};\n  add(BViews, t);\n"),
    ("""  check(rt.cmask_attention_backward(d.artifact->handle, d.handle, &args,
                                    currentStream(q)));
""", """  check(rt.cmask_attention_backward(d.artifact->handle, d.handle, &args,
                                    currentStream(q)));
  add(BRun, t);
  timer[NBwd] += 1;
"""),
    ("    Tensor qt = asTokens(q), kt = asTokens(k), vt = asTokens(v);\n",
     "    int64_t t = nowNs();\n"
     "    Tensor qt = asTokens(q), kt = asTokens(k), vt = asTokens(v);\n"
     "    add(FAsTokens, t);\n"),
    ("    ctx->save_for_backward(", "    t = nowNs();\n    ctx->save_for_backward("),
    ("    ctx->set_materialize_grads(false);\n",
     "    ctx->set_materialize_grads(false);\n    add(FSave, t);\n"),
    ("    variable_list saved = ctx->get_saved_variables();\n",
     "    int64_t t0 = nowNs(), t = t0;\n"
     "    variable_list saved = ctx->get_saved_variables();\n"),
    ("    Tensor dout = grads[0].contiguous();\n",
     "    Tensor dout = grads[0].contiguous();\n    add(BUnpack, t);\n"),
    ("      result[i] = std::move(g[i]);\n    return result;",
     "      result[i] = std::move(g[i]);\n    add(BTotal, t0);\n    return result;"),
    ("  c10::intrusive_ptr<Descriptor> d = registry().get(descriptor);\n",
     "  int64_t t = nowNs();\n"
     "  c10::intrusive_ptr<Descriptor> d = registry().get(descriptor);\n"
     "  add(FGet, t);\n"),
    ("  variable_list r = Attention::apply(",
     "  t = nowNs();\n  variable_list r = Attention::apply("),
    ("  return {r[0], r[1]};", "  add(FApply, t);\n  return {r[0], r[1]};"),
    ('  m.def("struct_layout() -> int[]", &structLayout);', """  m.def("struct_layout() -> int[]", &structLayout);
  m.def("timers() -> int[]", []() {
    // The sums (and counts), then the medians; reset.
    std::vector<int64_t> out;
    for (auto &x : timer)
      out.push_back(x.exchange(0));
    for (auto &v : samples) {
      std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
      out.push_back(v.empty() ? 0 : v[v.size() / 2]);
      v.clear();
    }
    return out;
  });"""),
]


def instrumented(source: str) -> str:
    for place, replacement in INSTRUMENT:
        if source.count(place) != 1:
            raise SystemExit(f"host_split: torch_binding.cpp has {source.count(place)} of this "
                             f"place (one expected; update INSTRUMENT):\n{place}")
        source = source.replace(place, replacement)
    return source


def main():
    # Here, so that the instrumentation's test imports this file without a GPU.
    import torch

    import cmask

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import host_time

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("artifacts", type=Path)
    p.add_argument("shapes", nargs="?", default="causal:1024,hstu:1024,causal:4096")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--stacks", type=int, default=40)
    a = p.parse_args()
    source = BINDING.read_text()
    timed = Path(tempfile.mkdtemp(prefix="cmask-host-split-")) / "torch_binding_timed.cpp"
    timed.write_text(instrumented(source))
    cmask._binding._SOURCE = timed  # before the first cmask.load builds the binding
    rate = host_time.spin_rate()
    rows = []
    for shape in a.shapes.split(","):
        _, m, (q, k, v), dout, prepared = host_time.layer_inputs(a.artifacts, shape)
        if m._native is None:
            sys.exit(f"host_split: the binding did not load ({cmask._binding.status()})")
        kvs = [(k.detach().clone().requires_grad_(), v.detach().clone().requires_grad_())
               for _ in range(a.layers)]
        leaves = [q, *(t for kv in kvs for t in kv)]

        def stack():
            y = q
            for ki, vi in kvs:
                y = m.attention(y, ki, vi, prepared=prepared)
            return y

        for _ in range(3):  # warm: the allocator, autograd
            torch.autograd.grad(stack(), leaves, dout)
        torch.cuda.synchronize()
        torch.ops.cmask_native.timers()  # reset
        fw, bw, idle = [], [], False
        for i in range(a.stacks):
            if i % 10 == 0:  # a spin kernel longer than ten stacks' host time
                torch.cuda.synchronize()
                torch.cuda._sleep(int(rate * 40))
            t0 = time.perf_counter()
            y = stack()
            t1 = time.perf_counter()
            torch.autograd.grad(y, leaves, dout)
            fw.append(t1 - t0)
            bw.append(time.perf_counter() - t1)
            if i % 10 == 9:
                idle |= torch.cuda.current_stream().query()
        sums_medians = torch.ops.cmask_native.timers()
        t = dict(zip(SEGS, sums_medians))
        med = dict(zip(SEGS, sums_medians[len(SEGS):]))
        torch.cuda.synchronize()
        n = a.layers * a.stacks
        if t["NFwd"] != n or t["NBwd"] != n:
            sys.exit(f"host_split: {t['NFwd']} forward and {t['NBwd']} backward launches "
                     f"counted, {n} expected")
        us = {s: t[s] / n / 1000 for s in SEGS[:-2]}
        bwd = statistics.median(bw) / a.layers * 1e6
        fwd = statistics.median(fw) / a.layers * 1e6
        label = shape + (" (the GPU went idle)" if idle else "")
        rows.append([label, fwd, bwd, *(us[s] for s in SEGS[:-2]), bwd - us["BTotal"]])
        rows.append([label + ", medians", fwd, bwd,
                     *(med[s] / 1000 for s in SEGS[:-2]), bwd - med["BTotal"] / 1000])
        print(f"{shape}: done", flush=True)
    print(f"\nhost us per layer ({a.stacks} stacks of {a.layers} layers, each layer with its own "
          "k, v; fwd py and bwd py: medians per stack; the rest: means, then medians per call)")
    print("| shape | fwd py | bwd py | get | apply | asTokens | alloc | views | runtime | save "
          "| unpack | alloc | views | runtime | node | engine |")
    print("|---|" + "---|" * 15)
    for r in rows:
        print(f"| {r[0]} | " + " | ".join(f"{x:.1f}" for x in r[1:]) + " |")


if __name__ == "__main__":
    main()
