"""The `cmask` command line (python -m cmask): compile, show, visualize, and
its errors (exit 2 for bad input, with one message)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "cmask", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT)


def test_show():
    r = cli("show", "masks/hstu.mlir", "--q-len", 6, "context=1", "num_targets=2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "@hstu: 2 interval slots per row; regions contextual, history, target",
        "sequence 0 (q_len 6, k_len 6):",
        "  row     0  contextual   [0, 4)",
        "  row     1  history      [0, 2)",
        "  row     2  history      [0, 3)",
        "  row     3  history      [0, 4)",
        "  row     4  target       [0, 4) U [4, 5)",
        "  row     5  target       [0, 4) U [5, 6)"]
    r = cli("show", "masks/causal_document.mlir", "--cu-seqlens", "0,5,8", "docs=2;1")
    assert r.returncode == 0 and "sequence 1 (q_len 3, k_len 3):" in r.stdout, r.stderr


def test_visualize(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "m.png"
    r = cli("visualize", "masks/hstu.mlir", "-o", png, "--q-len", 64, "context=4",
            "num_targets=8")
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compile(tmp_path):
    r = cli("compile", "masks/causal.mlir", "-o", tmp_path / "art", "--tile-shapes", "128x64",
            "--head-dims", 64, "--dtypes", "bf16")
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()) == tmp_path / "art"
    assert (tmp_path / "art" / "manifest.json").is_file()


def test_errors(tmp_path):
    r = cli("show", "masks/hstu.mlir", "--q-len", 6, "context=1")
    assert r.returncode == 2 and "missing ['num_targets']" in r.stderr
    r = cli("show", "masks/causal_document.mlir", "--q-len", 5, "docs=3,2")
    assert r.returncode == 2 and "offsets must be non-decreasing" in r.stderr
    r = cli("show", "masks/hstu.mlir", "--q-len", 6, "context=x", "num_targets=2")
    assert r.returncode == 2 and "a scalar is one int" in r.stderr
    r = cli("compile", "masks/causal.mlir", "--bogus")
    assert r.returncode == 2 and "unrecognized arguments: --bogus" in r.stderr
    bad = tmp_path / "bad.mlir"
    bad.write_text("cmask.spec @bad {\n  cmask.region @r guard {\n"
                   "    %t = cmask.constant true\n    cmask.yield %t : i1\n  } rule {\n"
                   "    %j = cmask.var j\n    %i = cmask.var i\n"
                   "    %p = cmask.mul %j, %j\n    %c = cmask.cmp lt, %p, %i\n"
                   "    cmask.yield %c : i1\n  }\n}\n")
    r = cli("compile", bad, "--no-cache")
    assert r.returncode == 1 and f"{bad}:8:" in r.stderr and "cannot isolate j" in r.stderr
