"""The PyTorch C++ binding (python/cmask/csrc/torch_binding.cpp) here,
without a GPU: it compiles against the installed PyTorch with the command
cmask._binding builds it with, and so does benchmarks/host_split.py's
instrumented copy, every place of which is in the binding once (only the
GPU machine builds the binding otherwise, on first use, so a compile error
or a moved place would first show there). The compiles are skipped without
PyTorch or a C++ compiler."""

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _host_split():
    path = ROOT / "benchmarks" / "host_split.py"
    spec = importlib.util.spec_from_file_location("host_split", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _compile(source: Path, tmp_path: Path, monkeypatch):
    pytest.importorskip("torch")
    binding = pytest.importorskip("cmask._binding")
    try:
        cxx = binding._compiler()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    monkeypatch.setattr(binding, "_SOURCE", source)
    cmd = binding._command(cxx, binding._runtime_include(), tmp_path / "binding.so")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "binding.so").stat().st_size > 0


def test_the_binding_compiles(tmp_path, monkeypatch):
    _compile(ROOT / "python" / "cmask" / "csrc" / "torch_binding.cpp", tmp_path, monkeypatch)


def test_every_instrumented_place_is_in_the_binding_once():
    m = _host_split()
    source = m.BINDING.read_text()
    for place, _ in m.INSTRUMENT:
        assert source.count(place) == 1, place
    timed = m.instrumented(source)
    added = set(re.findall(r"add\((\w+), t0?\)", timed))
    assert added == set(m.SEGS) - {"NFwd", "NBwd"}
    assert "timer[NFwd] += 1;" in timed and "timer[NBwd] += 1;" in timed
    assert 'm.def("timers() -> int[]"' in timed


def test_a_missing_place_is_named():
    m = _host_split()
    with pytest.raises(SystemExit, match="update INSTRUMENT"):
        m.instrumented("int main() {}")


def test_the_instrumented_binding_compiles(tmp_path, monkeypatch):
    m = _host_split()
    timed = tmp_path / "torch_binding_timed.cpp"
    timed.write_text(m.instrumented(m.BINDING.read_text()))
    _compile(timed, tmp_path, monkeypatch)
