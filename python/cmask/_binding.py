"""The eager attention path's PyTorch C++ binding (csrc/torch_binding.cpp).

A C++ operator with its autograd in C++: a forward+backward call runs no
Python in the backward, and a short call's host time falls to a fraction of
the ``torch.autograd.Function`` path's (docs/performance.md). It is built
once per PyTorch installation and runtime version, on the first
``cmask.load``, with the C++ compiler (``$CXX``, else ``c++``) against the
PyTorch in use, into ``cache_dir()/torch-binding``, and loaded with
``torch.ops.load_library``.

``$CMASK_TORCH_BINDING`` chooses: ``auto`` (the default: build it, and where
that fails warn once and run the Python path), ``1`` (build it or raise),
``0`` (the Python path; the same kernels, more host time per call).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from . import _capi

# PyTorch is imported by the functions that build or load the binding, so
# that the package's checks can find its sources without it.

_SOURCE = Path(__file__).resolve().parent / "csrc" / "torch_binding.cpp"
_state: dict = {}  # "loaded": bool, "why": the reason it is not


def _runtime_include() -> Path:
    """The runtime's C headers: installed in the package, or the repository's."""
    here = Path(__file__).resolve().parent
    for d in (here / "include", here.parents[1] / "runtime" / "include"):
        if (d / "cmask_runtime" / "cmask_runtime.h").is_file():
            return d
    raise FileNotFoundError(f"the runtime's header cmask_runtime/cmask_runtime.h (looked in "
                            f"{here / 'include'} and {here.parents[1] / 'runtime' / 'include'})")


def _mode() -> str:
    mode = os.environ.get("CMASK_TORCH_BINDING", "auto").strip().lower()
    if mode not in ("auto", "0", "1"):
        raise ValueError(f"cmask: CMASK_TORCH_BINDING={mode!r} (auto, 1 or 0)")
    return mode


def _compiler() -> str:
    cxx = os.environ.get("CXX") or "c++"
    if not shutil.which(cxx):
        raise FileNotFoundError(f"no C++ compiler ({cxx}; set $CXX)")
    return cxx


def _build(cxx: str, out: Path, include: Path) -> None:
    import torch

    torch_dir = Path(torch.__file__).resolve().parent
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build-", dir=out.parent) as tmp:
        target = Path(tmp) / out.name
        cmd = [cxx, "-O2", "-std=c++17", "-shared", "-fPIC",
               f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
               "-I", str(include), "-I", str(torch_dir / "include"),
               "-I", str(torch_dir / "include" / "torch" / "csrc" / "api" / "include"),
               str(_SOURCE), "-o", str(target),
               "-L", str(torch_dir / "lib"), "-lc10", "-ltorch", "-ltorch_cpu", "-ldl",
               f"-Wl,-rpath,{torch_dir / 'lib'}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-20:])
            raise RuntimeError(f"{' '.join(cmd)}\n{tail}")
        os.replace(target, out)  # atomic: a concurrent build of the same key is harmless


def _path() -> tuple:
    """(the binding's cached path, the runtime header directory): the key is
    the binding's source, the runtime's headers (the C structures it fills)
    and the PyTorch installation. It does not link the runtime library (it
    looks the C API up in the one loaded: load_runtime)."""
    import torch

    from . import cache_dir

    include = _runtime_include()
    h = hashlib.sha256()
    for f in [_SOURCE] + sorted((include / "cmask_runtime").iterdir()):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    h.update(f"\0{torch.__version__}\0{Path(torch.__file__).resolve()}".encode())
    return cache_dir() / "torch-binding" / h.hexdigest()[:24] / "cmask_torch_binding.so", \
        include


def load() -> bool:
    """Whether the binding is loaded (built first where the cache lacks it);
    False with $CMASK_TORCH_BINDING=0, or (auto) after a failure, warned once."""
    if "loaded" in _state:
        return _state["loaded"]
    mode = _mode()
    if mode == "0":
        _state.update(loaded=False, why="CMASK_TORCH_BINDING=0")
        return False
    try:
        import torch

        _capi.lib()  # the runtime, whose C API the binding looks up
        path, include = _path()
        if not path.is_file():
            cxx = _compiler()
            print(f"cmask: building the PyTorch C++ binding (once per PyTorch and runtime; "
                  f"about 15 s) into {path.parent}", file=sys.stderr, flush=True)
            start = time.perf_counter()
            _build(cxx, path, include)
            print(f"cmask: built in {time.perf_counter() - start:.1f} s", file=sys.stderr,
                  flush=True)
        torch.ops.load_library(str(path))
        torch.ops.cmask_native.load_runtime(str(_capi.library_path().resolve()))
    except Exception as e:  # noqa: BLE001 -- any failure: the Python path, said once
        if mode == "1":
            raise RuntimeError(f"cmask: the PyTorch C++ binding could not be built or "
                               f"loaded (CMASK_TORCH_BINDING=1): {e}") from e
        warnings.warn(f"cmask: the PyTorch C++ binding could not be built or loaded, so "
                      f"eager attention runs through Python (the same kernels, several "
                      f"times the host time per call; CMASK_TORCH_BINDING=0 silences "
                      f"this): {e}", RuntimeWarning, stacklevel=3)
        _state.update(loaded=False, why=str(e))
        return False
    _state.update(loaded=True, why="")
    return True


def status() -> str:
    """'loaded', or why the eager path runs through Python."""
    load()
    return "loaded" if _state["loaded"] else _state["why"]
