"""The PyTorch C++ binding (python/cmask/csrc/torch_binding.cpp) compiles
against the installed PyTorch with the command cmask._binding builds it
with, and so does benchmarks/host_split.py's instrumented copy of it. Only
the GPU machine builds the binding otherwise (on first use), so without
this a compile error would first show there. Skipped without PyTorch or a
C++ compiler."""

import importlib.util
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
torch = pytest.importorskip("torch")
binding = pytest.importorskip("cmask._binding")


def _host_split():
    path = ROOT / "benchmarks" / "host_split.py"
    spec = importlib.util.spec_from_file_location("host_split", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _compile(source: Path, tmp_path: Path, monkeypatch):
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


def test_host_splits_instrumented_binding_compiles(tmp_path, monkeypatch):
    m = _host_split()
    timed = tmp_path / "torch_binding_timed.cpp"
    timed.write_text(m.instrumented(m.BINDING.read_text()))
    _compile(timed, tmp_path, monkeypatch)
