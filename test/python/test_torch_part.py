"""The torch part of the package (cmask.mask) without a GPU: the custom ops
exist once cmask is imported after PyTorch, and not before PyTorch is
imported. Skipped (visibly) where PyTorch is not installed; the GPU machine
runs it with the GPU suite (scripts/gpu/check_attention.sh)."""

import subprocess
import sys

import pytest

pytest.importorskip("torch")


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_ops_registered_when_torch_was_imported_first():
    out = _run("import torch, cmask; "
               "print(all(hasattr(torch.ops.cmask, op) for op in "
               "('preprocess', 'attention_forward', 'attention_backward')))")
    assert out == "True"


def test_import_cmask_alone_does_not_import_torch():
    out = _run("import sys, cmask; print('torch' in sys.modules)")
    assert out == "False"
    # ... and the ops come with the torch part.
    out = _run("import cmask, cmask.mask, torch; print(hasattr(torch.ops.cmask, 'attention_forward'))")
    assert out == "True"
