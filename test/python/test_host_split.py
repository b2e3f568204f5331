"""benchmarks/host_split.py's instrumentation of the C++ binding: every place
it inserts a clock at is in the binding once, and the result still defines
every segment it reads (a binding edit that moves a place fails here, not on
the GPU machine)."""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module():
    path = ROOT / "benchmarks" / "host_split.py"
    spec = importlib.util.spec_from_file_location("host_split", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_every_place_is_in_the_binding_once():
    m = _module()
    source = m.BINDING.read_text()
    for place, _ in m.INSTRUMENT:
        assert source.count(place) == 1, place
    timed = m.instrumented(source)
    added = set(re.findall(r"add\((\w+), t0?\)", timed))
    assert added == set(m.SEGS) - {"NFwd", "NBwd"}
    assert "timer[NFwd] += 1;" in timed and "timer[NBwd] += 1;" in timed
    assert 'm.def("timers() -> int[]"' in timed


def test_a_missing_place_is_named():
    m = _module()
    with pytest.raises(SystemExit, match="update INSTRUMENT"):
        m.instrumented("int main() {}")
