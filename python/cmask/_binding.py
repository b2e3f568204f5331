"""The eager attention path's PyTorch C++ binding (csrc/torch_binding.cpp).

A C++ operator with its autograd in C++: a forward+backward call runs no
Python in the backward, and a short call's host time falls to a fraction of
the ``torch.autograd.Function`` path's (docs/performance.md). It is built on
the first ``cmask.load`` of a process whose cache lacks it, with the C++
compiler (``$CXX``, else ``c++``) against the PyTorch in use, into
``cache_dir()/torch-binding/<key>`` (the key: the binding's source, the
runtime's headers, PyTorch's version, path and C++ ABI, the compiler's
identity and the compile command), and loaded with
``torch.ops.load_library``. It links neither Python nor the runtime: it
looks the runtime's C API up in the library ``cmask._capi`` loaded, after
checking that its C structures are laid out as that library's.

``$CMASK_TORCH_BINDING`` chooses: ``auto`` (the default: build it, and where
that fails warn and run the Python path; a failed build is remembered in the
cache, so other processes do not retry it), ``1`` (build it or raise), ``0``
(the Python path; the same kernels, more host time per call).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
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


def _compiler() -> list[str]:
    """$CXX (a command, possibly with arguments: "ccache g++"), else c++."""
    cxx = shlex.split(os.environ.get("CXX") or "c++")
    if not cxx or not shutil.which(cxx[0]):
        raise FileNotFoundError(f"no C++ compiler ({' '.join(cxx)}; set $CXX)")
    return cxx


@functools.lru_cache(maxsize=None)
def _standard(cxx: tuple) -> str:
    """C++20 where the compiler takes it (newer PyTorch headers need it),
    else C++17 (what PyTorch 2.11's need)."""
    probe = subprocess.run(list(cxx) + ["-std=c++20", "-x", "c++", "-E", "-"], input="",
                           capture_output=True, text=True)
    return "-std=c++20" if probe.returncode == 0 else "-std=c++17"


def _command(cxx: list[str], include: Path, target: Path) -> list[str]:
    import torch

    torch_dir = Path(torch.__file__).resolve().parent
    return cxx + ["-O2", _standard(tuple(cxx)), "-shared", "-fPIC",
                  f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
                  "-I", str(include), "-I", str(torch_dir / "include"),
                  "-I", str(torch_dir / "include" / "torch" / "csrc" / "api" / "include"),
                  str(_SOURCE), "-o", str(target),
                  "-L", str(torch_dir / "lib"), "-lc10", "-ltorch", "-ltorch_cpu", "-ldl",
                  f"-Wl,-rpath,{torch_dir / 'lib'}"]


def _entry(cxx: list[str], include: Path) -> Path:
    """The cache's directory for this binding: its key is the source, the
    runtime's headers (the C structures it fills), PyTorch (version, path,
    C++ ABI), the compiler's identity and the compile command."""
    import torch

    from . import cache_dir

    h = hashlib.sha256()
    for f in [_SOURCE] + sorted((include / "cmask_runtime").iterdir()):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    version = subprocess.run(cxx + ["--version"], capture_output=True, text=True).stdout
    h.update("\0".join([torch.__version__, str(Path(torch.__file__).resolve()),
                        str(torch._C._GLIBCXX_USE_CXX11_ABI), shutil.which(cxx[0]) or "",
                        version, " ".join(_command(cxx, Path("I"), Path("O")))]).encode())
    return cache_dir() / "torch-binding" / h.hexdigest()[:24]


def _build(cxx: list[str], entry: Path, include: Path) -> Path:
    """Compiles the binding into `entry` (built in a temporary directory and
    renamed into place: a concurrent build of the same key is harmless); a
    failure is written to entry/failed.txt and raised."""
    out = entry / "cmask_torch_binding.so"
    entry.mkdir(parents=True, exist_ok=True)
    print(f"cmask: building the PyTorch C++ binding (once per PyTorch, compiler and "
          f"runtime headers; 15-25 s) into {entry}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="build-", dir=entry) as tmp:
        target = Path(tmp) / out.name
        cmd = _command(cxx, include, target)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-20:])
            why = f"{' '.join(cmd)}\n{tail}"
            (entry / "failed.txt").write_text(why)
            raise RuntimeError(why)
        os.replace(target, out)
    print(f"cmask: built in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return out


def _check_layout(torch) -> None:
    """The binding's C structures against the loaded runtime's cmask_abi()."""
    expected = []
    for spec in _capi.abi()["structs"].values():
        expected += [spec["size"]] + [offset for _, _, offset in spec["fields"]]
    compiled = list(torch.ops.cmask_native.struct_layout())
    if compiled != expected:
        raise ImportError(f"its C structures differ from the runtime library "
                          f"{_capi.library_path()}'s (built from other headers: sizes and "
                          f"offsets {compiled} against {expected})")


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

        L = _capi.lib()  # the runtime, whose C API the binding looks up
        cxx, include = _compiler(), _runtime_include()
        entry = _entry(cxx, include)
        path = entry / "cmask_torch_binding.so"
        if not path.is_file():
            failed = entry / "failed.txt"
            if failed.is_file():  # remembered: another process's build failed
                raise RuntimeError(f"an earlier build failed (delete {entry} to retry):\n"
                                   + failed.read_text())
            path = _build(cxx, entry, include)
        try:
            torch.ops.load_library(str(path))
        except OSError:  # a cached file this machine cannot load: rebuilt once
            path.unlink()
            path = _build(cxx, entry, include)
            torch.ops.load_library(str(path))
        _check_layout(torch)
        torch.ops.cmask_native.load_runtime(L._handle)
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
