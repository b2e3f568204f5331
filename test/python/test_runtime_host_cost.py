"""benchmarks/micro/host_cost/runtime_host_cost.sh, the runtime's own host
time per call under a stand-in libcuda (no GPU): it builds, runs the hot
path's C API calls on a translated causal artifact without an error, and
counts their launches: one for the forward, at most three for a training
descriptor's preprocess (issue 16)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("CMASK_BIN_DIR", REPO / "build" / "bin")).parent
CUDA = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))

pytestmark = pytest.mark.skipif(
    not (BUILD / "lib" / "libcmask_runtime.so").exists()
    or not (CUDA / "include" / "cuda.h").exists()
    or not (shutil.which("gcc") and shutil.which("g++")),
    reason="needs the runtime library, the CUDA toolkit's cuda.h, gcc and g++")


def test_runtime_host_cost_runs_the_hot_path_under_the_stand_in():
    r = subprocess.run(["bash", str(REPO / "benchmarks/micro/host_cost/runtime_host_cost.sh"),
                        "--n", "1024", "--batch", "2", "--calls", "200"],
                       env={**os.environ, "CMASK_BUILD_DIR": str(BUILD)},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = {m[1]: (float(m[2]), float(m[5]))
            for m in re.finditer(r"^\| (cmask_\w+)[^|]* \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) "
                                 r"\| ([\d.]+) \|$", r.stdout, re.M)}
    assert set(rows) == {"cmask_attention_forward", "cmask_attention_backward",
                         "cmask_preprocess"}, r.stdout
    assert all(us > 0 for us, _ in rows.values())
    assert rows["cmask_attention_forward"][1] == 1
    assert rows["cmask_attention_backward"][1] >= 1
    assert 1 <= rows["cmask_preprocess"][1] <= 3
