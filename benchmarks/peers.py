"""The peers bench_attention.py times against cmask, one table of them, and the
helpers they share with it (timing, the sampled-row check, layouts).

A peer is a name, a tensor layout and a setup: setup(workload, inputs, train)
builds what the peer needs once (a BlockMask, a cuDNN mask plan), timed apart,
and returns the attention call fn(q, k, v) -> out that is then checked and
timed forward and forward+backward exactly as cmask is (run_peer, then
time_rounds over cmask and every peer together). Every peer
is optional: an import or a call that fails is recorded as {"error": ...}.

    Flex        torch.compile(flex_attention) with the workload's BlockMask (Triton)
    Flex-FA4    the same with kernel_options={"BACKEND": "FLASH"} (FlashAttention-4's
                CuTe kernels; int32-only mask_mods, the workload's mm_fa4)
    cuDNN flex  cudnn.flex_attention.create_mask_plan on the endpoints of cmask's own
                interval table, then flex_attn_func (nvidia-cudnn-frontend 1.32)
    FA4         flash_attn.cute.flash_attn_func(causal=True); on the packed varlen
                workload flash_attn_varlen_func(causal=True): a different
                mask ("FA4 varlen causal", TFLOP/s over its own causal pairs)
    FA4 unpacked  the same with pack_gqa=False (causal GQA only; FA4 packs the
                query heads of a KV head into a tile by default)
    cuDNN SDPA, FA2   scaled_dot_product_attention(is_causal=True) under sdpa_kernel

Layouts: "bhld" is [B, H, L, D] (Flex, SDPA); "blhd" is [B, L, H, D], or the
packed [total, H, D] on a packed workload (cmask, FA4, cuDNN flex).

`python3 benchmarks/peers.py` runs the CPU self-checks (endpoint conversion,
varlen lengths); it needs torch, no GPU.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

import torch

H, D = 32, 128
DT = torch.bfloat16
FLEX_BLOCK = 128


# ---------------------------------------------------------------- workloads

@dataclass
class Workload:
    """One benchmark row: the mask, its shape and its predicates.

    mm is the mask_mod (b, h, q, k) -> bool of Flex-Triton and of the checks;
    mm_fa4 the one FlexAttention's FLASH backend traces (int32 tables and
    arithmetic only; mm itself where that holds). L is the tokens per
    sequence (batched) or in all (packed). iv (int32 [rows, K, 2], cmask's
    row intervals) and pairs are filled in once cmask has run."""
    name: str
    artifact: str
    N: int
    L: int
    mm: Callable
    mm_fa4: Callable | None = None
    meta: dict = field(default_factory=dict)
    B: int = 1
    Hkv: int = H
    causal: bool = False
    cu: torch.Tensor | None = None
    lens: list | None = None
    doc: torch.Tensor | None = None
    iv: torch.Tensor | None = None
    pairs: int = 0
    cache: dict = field(default_factory=dict)

    def __post_init__(self):
        self.mm_fa4 = self.mm_fa4 or self.mm

    @property
    def packed(self) -> bool:
        return self.cu is not None

    @property
    def gqa(self) -> bool:
        return self.Hkv != H

    @property
    def max_len(self) -> int:
        return max(self.lens) if self.packed else self.L

    @property
    def rows(self) -> int:
        return self.B * self.L

    @property
    def layout_kwargs(self) -> dict:
        """cmask's (and the varlen peers') packed-layout arguments."""
        if not self.packed:
            return {}
        return {"cu_seqlens_q": self.cu, "cu_seqlens_k": self.cu,
                "max_seqlen_q": self.max_len, "max_seqlen_k": self.max_len}


def varlen_lengths(total=32768, nseq=30, seed=0, lo=32, hi=4096, sigma=1.0):
    """nseq sequence lengths in [lo, hi] summing to total: Python's
    random.Random(seed).lognormvariate(log(total / nseq) - sigma^2 / 2, sigma)
    draws (mean total / nseq before clamping), all scaled by one factor
    (bisection) so that rounded and clamped they sum to total or just above,
    the excess then taken one token at a time from the longest sequence."""
    assert nseq * lo <= total <= nseq * hi
    rng = random.Random(seed)
    x = [rng.lognormvariate(math.log(total / nseq) - sigma * sigma / 2, sigma)
         for _ in range(nseq)]

    def fit(s):
        return [min(hi, max(lo, round(v * s))) for v in x]
    s_lo, s_hi = 0.0, 2.0 * hi / min(x)
    for _ in range(100):
        mid = (s_lo + s_hi) / 2
        s_lo, s_hi = (mid, s_hi) if sum(fit(mid)) < total else (s_lo, mid)
    lens = fit(s_hi)
    for _ in range(sum(lens) - total):
        lens[lens.index(max(lens))] -= 1
    return lens


# ---------------------------------------------------------------- inputs, layouts

def to_blhd(t, packed):
    """[B, H, L, D] -> contiguous [B, L, H, D], or [total, H, D] when packed."""
    return t[0].transpose(0, 1).contiguous() if packed else t.transpose(1, 2).contiguous()


def to_bhld(t, layout, packed):
    """A peer's tensor as a [B, H, L, D] view."""
    if layout == "bhld":
        return t
    return t.transpose(0, 1)[None] if packed else t.transpose(1, 2)


class Inputs:
    """q, k, v (and dout) in both layouts; k, v with wl.Hkv heads."""

    def __init__(self, wl: Workload, seed: int, train: bool):
        torch.manual_seed(seed)
        dev = torch.device("cuda")
        q = torch.randn(wl.B, H, wl.L, D, device=dev, dtype=DT)
        k, v = (torch.randn(wl.B, wl.Hkv, wl.L, D, device=dev, dtype=DT) for _ in range(2))
        self.packed = wl.packed
        self.t = {"bhld": (q, k, v), "blhd": tuple(to_blhd(x, wl.packed) for x in (q, k, v))}
        dout = torch.randn_like(q) if train else None
        self.dout = {"bhld": dout, "blhd": None if dout is None else to_blhd(dout, wl.packed)}

    def get(self, layout):
        return self.t[layout]

    def leaves(self, layout):
        return [x.detach().clone().requires_grad_() for x in self.t[layout]]


# ---------------------------------------------------------------- measuring

def timeit(fn, iters=10, warm=2):
    """Median of iters CUDA-event timings (ms) after warm calls (JIT compiles,
    autotuning and torch.compile happen in the warm-up)."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    ev[0].record()
    for i in range(iters):
        fn()
        ev[i + 1].record()
    torch.cuda.synchronize()
    t = sorted(ev[i].elapsed_time(ev[i + 1]) for i in range(iters))
    return t[iters // 2]


def sample_iters(ms_per_call, iters, sample_ms, most=20000):
    """The calls in one timed sample: `iters`, or as many as last `sample_ms`
    at `ms_per_call` (a probe's time) where that is more (at most `most`)."""
    if sample_ms <= 0 or ms_per_call <= 0:
        return iters
    return max(iters, min(most, math.ceil(sample_ms / ms_per_call)))


def time_rounds(calls, iters=10, rounds=5, windows=None, sample_ms=0):
    """Median ms of each call of `calls` ({key: (fn, ctx)}: ctx a context around
    its calls), timed in interleaved rounds: round r times every call (timeit)
    starting from the r-th, so that the clock drift of a process falls on all
    of them alike. On the H200 the first round of a workload ran up to 12%
    faster than the next ones, and a forward timed first in one process and
    after six other workloads in another differed by 10% while the peer timed
    after it did not (docs/performance.md, 2026-12-02 third session).
    A sample is `iters` calls back to back; with `sample_ms` > 0, as many more
    as last about sample_ms (sample_iters, from a 3-call probe before the
    rounds), so that each call's sample runs in the clock and power state
    it sets itself rather than the one the previous call left (at 10 calls
    a 32K forward's sample lasts about 130 ms; the card's power reading
    settles over about a second).
    Returns (medians, errors): a call that raises is left out of the rounds
    after it, its error text in errors[key]. With a dict `windows`, each
    key's (start, end) time.time() of every sample is appended to
    windows[key] (ClockLog.stats reads the clock in them)."""
    if rounds < 1:
        raise ValueError(f"time_rounds: rounds must be at least 1, got {rounds}")
    keys = list(calls)
    times = {key: [] for key in keys}
    errors = {}
    count = {key: iters for key in keys}
    if sample_ms > 0:
        for key in keys:
            fn, ctx = calls[key]
            try:
                with ctx():
                    count[key] = sample_iters(timeit(fn, 3), iters, sample_ms)
            except Exception as ex:  # e.g. out of memory: this call only
                errors[key] = f"{type(ex).__name__}: {str(ex)[:300]}"
    for r in range(rounds):
        live = [key for key in keys if key not in errors]
        start = r % len(live) if live else 0
        for key in live[start:] + live[:start]:
            fn, ctx = calls[key]
            try:
                with ctx():
                    t0 = time.time()
                    times[key].append(timeit(fn, count[key]))
                    if windows is not None:
                        windows.setdefault(key, []).append((t0, time.time()))
            except Exception as ex:  # e.g. out of memory: this call only
                errors[key] = f"{type(ex).__name__}: {str(ex)[:300]}"
    medians = {key: statistics.median(t) for key, t in times.items() if key not in errors}
    return medians, errors


def smi_samples(lines, device=None, fields=1):
    """(time.time() seconds, value, ...) of each line of nvidia-smi's
    `--query-gpu=index,timestamp,<fields> --format=csv,noheader,nounits`
    (`fields` numeric fields, e.g. clocks.sm and power.draw; timestamps in
    local time, as nvidia-smi prints them); only GPU `device`'s lines when
    given. Lines it cannot read ([N/A], a partial last line) are skipped."""
    out = []
    for line in lines:
        parts = [f.strip() for f in line.split(",")]
        if len(parts) != 2 + fields:
            continue
        try:
            index = int(parts[0])
            t = datetime.strptime(parts[1], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            values = tuple(float(v) for v in parts[2:])
        except ValueError:
            continue
        if device is None or index == device:
            out.append((t,) + values)
    return out


def _die_with_parent():
    """preexec_fn: the child gets SIGTERM when this process dies (Linux
    prctl PR_SET_PDEATHSIG), so a killed benchmark leaves no nvidia-smi."""
    import ctypes
    import signal
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass


class ClockLog:
    """nvidia-smi's `fields` (default the SM clock) of the GPU that runs the
    calls, sampled every `period_ms` while the context is open. After it
    closes, `samples` holds (time.time() seconds, value, ...) and
    stats(windows) is (median of the first field, number of samples) over
    the samples inside the windows ((start, end) time.time() seconds:
    time_rounds' windows), or None where no sample fell inside (samples
    shorter than the period), nvidia-smi is missing or enabled is False.
    (power.draw is a one-second average: a field for runs of seconds, as
    sustained.py's, not for a timed sample.) With CUDA_VISIBLE_DEVICES set,
    nvidia-smi's index of the device is not known here: every GPU's samples
    count if only one GPU reports; with several, there are none."""

    def __init__(self, period_ms=50, enabled=True, fields=("clocks.sm",)):
        self.period_ms, self.enabled, self.fields = period_ms, enabled, tuple(fields)
        self.samples = []

    def __enter__(self):
        self._log = tempfile.NamedTemporaryFile("w+", suffix=".csv")
        self._smi = None
        if not self.enabled:
            return self
        try:
            self._smi = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=index,timestamp," + ",".join(self.fields),
                 "--format=csv,noheader,nounits", "-lms", str(self.period_ms)],
                stdout=self._log, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        except OSError:  # no nvidia-smi: no samples
            self._smi = None
            return self
        # Its first line before the timing starts (nvidia-smi's start-up on
        # no call's samples), two seconds at most.
        deadline = time.time() + 2
        while time.time() < deadline and self._smi.poll() is None:
            if os.path.getsize(self._log.name) > 0:
                break
            time.sleep(0.01)
        return self

    def __exit__(self, *exc):
        if self._smi is not None:
            self._smi.terminate()
            try:
                self._smi.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._smi.kill()
                self._smi.wait()
        self._log.seek(0)
        lines = self._log.readlines()
        self._log.close()
        index_unknown = "CUDA_VISIBLE_DEVICES" in os.environ or not torch.cuda.is_available()
        samples = smi_samples(lines, None if index_unknown else torch.cuda.current_device(),
                              len(self.fields))
        if index_unknown and len({line.split(",")[0].strip() for line in lines} - {""}) > 1:
            samples = []  # several GPUs, and which one runs the calls is not known
        self.samples = samples
        return False

    def inside(self, windows):
        """The samples inside the windows."""
        return [s for s in self.samples if any(t0 <= s[0] <= t1 for t0, t1 in windows)]

    def stats(self, windows):
        first = [s[1] for s in self.inside(windows)]
        if not first:
            return None
        return statistics.median(first), len(first)


def wall_ms(fn):
    """(result, wall-clock ms) of one call, the device synchronized."""
    torch.cuda.synchronize()
    t0 = time.time()
    out = fn()
    torch.cuda.synchronize()
    return out, (time.time() - t0) * 1e3


def fwd_bwd(fn, inputs, dout):
    """A timed closure: out = fn(*inputs) then out.backward(dout); the gradients
    of the last call stay on the inputs."""
    def run():
        for t in inputs:
            t.grad = None
        fn(*inputs).backward(dout)
    return run


def rel(a, b):
    return (torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b)).item()


def grads_rel(a_inputs, a_layout, b_inputs, b_layout, packed):
    """max over dq, dk, dv of relFro(a, b), both seen as [B, H, L, D]."""
    return max(rel(to_bhld(x.grad, a_layout, packed).float(),
                   to_bhld(y.grad, b_layout, packed).float())
               for x, y in zip(a_inputs, b_inputs))


def sample_check(out, layout, x: Inputs, mm, rows=256):
    """relFro of sampled rows (of the first and the last batch) against fp32
    math attention with the predicate mm; GQA by repeating the K/V heads."""
    got_all = to_bhld(out, layout, x.packed)
    q, k, v = x.get("bhld")
    B, Hq, L, Dh = q.shape
    g = torch.Generator(device="cpu").manual_seed(0)
    idx = torch.unique(torch.cat([torch.randint(0, L, (rows,), generator=g),
                                  torch.tensor([0, L - 1])])).to(q.device)
    kk = torch.arange(L, device=q.device)
    worst = 0.0
    for b in sorted({0, B - 1}):
        kb, vb = (t[b].float().repeat_interleave(Hq // t.shape[1], 0) for t in (k, v))
        s = (q[b, :, idx].float() @ kb.transpose(1, 2)) / math.sqrt(Dh)
        s = s.masked_fill(~mm(b, 0, idx[:, None], kk[None, :])[None], float("-inf"))
        ref = torch.softmax(s, -1).nan_to_num(0) @ vb
        worst = max(worst, rel(got_all[b, :, idx].float(), ref))
    return worst


# ---------------------------------------------------------------- cuDNN flex endpoints

def endpoints_from_intervals(iv: torch.Tensor) -> torch.Tensor:
    """cmask's row intervals (int32 [R, K, 2]: K slots [lo, hi) per row, empty
    when lo >= hi) as cuDNN flex's endpoints (int32 [1, nfunc, R], nfunc odd):
    row r sees [0, F0) U [F1, F2) U ... . A row's non-empty slots are sorted
    and merged where they overlap or touch; a row whose first interval does not
    start at 0 gets F0 = 0; unused endpoints repeat the last end (empty
    intervals), so every row's endpoints are nondecreasing. nfunc is the
    smallest that holds every row (one host synchronization)."""
    m_lo, m_hi, n = _merge_slots(iv.long())
    R, K = m_lo.shape
    lead = (n == 0) | (m_lo[:, 0] != 0)  # needs the empty interval [0, 0) first
    zero = torch.zeros(R, 1, dtype=m_lo.dtype, device=m_lo.device)
    ext_lo, ext_hi = torch.cat([zero, m_lo, zero], 1), torch.cat([zero, m_hi, zero], 1)
    pos = torch.arange(K + 1, device=iv.device)[None]
    src = pos + 1 - lead.long()[:, None]  # 0: [0, 0); j + 1: merged interval j
    lo, hi = ext_lo.gather(1, src), ext_hi.gather(1, src)
    count = n + lead.long()
    last = hi.gather(1, (count - 1)[:, None])
    pad = pos >= count[:, None]
    lo, hi = torch.where(pad, last, lo), torch.where(pad, last, hi)
    flat = torch.stack([lo, hi], -1).reshape(R, 2 * K + 2)[:, 1:]
    nfunc = 2 * int(count.max()) - 1
    return flat[:, :nfunc].t().contiguous().to(torch.int32)[None]


def _merge_slots(iv):
    """(lo, hi, n): each row's merged intervals, sorted, in its first n of K
    columns (the rest lo = hi = 0)."""
    lo, hi = iv[..., 0], iv[..., 1]
    R, K = lo.shape
    big = torch.iinfo(torch.int64).max // 4
    empty = hi <= lo
    lo, order = lo.masked_fill(empty, big).sort(dim=1)
    hi = hi.masked_fill(empty, big).gather(1, order)
    valid = lo < big
    before = torch.cat([torch.full_like(hi[:, :1], -1), hi.cummax(dim=1).values[:, :-1]], 1)
    start = valid & (lo > before)  # the slot begins a new merged interval
    gid = torch.where(valid, start.long().cumsum(1) - 1, K)  # K: a column for the empty ones
    m_lo = torch.full((R, K + 1), big, dtype=lo.dtype, device=lo.device)
    m_lo = m_lo.scatter_reduce(1, gid, lo, "amin")
    m_hi = torch.zeros_like(m_lo).scatter_reduce(1, gid, hi, "amax")
    n = start.sum(1)
    used = torch.arange(K, device=lo.device)[None] < n[:, None]
    return (torch.where(used, m_lo[:, :K], 0), torch.where(used, m_hi[:, :K], 0), n)


# ---------------------------------------------------------------- the peers

@dataclass
class Setup:
    """What a peer's setup returns: the call, fields for the results (build
    times, a label), and optionally a context around every call, and a mask
    and pair count of its own (a peer computing a different mask)."""
    fn: Callable
    info: dict = field(default_factory=dict)
    ctx: Callable = contextlib.nullcontext
    mm: Callable | None = None
    pairs: int | None = None


@dataclass
class Peer:
    key: str
    label: str
    layout: str
    applies: Callable[[Workload], bool]
    setup: Callable[[Workload, Inputs, bool], Setup]


_FLEX = None


def _flex():
    """torch.compile(flex_attention), once: one compiled kernel per length,
    mask and backend, more than dynamo's default 8."""
    global _FLEX
    if _FLEX is None:
        import torch._dynamo
        from torch.nn.attention.flex_attention import flex_attention
        torch._dynamo.config.recompile_limit = 256
        torch._dynamo.config.accumulated_recompile_limit = 4096
        _FLEX = torch.compile(flex_attention, dynamic=False)
    return _FLEX


def _block_mask(wl: Workload, mm, iters=3):
    """create_block_mask over the workload's length, built once per mask_mod
    (Flex-Triton and Flex-FA4 share it when their mask_mods are one): the
    BlockMask and its build times (first call, then the median)."""
    from torch.nn.attention.flex_attention import create_block_mask
    key = ("block_mask", id(mm))
    if key in wl.cache:
        bm, info = wl.cache[key]
        return bm, info | {"block_mask_shared": True}

    def build():
        return create_block_mask(mm, None, None, wl.L, wl.L, device="cuda",
                                 BLOCK_SIZE=FLEX_BLOCK)
    bm, first = wall_ms(build)
    info = {"block_mask_ms": timeit(build, iters=iters, warm=1), "block_mask_first_ms": first}
    wl.cache[key] = (bm, info)
    return bm, info


def _flex_setup(fa4: bool):
    def setup(wl: Workload, x: Inputs, train: bool) -> Setup:
        bm, info = _block_mask(wl, wl.mm_fa4 if fa4 else wl.mm)
        flex, gqa = _flex(), wl.gqa
        opts = {"kernel_options": {"BACKEND": "FLASH"}} if fa4 else {}
        return Setup(lambda q, k, v: flex(q, k, v, block_mask=bm, enable_gqa=gqa, **opts), info)
    return setup


def _cudnn_flex_setup(wl: Workload, x: Inputs, train: bool) -> Setup:
    """The endpoints of cmask's interval table, then one mask plan (with the
    backward's payloads when training), its build timed apart."""
    from cudnn.flex_attention import create_mask_plan, flex_attn_func
    ep, ep_ms = wall_ms(lambda: endpoints_from_intervals(wl.iv))
    q, k, v = x.get("blhd")

    def build():
        return create_mask_plan(ep, q, k, v, build_backward=train, **wl.layout_kwargs)
    plan, first = wall_ms(build)
    info = {"nfunc": ep.shape[1], "endpoints_ms": ep_ms, "plan_first_ms": first,
            "plan_ms": timeit(build, iters=3, warm=1)}
    return Setup(lambda q, k, v: flex_attn_func(q, k, v, mask_plan=plan), info)


def _fa4_setup(wl: Workload, x: Inputs, train: bool) -> Setup:
    """FA4's own causal mask: flash_attn_func, or flash_attn_varlen_func on the
    packed workload (causal within each sequence: its own mask and pairs)."""
    from flash_attn.cute import flash_attn_func, flash_attn_varlen_func
    if not wl.packed:
        return Setup(lambda q, k, v: flash_attn_func(q, k, v, causal=True)[0])
    kw = wl.layout_kwargs
    doc = wl.doc
    return Setup(lambda q, k, v: flash_attn_varlen_func(q, k, v, causal=True, **kw)[0],
                 {"label": "FA4 varlen causal", "own_mask": "causal within each sequence"},
                 mm=lambda b, h, qi, ki: (doc[qi] == doc[ki]) & (ki <= qi),
                 pairs=sum(n * (n + 1) // 2 for n in wl.lens))


def _fa4_unpacked_setup(wl: Workload, x: Inputs, train: bool) -> Setup:
    """FA4's causal GQA without its GQA packing (pack_gqa=False; FA4 packs
    by default): where its lead at GQA comes from."""
    from flash_attn.cute import flash_attn_func
    return Setup(lambda q, k, v: flash_attn_func(q, k, v, causal=True, pack_gqa=False)[0])


def _sdpa_setup(backend_name: str):
    def setup(wl: Workload, x: Inputs, train: bool) -> Setup:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend, gqa = getattr(SDPBackend, backend_name), wl.gqa
        return Setup(lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=gqa), ctx=lambda: sdpa_kernel(backend))
    return setup


def _causal_batched(wl):
    return wl.causal and not wl.packed


PEERS = [
    Peer("flex", "Flex", "bhld", lambda wl: True, _flex_setup(fa4=False)),
    Peer("flex_fa4", "Flex-FA4", "bhld", lambda wl: True, _flex_setup(fa4=True)),
    Peer("cudnn_flex", "cuDNN flex", "blhd", lambda wl: True, _cudnn_flex_setup),
    Peer("fa4", "FA4", "blhd", lambda wl: wl.causal or wl.packed, _fa4_setup),
    Peer("fa4_unpacked", "FA4 unpacked", "blhd",
         lambda wl: wl.causal and wl.gqa and not wl.packed, _fa4_unpacked_setup),
    Peer("cudnn", "cuDNN SDPA", "bhld", _causal_batched, _sdpa_setup("CUDNN_ATTENTION")),
    Peer("flash", "FA2", "bhld", _causal_batched, _sdpa_setup("FLASH_ATTENTION")),
]
LABELS = {p.key: p.label for p in PEERS}


def setup_if_installed(peer: Peer, wl: Workload, x: Inputs, train: bool) -> Setup | None:
    """peer.setup, or None with a note on stderr where the peer's package
    does not import (not installed: ../shared/peers/fetch-peers.sh)."""
    try:
        return peer.setup(wl, x, train)
    except ImportError as ex:
        print(f"{peer.label}: not installed ({ex}); skipped", file=sys.stderr, flush=True)
        return None


def run_peer(peer: Peer, wl: Workload, x: Inputs, res: dict, cin, fwd: dict,
             train: dict) -> None:
    """Sets res[peer.key] to the peer's check (or its error), cmask's gradient
    difference to it in res["cmask_grad_errs"], and adds its timed calls to `fwd` and
    `train` (time_rounds' dicts, keyed by its key); never raises."""
    try:
        s = peer.setup(wl, x, cin is not None)
        with s.ctx():
            res[peer.key] = _check(peer, s, wl, x, res.setdefault("cmask_grad_errs", {}),
                                   cin, fwd, train)
    except Exception as ex:  # a peer may be missing or refuse the shape
        res[peer.key] = {"error": f"{type(ex).__name__}: {str(ex)[:300]}"}
        print(f"  {peer.label} on {wl.name} N={wl.N}: {res[peer.key]['error']}", flush=True)


def _check(peer: Peer, s: Setup, wl: Workload, x: Inputs, c: dict, cin, fwd, train) -> dict:
    q, k, v = x.get(peer.layout)
    d = {"err": sample_check(s.fn(q, k, v), peer.layout, x, s.mm or wl.mm),
         "flops": 4 * D * H * (s.pairs or wl.pairs), **s.info}
    if s.pairs is not None:
        d["pairs"] = s.pairs
    step = None
    if cin is not None:
        leaves = x.leaves(peer.layout)
        step = fwd_bwd(s.fn, leaves, x.dout[peer.layout])
        step()  # here, so that a peer without a backward fails inside run_peer
        if s.mm is None:  # the same mask: compare the gradients (cmask's are in cin)
            c[f"grad_err_vs_{peer.key}"] = grads_rel(cin, "blhd", leaves, peer.layout, x.packed)
    # Timed only once every check has passed.
    fwd[peer.key] = (lambda: s.fn(q, k, v), s.ctx)
    if step is not None:
        train[peer.key] = (step, s.ctx)
    return d


def record_times(res: dict, fwd: tuple, train: tuple, clocks=({}, {})) -> None:
    """time_rounds' (medians, errors) of the forward and forward+backward
    rounds into the results (their flops from the checks): a peer whose timed
    call failed becomes {"error": ...}; a failure of cmask's own calls raises
    (the row is lost, as when cmask fails anywhere else). `clocks`: the
    forward's and forward+backward's {key: ClockLog.stats} (mhz and
    mhz_samples, train_mhz and train_mhz_samples in the results)."""
    fwd_ms, train_ms = fwd[0], train[0]
    for key, why in {**fwd[1], **train[1]}.items():
        if key.startswith("cmask"):
            raise RuntimeError(f"{key}: {why}")
        res[key] = {"error": why}
        print(f"  {LABELS.get(key, key)}: {why}", flush=True)
    for key, d in res.items():
        if not isinstance(d, dict) or "flops" not in d:
            continue
        flops = d.pop("flops")
        if key in fwd_ms:
            d.update(ms=fwd_ms[key], tflops=flops / fwd_ms[key] / 1e9)
        if key in train_ms:
            d.update(train_ms=train_ms[key], train_tflops=3.5 * flops / train_ms[key] / 1e9)
        for prefix, stats in zip(("", "train_"), clocks):
            if stats.get(key):
                d[prefix + "mhz"], d[prefix + "mhz_samples"] = stats[key]


# ---------------------------------------------------------------- self-checks (CPU)

def _endpoints_reference(row):
    """One row's slots [(lo, hi)] -> its endpoint list, plainly."""
    merged = []
    for lo, hi in sorted((lo, hi) for lo, hi in row if hi > lo):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    if not merged or merged[0][0] != 0:
        merged.insert(0, [0, 0])
    return [e for pair in merged for e in pair][1:]


def _visible(ends, k_len):
    """The keys the endpoints [0, F0) U [F1, F2) U ... show."""
    b = [0] + list(ends)
    return {j for i in range(0, len(b), 2) for j in range(b[i], min(b[i + 1], k_len))}


def selfcheck(rows=2000, K=4, k_len=64, seed=1):
    """endpoints_from_intervals against the plain reference on random slot
    tables (overlapping, touching, nested, empty slots), and varlen_lengths."""
    g = torch.Generator().manual_seed(seed)
    iv = torch.randint(0, k_len + 1, (rows, K, 2), generator=g, dtype=torch.int32)
    iv[torch.rand(rows, K, generator=g) < 0.3] = 0  # cmask stores empty slots as (0, 0)
    iv[:9] = 0
    iv[:7, 0] = torch.tensor([0, 5], dtype=torch.int32)  # causal-like rows; row 7 sees nothing
    if K >= 4:  # sorted and merged: [5, 30), [40, 41), after the empty [0, 0)
        iv[8, :4] = torch.tensor([[10, 20], [20, 30], [5, 12], [40, 41]], dtype=torch.int32)
    ep = endpoints_from_intervals(iv)
    nfunc = ep.shape[1]
    assert ep.dtype == torch.int32 and ep.shape == (1, nfunc, rows) and nfunc % 2 == 1
    want_n = max(len(_endpoints_reference(r.tolist())) for r in iv)
    assert nfunc == want_n, (nfunc, want_n)
    for r in range(rows):
        got, row = ep[0, :, r].tolist(), iv[r].tolist()
        ref = _endpoints_reference(row)
        assert got == ref + [ref[-1]] * (nfunc - len(ref)), (row, got, ref)
        assert all(a <= b for a, b in zip(got, got[1:])), got
        union = {j for lo, hi in row for j in range(lo, hi)}
        assert _visible(got, k_len) == union, (row, got)
    assert ep[0, :, 0].tolist()[0] == 5 and set(ep[0, :, 7].tolist()) == {0}
    assert K < 4 or ep[0, :, 8].tolist()[:5] == [0, 5, 30, 40, 41]
    lens = varlen_lengths()
    assert len(lens) == 30 and sum(lens) == 32768 and 32 <= min(lens) and max(lens) <= 4096
    assert lens == varlen_lengths()
    print(f"endpoints: {rows} rows, K={K}, nfunc={nfunc}: ok; varlen lengths "
          f"(min {min(lens)}, max {max(lens)}): {lens}")


if __name__ == "__main__":
    selfcheck()
