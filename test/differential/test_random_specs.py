"""Differential test on random MaskSpecs.

A small generator builds random valid specs: 1-3 regions with random j-free
guards (sometimes with a bounded union), and rules that are random boolean
trees (depth <= 4: and, or, not, bounded unions `any d in [lo, hi]`) over
interval-expressible atoms: linear j-expressions against j-free ones
(`j <= i + k`, `i - j >= w`, `2*j < i + 3`, `d*j ...` inside a union, j on
both sides, j cancelling out), `j floordiv C cmp e`, `min(j, e) cmp f`,
`max(j, e) cmp f`, `seg(j) cmp seg(i)`, nested compositions of these
(`(2*min(j, w) - 3) floordiv 2 < p[b]`), unions of intervals with shared
endpoints (to exercise slot merging and subsumption), and j-free atoms (row
conditions). j-free expressions use every integer operation (+, -, *,
floordiv, mod, min, max, select, isqrt, metadata, lookups, segment helpers),
including the corner cases: division by a run-time zero, negative isqrt,
lookups out of range, segment indices outside the offsets. Specs whose masks
are trivially empty or full are mostly rejected (by the Python evaluation).

Every spec is emitted as MLIR text and evaluated here, independently, on
random metadata (numpy, Python integer semantics). The compiled intervals
(`cmask-translate --cmask-to-intervals-json`), the dense oracle
(`--cmask-to-dense-json`) and this evaluation must agree on every element.
"""

from __future__ import annotations

import json
import math
import os
import re

import numpy as np
import pytest

from conftest import run_tool, slots_to_string, translate_batches
from test_host_twin import directions, expected_tiles

# CMASK_RANDOM_SPECS / CMASK_RANDOM_SEED widen or move the search (e.g. for a
# long exploratory run); the defaults keep the test at a few seconds.
NUM_SPECS = int(os.environ.get("CMASK_RANDOM_SPECS", "120"))
INSTANCES_PER_SPEC = 20
SEED = int(os.environ.get("CMASK_RANDOM_SEED", "20261129"))
MAX_DNF = 600  # upper bound on a rule's DNF size (the compiler fails at 4096)

PREDS = ["eq", "ne", "lt", "le", "gt", "ge"]
PRED_SYM = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
INT_BINOPS = ["add", "sub", "mul", "floordiv", "mod", "min", "max"]

# ---------------------------------------------------------------------------
# Expression trees (tuples)
#   ints:  ("const", v) ("var", name) ("d", k) ("meta",) ("lookup", idx)
#          ("seg", pos) ("seg_start", s) ("seg_end", s) ("isqrt", a)
#          ("select", cond, a, b) (binop, a, b) for binop in INT_BINOPS
#   bools: ("bool", v) ("cmp", pred, a, b) ("and", [xs]) ("or", [xs])
#          ("not", x) ("any", k, lo, hi, body)
# Metadata of every random spec: @w scalar, @p per_sequence, @o offsets.
# ---------------------------------------------------------------------------


def show(n) -> str:
    """Infix text of a tree, for messages."""
    t = n[0]
    if t == "const":
        return str(n[1])
    if t == "var":
        return n[1]
    if t == "d":
        return f"d{n[1]}"
    if t == "meta":
        return "w"
    if t == "lookup":
        return f"p[{show(n[1])}]"
    if t in ("seg", "seg_start", "seg_end", "isqrt"):
        return f"{t}({show(n[1])})"
    if t == "select":
        return f"({show(n[1])} ? {show(n[2])} : {show(n[3])})"
    if t in ("min", "max"):
        return f"{t}({show(n[1])}, {show(n[2])})"
    if t in INT_BINOPS:
        op = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%"}[t]
        return f"({show(n[1])} {op} {show(n[2])})"
    if t == "bool":
        return "true" if n[1] else "false"
    if t == "cmp":
        return f"{show(n[2])} {PRED_SYM[n[1]]} {show(n[3])}"
    if t in ("and", "or"):
        return "(" + f" {t} ".join(show(x) for x in n[1]) + ")"
    if t == "not":
        return f"not({show(n[1])})"
    if t == "any":
        return f"any d{n[1]} in [{n[2]}, {n[3]}]: ({show(n[4])})"
    raise ValueError(t)


def mentions_j(n) -> bool:
    if n[0] == "var":
        return n[1] == "j"
    return any(isinstance(c, tuple) and mentions_j(c) for c in n[1:]) or any(
        isinstance(c, list) and any(mentions_j(x) for x in c) for c in n[1:])


def count_j_minmax(n) -> int:
    """Number of min/max nodes over j-expressions in an integer tree."""
    if not isinstance(n, tuple) or n[0] in ("bool", "cmp", "and", "or", "not", "any"):
        return 0
    here = 1 if n[0] in ("min", "max") and mentions_j(n) else 0
    return here + sum(count_j_minmax(c) for c in n[1:] if isinstance(c, tuple))


# ---------------------------------------------------------------------------
# Generator
# ---------------------------------------------------------------------------


class Gen:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.next_d = 0

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def pick(self, items, weights=None):
        if weights is None:
            return items[int(self.rng.integers(len(items)))]
        w = np.asarray(weights, dtype=float)
        return items[int(self.rng.choice(len(items), p=w / w.sum()))]

    def const(self, lo, hi):
        return ("const", int(self.rng.integers(lo, hi + 1)))

    # -- j-free integer expressions ----------------------------------------
    def leaf(self, ds):
        kinds = ["i", "const", "q_len", "k_len", "b", "meta", "lookup_b",
                 "lookup_odd", "seg_i", "seg_start", "seg_end", "seg_odd", "d"]
        weights = [4, 3, 1, 1, 0.5, 2, 2, 0.4, 1, 1.2, 1.2, 0.4, 3 if ds else 0]
        k = self.pick(kinds, weights)
        if k == "i":
            return ("var", "i")
        if k == "const":
            return self.const(-3, 8)
        if k in ("q_len", "k_len", "b"):
            return ("var", k)
        if k == "meta":
            return ("meta",)
        if k == "lookup_b":
            return ("lookup", ("var", "b"))
        if k == "lookup_odd":  # possibly out of range: reads 0
            return ("lookup", self.pick([("var", "i"), self.const(-2, 4),
                                         ("add", ("var", "b"), ("const", 1))]))
        if k == "seg_i":
            return ("seg", ("var", "i"))
        if k == "seg_start":
            return ("seg_start", ("seg", ("var", "i")))
        if k == "seg_end":
            return ("seg_end", ("seg", ("var", "i")))
        if k == "seg_odd":  # segment helpers at odd positions / indices
            which = self.pick(["seg", "seg_start", "seg_end"])
            arg = self.pick([self.const(-2, 8),
                             ("add", ("seg", ("var", "i")), self.const(-2, 2)),
                             ("sub", ("var", "i"), self.const(1, 4))])
            return (which, arg)
        if k == "d":
            return ("d", self.pick(ds))
        raise AssertionError(k)

    def jfree(self, depth, ds):
        if depth <= 0 or self.chance(0.45):
            return self.leaf(ds)
        op = self.pick(INT_BINOPS + ["isqrt", "select"],
                       [3, 3, 1.5, 1.2, 1.2, 1.5, 1.5, 0.8, 0.8])
        if op == "isqrt":
            return ("isqrt", self.jfree(depth - 1, ds))
        if op == "select":
            return ("select", self.jfree_atom(depth - 1, ds),
                    self.jfree(depth - 1, ds), self.jfree(depth - 1, ds))
        if op == "mul":  # keep magnitudes small: one factor a small constant or d
            small = self.pick([self.const(-3, 3), ("d", self.pick(ds)) if ds else ("const", 2),
                               self.leaf(ds)])
            other = self.jfree(depth - 1, ds)
            return ("mul", small, other) if self.chance(0.5) else ("mul", other, small)
        if op in ("floordiv", "mod"):
            # A literal 0 divisor is a verifier error; a run-time 0 (w, p[b],
            # seg(i), d, ... can be 0) must evaluate to 0.
            div = self.pick([("const", self.pick([-3, -2, -1, 1, 2, 3, 4, 5])),
                             self.leaf(ds), ("sub", ("var", "i"), ("var", "i"))])
            if div[0] == "const" and div[1] == 0:
                div = ("const", 2)
            return (op, self.jfree(depth - 1, ds), div)
        return (op, self.jfree(depth - 1, ds), self.jfree(depth - 1, ds))

    def jfree_atom(self, depth, ds):
        if self.chance(0.6):  # a row split: i cmp position
            lhs, rhs = ("var", "i"), self.position(ds)
            if self.chance(0.3):
                lhs, rhs = rhs, lhs
            return ("cmp", self.pick(PREDS), lhs, rhs)
        return ("cmp", self.pick(PREDS), self.jfree(depth, ds), self.jfree(depth, ds))

    def position(self, ds):
        """A j-free expression that is usually a position in the sequence
        (so that atoms split rows and keys in interesting places)."""
        i = ("var", "i")
        k = self.pick(["i+c", "i-w", "p", "w", "seg", "kq", "d", "any"],
                      [4, 1.5, 1.5, 1, 1.5, 1, 5 if ds else 0, 3])
        if k == "i+c":
            return self.pick([i, ("add", i, self.const(-4, 4)), ("sub", i, self.const(-4, 4))])
        if k == "i-w":
            return self.pick([("sub", i, ("meta",)), ("add", i, ("meta",))])
        if k == "p":
            return ("lookup", ("var", "b"))
        if k == "w":
            return self.pick([("meta",), self.const(0, 12)])
        if k == "seg":
            return (self.pick(["seg_start", "seg_end"]), ("seg", i))
        if k == "kq":
            return self.pick([("sub", ("var", "k_len"), self.const(0, 5)),
                              ("sub", ("var", "k_len"), ("var", "q_len")),
                              ("add", i, ("sub", ("var", "k_len"), ("var", "q_len")))])
        if k == "d":
            return ("add", i, ("d", self.pick(ds)))
        return self.jfree(2, ds)

    # -- atoms that mention j ---------------------------------------------
    def coef_times_j(self, ds):
        """c * j with a constant (or union-variable) coefficient c != 0
        (c may be 0 in a copy of a union when it is built from d)."""
        j = ("var", "j")
        k = self.pick(["1", "-1", "c", "d"], [4, 2, 2, 1.5 if ds else 0])
        if k == "1":
            return j, "pos"
        if k == "-1":
            return j, "neg"
        if k == "c":
            c = self.pick([2, 3, -2, -3, 4])
            m = ("const", c)
            return (("mul", m, j) if self.chance(0.5) else ("mul", j, m)), "term"
        d = ("d", self.pick(ds))
        m = d if self.chance(0.6) else ("add", d, self.const(1, 3))
        return (("mul", m, j) if self.chance(0.5) else ("mul", j, m)), "term"

    def linear_j(self, ds):
        """A j-expression c*j + e with e j-free (or absent)."""
        term, sign = self.coef_times_j(ds)
        e = self.jfree(1, ds) if self.chance(0.4) else None
        if sign == "neg":  # e - j  (or 0 - j)
            return ("sub", e if e is not None else ("const", 0), term)
        if e is None:
            return term
        return self.pick([("add", term, e), ("add", e, term), ("sub", term, e)])

    def jterm(self, depth, ds):
        """A composite j-expression the compiler must still isolate exactly:
        constant (or union-variable) multiples, shifts, `floordiv` by a
        positive constant, min/max, over j or seg(j), nested."""
        if depth <= 0 or self.chance(0.25):
            return ("var", "j") if self.chance(0.8) else ("seg", ("var", "j"))
        k = self.pick(["scale", "shift", "floordiv", "minmax", "minmax2"], [2, 3, 2, 2, 0.5])
        t = self.jterm(depth - 1, ds)
        if k == "scale":
            c = self.pick([("const", 2), ("const", 3), ("const", -1), ("const", -2)]
                          + ([("d", self.pick(ds))] if ds else []))
            return ("mul", c, t) if self.chance(0.5) else ("mul", t, c)
        if k == "shift":
            e = self.pick([self.const(-4, 4), self.position(ds), ("meta",)])
            return self.pick([("add", t, e), ("add", e, t), ("sub", t, e), ("sub", e, t)])
        if k == "floordiv":
            return ("floordiv", t, ("const", int(self.rng.integers(1, 5))))
        op = self.pick(["min", "max"])
        other = self.position(ds) if k == "minmax" else self.jterm(depth - 1, ds)
        return (op, t, other) if self.chance(0.5) else (op, other, t)

    def interval_union(self, ds):
        """2-3 intervals `lo <= j < hi` (or `j <= hi`) with endpoints from a
        small pool, so that equal, adjacent, nested and overlapping slots are
        common: this stresses the slot canonicalization (merge, subsume)."""
        pool = [("const", 0), ("var", "i"), ("add", ("var", "i"), ("const", 1)),
                ("meta",), ("lookup", ("var", "b")),
                ("seg_start", ("seg", ("var", "i"))), ("seg_end", ("seg", ("var", "i"))),
                ("var", "k_len"), ("sub", ("var", "q_len"), ("lookup", ("var", "b"))),
                ("add", ("meta",), ("const", 1))]
        if ds:
            pool.append(("add", ("var", "i"), ("d", self.pick(ds))))
        parts = []
        for _ in range(int(self.rng.integers(2, 4))):
            conj = []
            if self.chance(0.85):
                conj.append(("cmp", self.pick(["ge", "gt"], [4, 1]), ("var", "j"), self.pick(pool)))
            if self.chance(0.85):
                conj.append(("cmp", self.pick(["lt", "le"], [4, 1]), ("var", "j"), self.pick(pool)))
            if self.chance(0.2):
                conj.append(self.jfree_atom(1, ds))
            if not conj:
                conj.append(("bool", True))
            parts.append(("and", conj) if len(conj) > 1 else conj[0])
        return ("or", parts)

    def j_atom(self, ds):
        if self.chance(0.12):
            return self.interval_union(ds)
        kind = self.pick(["linear", "both_sides", "floordiv", "minmax", "seg",
                          "composite", "cancel"],
                         [6, 1, 1.5, 1.5, 1.5, 3, 0.3])
        pred = self.pick(PREDS)
        if kind == "composite":
            lhs, rhs = self.jterm(3, ds), self.position(ds)
        elif kind == "cancel":  # j cancels out: a row condition in disguise
            lhs = ("add", ("var", "j"), self.position(ds))
            rhs = ("add", self.position(ds), ("var", "j"))
        elif kind == "linear":
            lhs, rhs = self.linear_j(ds), self.position(ds)
        elif kind == "both_sides":  # j on both sides with different coefficients
            c1, c2 = self.pick([(1, 2), (2, 1), (1, 3), (3, 2), (1, -1), (-1, 1)])
            lhs = ("add", ("mul", ("const", c1), ("var", "j")), self.position(ds))
            rhs = ("add", ("mul", ("const", c2), ("var", "j")), self.jfree(0, ds))
        elif kind == "floordiv":
            dividend = ("var", "j") if self.chance(0.7) else ("add", ("var", "j"), self.const(-3, 3))
            C = int(self.rng.integers(1, 6))
            lhs = ("floordiv", dividend, ("const", C))
            rhs = self.pick([("floordiv", ("var", "i"), ("const", C)),
                             ("floordiv", self.position(ds), ("const", C)), self.jfree(1, ds)])
        elif kind == "minmax":
            op = self.pick(["min", "max"])
            other = self.position(ds)
            lhs = (op, ("var", "j"), other) if self.chance(0.5) else (op, other, ("var", "j"))
            rhs = self.position(ds)
        else:  # seg
            lhs = ("seg", ("var", "j"))
            rhs = self.pick([("seg", ("var", "i")),
                             ("add", ("seg", ("var", "i")), self.const(-1, 1)),
                             self.jfree(1, ds)], [6, 1, 1])
            if self.chance(0.5):
                pred = self.pick(["eq", "ne"])
        if self.chance(0.3):
            lhs, rhs = rhs, lhs
        return ("cmp", pred, lhs, rhs)

    # -- boolean trees -------------------------------------------------------
    def boolean(self, depth, ds, allow_j, state):
        if depth <= 0 or self.chance(0.3):
            u = self.rng.random()
            if u < 0.04:
                return ("bool", self.chance(0.5))
            if allow_j and u < 0.85:
                return self.j_atom(ds)
            return self.jfree_atom(1, ds)
        kinds = ["and", "or", "not", "any"]
        weights = [3, 3, 1, 1.2 if state["anys"] > 0 else 0]
        k = self.pick(kinds, weights)
        if k == "not":
            return ("not", self.boolean(depth - 1, ds, allow_j, state))
        if k == "any":
            state["anys"] -= 1
            d = self.next_d
            self.next_d += 1
            lo = int(self.rng.integers(-3, 3))
            hi = lo + int(self.rng.integers(0, 4))
            return ("any", d, lo, hi, self.boolean(depth - 1, ds + [d], allow_j, state))
        n = int(self.rng.integers(2, 4))
        return (k, [self.boolean(depth - 1, ds, allow_j, state) for _ in range(n)])

    def spec(self):
        regions = []
        nreg = int(self.rng.integers(1, 4))
        for r in range(nreg):
            if self.chance(0.05) or (r == nreg - 1 and self.chance(0.6)):
                guard = ("bool", True)
            else:
                guard = self.boolean(2, [], False, {"anys": int(self.chance(0.2))})
            rule = self.boolean(int(self.rng.integers(1, 5)), [], True,
                                {"anys": int(self.rng.integers(0, 3))})
            regions.append((guard, rule))
        return regions


def dnf_size(n, positive=True) -> int:
    """An upper bound on the number of DNF conjuncts of n (or of not n)."""
    t = n[0]
    if t == "bool":
        return 1
    if t == "cmp":
        return 2 * 3 ** sum(count_j_minmax(x) for x in n[2:])
    if t == "not":
        return dnf_size(n[1], not positive)
    if t in ("and", "or"):
        sizes = [dnf_size(x, positive) for x in n[1]]
        if (t == "and") == positive:
            return math.prod(sizes)
        return sum(sizes)
    if t == "any":
        copies = n[3] - n[2] + 1
        s = dnf_size(n[4], positive)
        return s * copies if positive else s ** copies
    raise ValueError(t)


# ---------------------------------------------------------------------------
# MLIR emission
# ---------------------------------------------------------------------------


class Emitter:
    def __init__(self):
        self.lines = []
        self.count = 0
        self.indent = 0

    def emit(self, text):
        self.lines.append("  " * self.indent + text)

    def fresh(self):
        self.count += 1
        return f"%v{self.count}"

    def op(self, text):
        name = self.fresh()
        self.emit(f"{name} = {text}")
        return name

    def int_(self, n, env):
        t = n[0]
        if t == "const":
            return self.op(f"cmask.constant {n[1]} : i64")
        if t == "var":
            return env[n[1]]
        if t == "d":
            return f"%d{n[1]}"
        if t == "meta":
            return self.op("cmask.meta @w")
        if t == "lookup":
            return self.op(f"cmask.lookup @p[{self.int_(n[1], env)}]")
        if t in ("seg", "seg_start", "seg_end"):
            return self.op(f"cmask.{t} @o({self.int_(n[1], env)})")
        if t == "isqrt":
            return self.op(f"cmask.isqrt {self.int_(n[1], env)}")
        if t == "select":
            c = self.bool_(n[1], env)
            a = self.int_(n[2], env)
            b = self.int_(n[3], env)
            return self.op(f"cmask.select {c}, {a}, {b}")
        if t in INT_BINOPS:
            a = self.int_(n[1], env)
            b = self.int_(n[2], env)
            return self.op(f"cmask.{t} {a}, {b}")
        raise ValueError(t)

    def bool_(self, n, env):
        t = n[0]
        if t == "bool":
            return self.op(f"cmask.constant {'true' if n[1] else 'false'}")
        if t == "cmp":
            a = self.int_(n[2], env)
            b = self.int_(n[3], env)
            return self.op(f"cmask.cmp {n[1]}, {a}, {b}")
        if t in ("and", "or"):
            xs = [self.bool_(x, env) for x in n[1]]
            return self.op(f"cmask.{t} {', '.join(xs)}")
        if t == "not":
            return self.op(f"cmask.not {self.bool_(n[1], env)}")
        if t == "any":
            name = self.fresh()
            self.emit(f"{name} = cmask.any %d{n[1]} in [{n[2]}, {n[3]}] {{")
            self.indent += 1
            v = self.bool_(n[4], env)
            self.emit(f"cmask.yield {v} : i1")
            self.indent -= 1
            self.emit("}")
            return name
        raise ValueError(t)

    def block(self, n, with_j):
        env = {"i": "%i", "b": "%b", "q_len": "%ql", "k_len": "%kl"}
        self.emit("%i = cmask.var i")
        if with_j:
            self.emit("%j = cmask.var j")
            env["j"] = "%j"
        self.emit("%b = cmask.var b")
        self.emit("%ql = cmask.var q_len")
        self.emit("%kl = cmask.var k_len")
        v = self.bool_(n, env)
        self.emit(f"cmask.yield {v} : i1")


def to_mlir(name, regions) -> str:
    e = Emitter()
    e.emit(f"cmask.spec @{name} {{")
    e.indent += 1
    e.emit("cmask.metadata @w : scalar")
    e.emit("cmask.metadata @p : per_sequence")
    e.emit("cmask.metadata @o : offsets")
    for r, (guard, rule) in enumerate(regions):
        e.emit(f"cmask.region @r{r} guard {{")
        e.indent += 1
        e.block(guard, with_j=False)
        e.indent -= 1
        e.emit("} rule {")
        e.indent += 1
        e.block(rule, with_j=True)
        e.indent -= 1
        e.emit("}")
    e.indent -= 1
    e.emit("}")
    return "\n".join(e.lines) + "\n"


# ---------------------------------------------------------------------------
# Python evaluation (numpy over the [q_len, k_len] grid)
# ---------------------------------------------------------------------------


class Env:
    def __init__(self, q_len, k_len, b, md):
        self.q_len, self.k_len, self.b = q_len, k_len, b
        self.i = np.arange(q_len, dtype=np.int64)[:, None]
        self.j = np.arange(k_len, dtype=np.int64)[None, :]
        self.w = int(md["w"])
        self.p = np.asarray(md["p"], dtype=np.int64)
        self.o = np.asarray(md["o"][b], dtype=np.int64)
        self.L = max(q_len, k_len)
        self.d = {}


def _ext_offset(env, k):
    """o_k with o_k = 0 for k < 0 and o_k = L for k >= n."""
    n = len(env.o)
    k = np.asarray(k, dtype=np.int64)
    if n == 0:
        return np.where(k < 0, 0, env.L).astype(np.int64)
    inner = env.o[np.clip(k, 0, n - 1)]
    return np.where(k < 0, 0, np.where(k >= n, env.L, inner)).astype(np.int64)


def _isqrt(x):
    x = np.maximum(np.asarray(x, dtype=np.int64), 0)
    s = np.floor(np.sqrt(x.astype(np.float64))).astype(np.int64)
    s = np.where(s * s > x, s - 1, s)
    s = np.where((s + 1) * (s + 1) <= x, s + 1, s)
    return s


def ev_int(n, env):
    t = n[0]
    if t == "const":
        return np.int64(n[1])
    if t == "var":
        return {"i": env.i, "j": env.j, "b": np.int64(env.b),
                "q_len": np.int64(env.q_len), "k_len": np.int64(env.k_len)}[n[1]]
    if t == "d":
        return np.int64(env.d[n[1]])
    if t == "meta":
        return np.int64(env.w)
    if t == "lookup":
        idx = np.asarray(ev_int(n[1], env), dtype=np.int64)
        B = len(env.p)
        ok = (idx >= 0) & (idx < B)
        return np.where(ok, env.p[np.clip(idx, 0, B - 1)], 0).astype(np.int64)
    if t == "seg":
        pos = np.asarray(ev_int(n[1], env), dtype=np.int64)
        return np.searchsorted(env.o, pos, side="right").astype(np.int64)
    if t == "seg_start":
        return _ext_offset(env, np.asarray(ev_int(n[1], env)) - 1)
    if t == "seg_end":
        return _ext_offset(env, ev_int(n[1], env))
    if t == "isqrt":
        return _isqrt(ev_int(n[1], env))
    if t == "select":
        return np.where(ev_bool(n[1], env), ev_int(n[2], env), ev_int(n[3], env)).astype(np.int64)
    a = np.asarray(ev_int(n[1], env), dtype=np.int64)
    b = np.asarray(ev_int(n[2], env), dtype=np.int64)
    if t == "add":
        return a + b
    if t == "sub":
        return a - b
    if t == "mul":
        return a * b
    if t == "min":
        return np.minimum(a, b)
    if t == "max":
        return np.maximum(a, b)
    if t in ("floordiv", "mod"):
        safe = np.where(b == 0, 1, b)
        r = (a // safe) if t == "floordiv" else (a % safe)
        return np.where(b == 0, 0, r).astype(np.int64)
    raise ValueError(t)


def ev_bool(n, env):
    t = n[0]
    if t == "bool":
        return np.bool_(n[1])
    if t == "cmp":
        a, b = ev_int(n[2], env), ev_int(n[3], env)
        return {"eq": np.equal, "ne": np.not_equal, "lt": np.less,
                "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}[n[1]](a, b)
    if t == "and":
        r = np.bool_(True)
        for x in n[1]:
            r = r & ev_bool(x, env)
        return r
    if t == "or":
        r = np.bool_(False)
        for x in n[1]:
            r = r | ev_bool(x, env)
        return r
    if t == "not":
        return ~np.asarray(ev_bool(n[1], env), dtype=bool)
    if t == "any":
        r = np.bool_(False)
        for dv in range(n[2], n[3] + 1):
            env.d[n[1]] = dv
            r = r | ev_bool(n[4], env)
        del env.d[n[1]]
        return r
    raise ValueError(t)


def evaluate(regions, q_len, k_len, b, md):
    """(mask [q_len, k_len] bool, region index per row) for sequence b."""
    env = Env(q_len, k_len, b, md)
    shape = (q_len, k_len)
    mask = np.zeros(shape, dtype=bool)
    region = np.full(q_len, -1, dtype=np.int64)
    for r, (guard, rule) in enumerate(regions):
        g = np.broadcast_to(np.asarray(ev_bool(guard, env), dtype=bool), (q_len, 1))[:, 0]
        new = g & (region == -1)
        region[new] = r
        if new.any():
            v = np.broadcast_to(np.asarray(ev_bool(rule, env), dtype=bool), shape)
            mask[new] = v[new]
    return mask, region


# A second, scalar evaluator in plain Python integers, used only to
# self-check the numpy one (test_evaluator_self_check).


def _floor_div(a, b):
    return 0 if b == 0 else a // b


def _floor_mod(a, b):
    return 0 if b == 0 else a % b


def sev_int(n, s):
    t = n[0]
    if t == "const":
        return n[1]
    if t == "var":
        return s[n[1]]
    if t == "d":
        return s["d"][n[1]]
    if t == "meta":
        return s["w"]
    if t == "lookup":
        k = sev_int(n[1], s)
        return s["p"][k] if 0 <= k < len(s["p"]) else 0
    if t == "seg":
        pos = sev_int(n[1], s)
        return sum(1 for x in s["o"] if x <= pos)

    def ext(k):
        if k < 0:
            return 0
        if k >= len(s["o"]):
            return s["L"]
        return s["o"][k]

    if t == "seg_start":
        return ext(sev_int(n[1], s) - 1)
    if t == "seg_end":
        return ext(sev_int(n[1], s))
    if t == "isqrt":
        x = sev_int(n[1], s)
        return math.isqrt(x) if x > 0 else 0
    if t == "select":
        return sev_int(n[2], s) if sev_bool(n[1], s) else sev_int(n[3], s)
    a, b = sev_int(n[1], s), sev_int(n[2], s)
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "min": lambda: min(a, b), "max": lambda: max(a, b),
            "floordiv": lambda: _floor_div(a, b), "mod": lambda: _floor_mod(a, b)}[t]()


def sev_bool(n, s):
    t = n[0]
    if t == "bool":
        return n[1]
    if t == "cmp":
        a, b = sev_int(n[2], s), sev_int(n[3], s)
        return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b,
                "gt": a > b, "ge": a >= b}[n[1]]
    if t == "and":
        return all(sev_bool(x, s) for x in n[1])
    if t == "or":
        return any(sev_bool(x, s) for x in n[1])
    if t == "not":
        return not sev_bool(n[1], s)
    if t == "any":
        res = False
        for dv in range(n[2], n[3] + 1):
            s["d"][n[1]] = dv
            res = res or sev_bool(n[4], s)
        del s["d"][n[1]]
        return res
    raise ValueError(t)


def evaluate_scalar(regions, q_len, k_len, b, md):
    base = {"b": b, "q_len": q_len, "k_len": k_len, "w": md["w"], "p": md["p"],
            "o": md["o"][b], "L": max(q_len, k_len), "d": {}}
    mask = np.zeros((q_len, k_len), dtype=bool)
    region = np.full(q_len, -1, dtype=np.int64)
    for i in range(q_len):
        for r, (guard, rule) in enumerate(regions):
            if sev_bool(guard, dict(base, i=i)):
                region[i] = r
                for j in range(k_len):
                    mask[i, j] = sev_bool(rule, dict(base, i=i, j=j))
                break
    return mask, region


# ---------------------------------------------------------------------------
# Random metadata
# ---------------------------------------------------------------------------


def random_offsets(rng, L):
    if rng.random() < 0.15:
        return []
    n = int(rng.integers(1, 6))
    vals = [int(v) for v in rng.integers(0, L + 1, size=n)]
    if rng.random() < 0.3:
        vals.append(vals[0])  # an empty segment
    if rng.random() < 0.2:
        vals.append(0)
    if rng.random() < 0.2:
        vals.append(L)
    return sorted(vals)


def random_batch(rng) -> dict:
    B = int(rng.integers(1, 4))
    seqs = []
    for _ in range(B):
        q = int(rng.choice([0, 1, int(rng.integers(2, 17))], p=[0.08, 0.1, 0.82]))
        k = q if rng.random() < 0.5 else int(rng.integers(0, 17))
        seqs.append({"q_len": q, "k_len": k})
    return {
        "sequences": seqs,
        "metadata": {
            "w": int(rng.integers(-3, 11)),
            "p": [int(v) for v in rng.integers(-2, 20, size=B)],
            "o": [random_offsets(rng, max(s["q_len"], s["k_len"])) for s in seqs],
        },
    }


def partial_row_fraction(regions, rng, batches=4) -> float:
    """Fraction of non-empty rows that see some but not all keys."""
    total = partial = 0
    for _ in range(batches):
        batch = random_batch(rng)
        for b, s in enumerate(batch["sequences"]):
            if s["k_len"] == 0:
                continue
            m, _ = evaluate(regions, s["q_len"], s["k_len"], b, batch["metadata"])
            counts = m.sum(axis=1)
            total += len(counts)
            partial += int(((counts > 0) & (counts < s["k_len"])).sum())
    return partial / max(total, 1)


def make_specs(count=NUM_SPECS, seed=SEED):
    """Random specs, mostly ones whose masks are not trivially empty or full
    (random trees often are: deep conjunctions die, deep disjunctions fill)."""
    rng = np.random.default_rng(seed)
    probe = np.random.default_rng(seed + 17)
    specs = []
    while len(specs) < count:
        regions = Gen(rng).spec()
        if max(dnf_size(rule) for _, rule in regions) > MAX_DNF:
            continue
        if partial_row_fraction(regions, probe) < 0.15 and rng.random() > 0.1:
            continue
        specs.append(regions)
    return specs


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------


def test_evaluator_hand_cases():
    """The numpy evaluator on hand-computed cases."""
    md = {"w": 2, "p": [5, 7], "o": [[2, 2, 5], []]}
    j, i = ("var", "j"), ("var", "i")
    # 0 <= i - j <= w over a 4 x 5 grid
    rule = ("and", [("cmp", "le", ("const", 0), ("sub", i, j)),
                    ("cmp", "le", ("sub", i, j), ("meta",))])
    m, reg = evaluate([(("bool", True), rule)], 4, 5, 0, md)
    assert ["".join("1" if x else "0" for x in r) for r in m] == [
        "10000", "11000", "11100", "01110"]
    assert list(reg) == [0, 0, 0, 0]
    # seg(j) == seg(i) with o = [2, 2, 5] over L = 6: segments [0,2) [2,2) [2,5) [5,6)
    m, _ = evaluate([(("bool", True), ("cmp", "eq", ("seg", j), ("seg", i)))], 6, 6, 0, md)
    assert ["".join("1" if x else "0" for x in r) for r in m] == [
        "110000", "110000", "001110", "001110", "001110", "000001"]
    # guard i >= 2 only: rows 0, 1 see nothing and have region -1
    m, reg = evaluate([(("cmp", "ge", i, ("const", 2)), ("bool", True))], 3, 2, 0, md)
    assert list(reg) == [-1, -1, 0] and m.tolist() == [[False, False]] * 2 + [[True, True]]
    env = Env(1, 1, 1, md)
    # division / mod by zero give 0; floor semantics; isqrt of negatives is 0
    assert int(ev_int(("floordiv", ("const", 7), ("const", 0)), env)) == 0
    assert int(ev_int(("mod", ("const", 7), ("const", 0)), env)) == 0
    assert int(ev_int(("floordiv", ("const", -7), ("const", 2)), env)) == -4
    assert int(ev_int(("mod", ("const", -7), ("const", 2)), env)) == 1
    assert int(ev_int(("mod", ("const", 7), ("const", -2)), env)) == -1
    assert int(ev_int(("isqrt", ("const", -5)), env)) == 0
    assert int(ev_int(("isqrt", ("const", 24)), env)) == 4
    assert int(ev_int(("isqrt", ("const", 25)), env)) == 5
    # lookups out of range give 0
    assert int(ev_int(("lookup", ("const", 2)), env)) == 0
    assert int(ev_int(("lookup", ("const", -1)), env)) == 0
    assert int(ev_int(("lookup", ("var", "b")), env)) == 7
    # sequence 1 has no offsets: one segment, seg_start(0) = 0, seg_end(0) = L = 1
    assert int(ev_int(("seg_start", ("const", 0)), env)) == 0
    assert int(ev_int(("seg_end", ("const", 0)), env)) == 1
    env0 = Env(6, 6, 0, md)
    assert [int(ev_int(("seg_start", ("const", s)), env0)) for s in range(-1, 5)] == [0, 0, 2, 2, 5, 6]
    assert [int(ev_int(("seg_end", ("const", s)), env0)) for s in range(-1, 5)] == [0, 2, 2, 5, 6, 6]
    # any d in [-1, 1]: j == i + d
    rule = ("any", 0, -1, 1, ("cmp", "eq", j, ("add", i, ("d", 0))))
    m, _ = evaluate([(("bool", True), rule)], 3, 3, 0, md)
    assert m.tolist() == [[True, True, False], [True, True, True], [False, True, True]]


def test_evaluator_self_check():
    """The numpy evaluator agrees with a scalar Python-int evaluator."""
    rng = np.random.default_rng(SEED + 1)
    for regions in make_specs(30, SEED + 2):
        for _ in range(3):
            batch = random_batch(rng)
            for b, s in enumerate(batch["sequences"]):
                m1, r1 = evaluate(regions, s["q_len"], s["k_len"], b, batch["metadata"])
                m2, r2 = evaluate_scalar(regions, s["q_len"], s["k_len"], b, batch["metadata"])
                assert (r1 == r2).all() and (m1 == m2).all(), [show(x) for rg in regions for x in rg]


def test_generated_mlir_shape():
    """Every generated spec is emitted with balanced braces and one yield per block."""
    for n, regions in enumerate(make_specs()):
        text = to_mlir(f"rand{n}", regions)
        assert text.count("{") == text.count("}")
        anys = sum(1 for line in text.splitlines() if "cmask.any" in line)
        assert text.count("cmask.yield") == 2 * len(regions) + anys
        for g, _ in regions:
            assert not mentions_j(g)
        # a literal zero divisor is a verifier error, not a run-time 0
        consts = dict(re.findall(r"(%v\d+) = cmask.constant (-?\d+) : i64", text))
        for op, _, divisor in re.findall(r"cmask\.(floordiv|mod) (%\w+), (%\w+)", text):
            assert consts.get(divisor) != "0", f"literal zero divisor in spec {n}"


def test_random_specs_differential(tool, tmp_path):
    rng = np.random.default_rng(SEED + 3)
    failures = []
    for n, regions in enumerate(make_specs()):
        name = f"rand{n}"
        text = to_mlir(name, regions)
        spec_file = tmp_path / f"{name}.mlir"
        spec_file.write_text(text)
        batches = [random_batch(rng) for _ in range(INSTANCES_PER_SPEC)]
        intervals, dense = translate_batches(tool, spec_file, batches, tmp_path, name)
        desc = "\n".join(f"  region r{r}: guard {show(g)}\n             rule  {show(x)}"
                         for r, (g, x) in enumerate(regions))
        bad = None
        count = 0
        for inst, (batch, iv, dn) in enumerate(zip(batches, intervals, dense)):
            K = iv.get("num_slots")
            for b, (s, ivs, dns) in enumerate(zip(batch["sequences"], iv["sequences"], dn["sequences"])):
                q, k = s["q_len"], s["k_len"]
                want, want_reg = evaluate(regions, q, k, b, batch["metadata"])
                for i in range(q):
                    row = ivs["rows"][i]
                    got_iv = slots_to_string(row["slots"], k)
                    got_dn = dns["rows"][i]
                    exp = "".join("1" if x else "0" for x in want[i])
                    well_formed = all((0 <= lo < hi <= k) or (lo, hi) == (0, 0)
                                      for lo, hi in row["slots"])
                    ok = (got_iv == got_dn == exp and len(row["slots"]) == K
                          and row["region"] == want_reg[i] and well_formed)
                    if not ok:
                        count += 1
                        if bad is None:
                            bad = (f"instance={inst} b={b} q_len={q} k_len={k} row={i} "
                                   f"metadata={batch['metadata']}\n"
                                   f"  intervals: {got_iv!r} region={row['region']} "
                                   f"slots={row['slots']} (num_slots {K})\n"
                                   f"  dense:     {got_dn!r}\n"
                                   f"  python:    {exp!r} region={int(want_reg[i])}")
        if bad is not None:
            failures.append(f"spec {name}: {count} bad rows; first: {bad}\n{desc}\n"
                            f"--- {spec_file.name} ---\n{text}")
    if failures:
        pytest.fail(f"{len(failures)} of {NUM_SPECS} random specs disagree\n\n"
                    + "\n\n".join(failures[:3]), pytrace=False)


def test_random_specs_host_twin(tool, tmp_path):
    """The preprocess's CPU lowering builds, slot for slot, the intervals the
    evaluator prints, on every random spec (guards, unions, floordiv/mod by
    run-time zero, lookups out of range, segments outside the offsets), and
    tile states, slot ranges and lists that match brute force (random specs
    have overlapping and adjacent slots), in both directions: the column
    direction derived by transposing the random rule."""
    rng = np.random.default_rng(SEED + 4)
    translate = tool("cmask-translate")
    failures = []
    modes = {"derived": 0, "symmetric": 0, "rows": 0}
    for n, regions in enumerate(make_specs()):
        name = f"rand{n}"
        text = to_mlir(name, regions)
        spec_file = tmp_path / f"{name}.mlir"
        spec_file.write_text(text)
        batches = [random_batch(rng) for _ in range(INSTANCES_PER_SPEC)]
        md = tmp_path / f"{name}.twin.json"
        md.write_text(json.dumps(batches))
        outs = [json.loads(run_tool([translate, spec_file, mode, f"--metadata={md}"]
                                    + extra, f"{name} {mode}"))
                for mode, extra in (
                    ("--cmask-to-intervals-json", []),
                    ("--cmask-to-descriptor-json", ["--tile-shapes=4x4,3x5,37x4"]),
                    ("--cmask-to-dense-json", []))]
        for inst, (ev, tw, dn) in enumerate(zip(*outs)):
            modes[tw["columns"]["mode"]] += 1
            try:
                # Both directions; the columns' slots cover exactly the rows
                # that see each key (an assertion inside directions()).
                for direction, batch, d, iv, got_tiles in directions(
                        batches[inst], dn, ev, tw):
                    for q, k in ((4, 4), (3, 5), (37, 4)):
                        want = expected_tiles(batch, d, iv, q, k)
                        got = got_tiles[f"{q}x{k}"]
                        for field in want:
                            if got[field] != want[field]:
                                failures.append(
                                    f"spec {name} instance={inst} {direction} tiles "
                                    f"{q}x{k} {field}: twin {got[field]} != expected "
                                    f"{want[field]}\nmetadata={batches[inst]}\n"
                                    f"--- {spec_file.name} ---\n{text}")
            except AssertionError as e:
                failures.append(f"spec {name} instance={inst} columns: {e}\n"
                                f"--- {spec_file.name} ---\n{text}")
            for b, (es, ts) in enumerate(zip(ev["sequences"], tw["sequences"])):
                for i, (er, tr) in enumerate(zip(es["rows"], ts["rows"])):
                    if er["slots"] != tr["slots"]:
                        failures.append(
                            f"spec {name} instance={inst} b={b} row={i}: twin "
                            f"{tr['slots']} != evaluator {er['slots']}\n"
                            f"metadata={batches[inst]}\n--- {spec_file.name} ---\n{text}")
                        break
    if failures:
        pytest.fail(f"{len(failures)} disagreements; first:\n{failures[0]}",
                    pytrace=False)
    # Random rules use i freely (mod, products, isqrt): about one in eight
    # transposes (the others fall back to rows); those must be covered.
    assert modes["derived"] >= 100, modes
