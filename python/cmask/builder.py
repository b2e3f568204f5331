"""A small Python builder that writes MaskSpec text (the `cmask` dialect).

    s = cmask.Spec("hstu_like")
    c = s.scalar("context")
    nt = s.per_sequence("num_targets")
    i, j, b, q_len = s.i, s.j, s.b, s.q_len
    hist_end = q_len - nt[b]
    s.region("context", guard=i < c, rule=j < hist_end)
    s.region("rest", rule=(j < hist_end) | (j == i))
    print(s.to_mlir())          # or cmask.compile(s)

Integers: + - * // % (floor semantics), minimum(), maximum(), isqrt(),
select(); comparisons give booleans, combined with & | ~; ``any_(lo, hi,
fn)`` is a bounded union over a constant d in [lo, hi]. Metadata: scalars
are integers, per-sequence values are indexed (``nt[b]``), offsets give
``seg(pos)``, ``start(seg)`` and ``end(seg)``. The compiler checks the spec
(docs/MaskSpec.md); this module only writes it, each op with the location
(``loc("file.py":line:col)``) of the Python line that made it, so that the
compiler's errors point there.
"""

from __future__ import annotations

import itertools
import json
import sys

_HERE = __file__


def _caller() -> str:
    """` loc("file":line:col)` of the nearest frame outside this module: the
    user's line that made an expression, a region or the spec, which the
    compiler's diagnostics then name."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename == _HERE:
        f = f.f_back
    if f is None:
        return ""
    line, col = f.f_lineno, 1
    try:  # the column of the instruction running (Python 3.11 on)
        start_line, _, start_col, _ = list(f.f_code.co_positions())[f.f_lasti // 2]
        if start_line == line and start_col is not None:
            col = start_col + 1
    except (AttributeError, IndexError, ValueError):
        pass
    return f" loc({json.dumps(f.f_code.co_filename, ensure_ascii=False)}:{line}:{col})"


class _Node:
    def __init__(self, op, *args, attr=None):
        self.op, self.args, self.attr = op, args, attr
        self.loc = _caller()


def _int(x) -> "Int":
    if isinstance(x, Int):
        return x
    if isinstance(x, bool) or not isinstance(x, int):
        raise TypeError(f"cmask.Spec: expected an integer expression, got {x!r}")
    return Int("constant", attr=x)


class Int(_Node):
    """An integer expression (64-bit in the compiler)."""

    def _bin(self, op, other, swap=False):
        a, b = (_int(other), self) if swap else (self, _int(other))
        return Int(op, a, b)

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, True)
    def __sub__(self, o): return self._bin("sub", o)
    def __rsub__(self, o): return self._bin("sub", o, True)
    def __mul__(self, o): return self._bin("mul", o)
    def __rmul__(self, o): return self._bin("mul", o, True)
    def __floordiv__(self, o): return self._bin("floordiv", o)
    def __rfloordiv__(self, o): return self._bin("floordiv", o, True)
    def __mod__(self, o): return self._bin("mod", o)
    def __rmod__(self, o): return self._bin("mod", o, True)
    def __neg__(self): return _int(0) - self

    def _cmp(self, pred, o): return Bool("cmp", self, _int(o), attr=pred)
    def __lt__(self, o): return self._cmp("lt", o)
    def __le__(self, o): return self._cmp("le", o)
    def __gt__(self, o): return self._cmp("gt", o)
    def __ge__(self, o): return self._cmp("ge", o)
    def __eq__(self, o): return self._cmp("eq", o)  # noqa: builds a comparison
    def __ne__(self, o): return self._cmp("ne", o)
    __hash__ = object.__hash__


class Bool(_Node):
    """A boolean expression."""

    def __and__(self, o): return Bool("and", self, _bool(o))
    def __or__(self, o): return Bool("or", self, _bool(o))
    def __invert__(self): return Bool("not", self)
    def __bool__(self):
        raise TypeError("cmask.Spec: a mask condition has no Python truth value; "
                        "combine conditions with & | ~, not and/or/not")


def _bool(x) -> Bool:
    if isinstance(x, Bool):
        return x
    if isinstance(x, bool):
        return Bool("constant", attr=x)
    raise TypeError(f"cmask.Spec: expected a condition, got {x!r}")


def minimum(a, b) -> Int: return Int("min", _int(a), _int(b))
def maximum(a, b) -> Int: return Int("max", _int(a), _int(b))
def isqrt(a) -> Int: return Int("isqrt", _int(a))
def select(cond, a, b) -> Int: return Int("select", _bool(cond), _int(a), _int(b))


def any_(lo: int, hi: int, fn) -> Bool:
    """True when fn(d) holds for some constant d in [lo, hi] (inclusive)."""
    d = Int("d")
    return Bool("any", fn(d), attr=(int(lo), int(hi), d))


class PerSequence:
    def __init__(self, name): self.name = name
    def __getitem__(self, index) -> Int: return Int("lookup", _int(index), attr=self.name)


class Offsets:
    def __init__(self, name): self.name = name
    def seg(self, position) -> Int: return Int("seg", _int(position), attr=self.name)
    def start(self, segment) -> Int: return Int("seg_start", _int(segment), attr=self.name)
    def end(self, segment) -> Int: return Int("seg_end", _int(segment), attr=self.name)


class _Writer:
    """SSA names for one region body; `any` bodies nest with a copy of the names."""

    def __init__(self, lines, counter, indent, names=None):
        self.lines, self.counter, self.indent = lines, counter, indent
        self.names = dict(names or {})

    def fresh(self):
        return f"%v{next(self.counter)}"

    def emit(self, node) -> str:
        key = id(node)
        if key in self.names:
            return self.names[key]
        a = [self.emit(x) for x in node.args] if node.op != "any" else []
        name = self.fresh()
        op = node.op
        pad = " " * self.indent

        def w(line):
            self.lines.append(line + node.loc)
        if op in ("i", "j", "b", "q_len", "k_len"):
            w(f"{pad}{name} = cmask.var {op}")
        elif op == "constant":
            v = node.attr
            w(f"{pad}{name} = cmask.constant " + (("true" if v else "false") if isinstance(v, bool)
                                                  else f"{v} : i64"))
        elif op == "meta":
            w(f"{pad}{name} = cmask.meta @{node.attr}")
        elif op == "lookup":
            w(f"{pad}{name} = cmask.lookup @{node.attr}[{a[0]}]")
        elif op in ("seg", "seg_start", "seg_end"):
            w(f"{pad}{name} = cmask.{op} @{node.attr}({a[0]})")
        elif op == "cmp":
            w(f"{pad}{name} = cmask.cmp {node.attr}, {a[0]}, {a[1]}")
        elif op in ("and", "or", "not", "isqrt", "select", "add", "sub", "mul", "floordiv",
                    "mod", "min", "max"):
            w(f"{pad}{name} = cmask.{op} {', '.join(a)}")
        elif op == "any":
            lo, hi, d = node.attr
            dname = f"%d{next(self.counter)}"
            self.lines.append(f"{pad}{name} = cmask.any {dname} in [{lo}, {hi}] {{")
            inner = _Writer(self.lines, self.counter, self.indent + 2, self.names)
            inner.names[id(d)] = dname
            body = inner.emit(node.args[0])
            self.lines.append(f"{pad}  cmask.yield {body} : i1")
            w(f"{pad}}}")
        elif op == "d":
            raise ValueError("cmask.Spec: the variable of any_() is used outside its body")
        else:  # pragma: no cover
            raise AssertionError(op)
        self.names[key] = name
        return name


class Spec:
    """A MaskSpec under construction: metadata, then regions in order."""

    def __init__(self, name: str, symmetric: bool = False):
        if not name.isidentifier():
            raise ValueError(f"cmask.Spec: {name!r} is not a valid name")
        self.name, self.symmetric, self._loc = name, symmetric, _caller()
        self.i, self.j, self.b = Int("i"), Int("j"), Int("b")
        self.q_len, self.k_len = Int("q_len"), Int("k_len")
        self._metadata, self._regions = [], []

    def _declare(self, name, role):
        if not name.isidentifier() or any(n == name for n, _, _ in self._metadata):
            raise ValueError(f"cmask.Spec: metadata name {name!r} is invalid or repeated")
        self._metadata.append((name, role, _caller()))

    def scalar(self, name: str) -> Int:
        self._declare(name, "scalar")
        return Int("meta", attr=name)

    def per_sequence(self, name: str) -> PerSequence:
        self._declare(name, "per_sequence")
        return PerSequence(name)

    def offsets(self, name: str) -> Offsets:
        self._declare(name, "offsets")
        return Offsets(name)

    def region(self, name: str, rule, guard=True) -> None:
        """Rows whose guard holds (and no earlier region's) see the keys where rule holds."""
        taken = {n for n, _, _ in self._metadata} | {n for n, _, _, _ in self._regions}
        if not name.isidentifier() or name in taken:
            raise ValueError(f"cmask.Spec: region name {name!r} is invalid or already a "
                             "metadata or region name")
        self._regions.append((name, _bool(guard), _bool(rule), _caller()))

    def to_mlir(self) -> str:
        if not self._regions:
            raise ValueError(f"cmask.Spec @{self.name}: no region")
        attrs = " attributes {symmetric}" if self.symmetric else ""
        lines = [f"cmask.spec @{self.name}{attrs} {{"]
        lines += [f"  cmask.metadata @{n} : {r}{loc}" for n, r, loc in self._metadata]
        counter = itertools.count()
        for name, guard, rule, loc in self._regions:
            lines.append(f"  cmask.region @{name} guard {{")
            w = _Writer(lines, counter, 4)
            lines.append(f"    cmask.yield {w.emit(guard)} : i1")
            lines.append("  } rule {")
            w = _Writer(lines, counter, 4)
            lines.append(f"    cmask.yield {w.emit(rule)} : i1")
            lines.append("  }" + loc)
        lines.append("}" + self._loc)
        return "\n".join(lines) + "\n"

    __str__ = to_mlir
