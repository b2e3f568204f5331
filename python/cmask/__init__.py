"""cmask: attention masks compiled to GPU kernels.

Where the compiler is built (``cmask-translate``)::

    mask = cmask.compile(open("masks/hstu.mlir").read())   # or a path, or a builder
    out = mask.attention(q, k, v, context=16, num_targets=targets)

Where only the runtime is (the GPU machine: no MLIR)::

    mask = cmask.load("hstu.art")        # cmask-translate --cmask-to-artifact -o hstu.art

``docs/python.md`` has the whole API, the layouts and the metadata forms.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import builder
from .builder import Spec

__all__ = ["compile", "cache_dir", "load", "visualize", "Mask", "Prepared", "CompileError", "Spec",
           "builder"]


class CompileError(RuntimeError):
    """The compiler rejected the spec; the message holds its located diagnostics."""


def _find_tool(name: str) -> str:
    """cmask-translate from $CMASK_BIN_DIR, PATH or this repository's build/bin."""
    candidates = []
    if os.environ.get("CMASK_BIN_DIR"):
        candidates.append(Path(os.environ["CMASK_BIN_DIR"]) / name)
    found = shutil.which(name)
    if found:
        candidates.append(Path(found))
    candidates.append(Path(__file__).resolve().parents[2] / "build" / "bin" / name)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    raise FileNotFoundError(
        f"cmask: {name} not found (set CMASK_BIN_DIR to the compiler's bin directory, "
        "or put it on PATH). On a machine without the compiler, compile the artifact "
        "elsewhere and use cmask.load(artifact_dir).")


def _spec_source(spec) -> tuple:
    """(MLIR text, the file it came from or None) of text, a path, or a
    builder (an object with to_mlir(), whose text locates each op at the
    user's Python line)."""
    if hasattr(spec, "to_mlir"):
        return spec.to_mlir(), None
    if isinstance(spec, os.PathLike):
        return Path(spec).read_text(), Path(spec)
    if isinstance(spec, str):
        # A path first: a file name may contain "cmask.spec" too.
        if "\n" not in spec and len(spec) < 4096 and Path(spec).is_file():
            return Path(spec).read_text(), Path(spec)
        if "cmask.spec" in spec:
            return spec, None
        raise ValueError(f"cmask: {spec!r} is neither MaskSpec text (no 'cmask.spec') "
                         "nor an existing file")
    raise TypeError(f"cmask: a spec is MLIR text, a path or a cmask.Spec, not {type(spec).__name__}")


def _spec_text(spec) -> str:
    return _spec_source(spec)[0]


# A builder's locations (loc("file.py":line:col)) do not reach the artifact:
# the compile cache's key leaves them out.
_LOCATION = re.compile(r' loc\("(?:[^"\\]|\\.)*":\d+:\d+\)')


def _without_locations(text: str) -> str:
    return _LOCATION.sub("", text)


def _run(args: list[str], what: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(f"cmask: {what} failed:\n{proc.stderr.strip()}")
    return proc


def cache_dir() -> Path:
    """Where ``cmask.compile`` keeps the artifacts it built: ``$CMASK_CACHE_DIR``,
    else ``$XDG_CACHE_HOME/cmask``, else ``~/.cache/cmask``."""
    if os.environ.get("CMASK_CACHE_DIR"):
        return Path(os.environ["CMASK_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "cmask"


_COMPILER_DIGESTS: dict = {}


def _compiler_digest(tool: str) -> str:
    """SHA-256 of the compiler binary (memoized per path, size and mtime)."""
    st = os.stat(tool)
    memo = (tool, st.st_size, st.st_mtime_ns)
    if memo not in _COMPILER_DIGESTS:
        _COMPILER_DIGESTS[memo] = hashlib.sha256(Path(tool).read_bytes()).hexdigest()
    return _COMPILER_DIGESTS[memo]


def _translate(tool: str, text: str, options: list[str], out: Path, path=None) -> None:
    """cmask-translate --cmask-to-artifact on the spec's file (its diagnostics
    then name the user's file), or on its text in a temporary file, whose
    name the diagnostics call <spec text>."""
    if path is not None and Path(path).read_text() == text:
        _run([tool, str(path), "--cmask-to-artifact", "-o", str(out)] + options,
             "compiling the spec")
        return
    with tempfile.TemporaryDirectory(prefix="cmask-") as tmp:
        source = str(Path(tmp) / "spec.mlir")
        Path(source).write_text(text)
        try:
            _run([tool, source, "--cmask-to-artifact", "-o", str(out)] + options,
                 "compiling the spec")
        except CompileError as e:
            raise CompileError(str(e).replace(source, "<spec text>")) from None


def _cached_artifact(tool: str, text: str, options: list[str], path=None) -> Path:
    """The cache's artifact of (spec text, options, compiler), built if absent.
    An entry is complete or absent: it is built in a temporary directory of
    the cache and renamed into place (a concurrent build of the same entry
    keeps the first one renamed)."""
    # ptxas (which cmask-translate runs for the cubins) by path, size and mtime,
    # found as lib/Target/Artifact.cpp finds it. Not in the key: the LLVM/MLIR
    # shared libraries the compiler links (a rebuilt compiler changes the key).
    ptxas = shutil.which("ptxas") or next(
        (str(p) for p in (Path(os.environ.get("CUDA_HOME", "/nonexistent")) / "bin" / "ptxas",
                          Path("/usr/local/cuda/bin/ptxas")) if p.is_file()), None)
    ptxas_id = None
    if ptxas:
        st = os.stat(ptxas)
        ptxas_id = [os.path.realpath(ptxas), st.st_size, st.st_mtime_ns]
    key = hashlib.sha256(json.dumps(
        {"cache": 1, "compiler": _compiler_digest(tool), "ptxas": ptxas_id,
         "spec": _without_locations(text),
         "options": options}, sort_keys=True).encode()).hexdigest()
    root = cache_dir()
    entry = root / key
    if (entry / "manifest.json").is_file():
        return entry
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".build-{key[:16]}-", dir=root))
    try:
        _translate(tool, text, options, tmp, path)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 would reach out= copies
        if entry.exists() and not (entry / "manifest.json").is_file():
            shutil.rmtree(entry, ignore_errors=True)  # not an entry this code wrote
        try:
            os.rename(tmp, entry)
        except OSError:
            if not (entry / "manifest.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return entry


def compile(spec, arch: str = "sm_90a", out=None, *, tile_shapes=("128x128", "128x64"),
            head_dims=(64, 128), dtypes=("bf16", "f16"), attention_tile=None,
            load: bool = True, device=None, cache: bool = True):
    """Compiles a MaskSpec into an artifact directory and (by default) loads it.

    spec: MaskSpec text, a path to a .mlir file, or a ``cmask.Spec`` builder.
    arch: ``sm_90a`` (preprocess + attention kernels) or ``sm_80`` (preprocess
    only). out: a directory to write the artifact to (default: the cache's
    entry itself). cache: look the artifact up in the compile cache
    (``cache_dir()``, keyed by the spec's text, the options and the compiler
    binary) and keep what is built there; False: always run the compiler
    (into ``out``, or a fresh temporary directory).
    Returns a ``Mask`` (load=True) or the artifact's path. Compile errors
    raise ``CompileError`` located in the spec's file, or for a builder at
    the Python lines that made the failing expression.
    """
    text, path = _spec_source(spec)
    tool = _find_tool("cmask-translate")
    if load:
        _check_loadable()  # before a compile whose artifact could not load
    options = [f"--arch={arch}", "--tile-shapes=" + ",".join(tile_shapes),
               "--head-dims=" + ",".join(str(d) for d in head_dims),
               "--dtypes=" + ",".join(dtypes)]
    if attention_tile:
        options.append(f"--attention-tile={attention_tile}")
    if cache:
        artifact = _cached_artifact(tool, text, options, path)
        if out is None:
            out = artifact
        else:
            out = Path(out)
            shutil.copytree(artifact, out, dirs_exist_ok=True)
    elif out is not None:
        out = Path(out)
        _translate(tool, text, options, out, path)
    else:
        out = Path(tempfile.mkdtemp(prefix="cmask-"))
        try:
            _translate(tool, text, options, out, path)
        except BaseException:
            shutil.rmtree(out, ignore_errors=True)  # nothing of a failed compile stays
            raise
    return globals()["load"](out, device=device) if load else out


def _check_loadable() -> None:
    """Why an artifact could not be loaded here (no torch, no CUDA device), as
    an error raised before compiling one."""
    try:
        import torch
    except ImportError as e:
        raise ImportError("cmask.compile(load=True) loads the artifact with PyTorch, which "
                          f"is not installed ({e}); pass load=False to only compile") from None
    if not torch.cuda.is_available():
        raise RuntimeError("cmask.compile(load=True): no CUDA device to load the artifact "
                           "on; pass load=False to only compile (cmask.load it on the GPU "
                           "machine)")


def load(artifact_dir, device=None):
    """Loads an artifact (cmask-translate --cmask-to-artifact) on a CUDA device."""
    from .mask import Mask
    return Mask(artifact_dir, device=device)


def visualize(spec, metadata: dict, path, sequence: int = 0) -> None:
    """Writes a PNG of the mask of one sequence of a batch.

    metadata: a batch as in docs/metadata-json.md, e.g.
    ``{"sequences": [{"q_len": 64, "k_len": 64}], "metadata": {"context": 4, ...}}``.
    The mask is evaluated from the spec's rules element by element (the
    compiler's oracle, ``--cmask-to-dense-json``).
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    text = _spec_text(spec)
    with tempfile.TemporaryDirectory(prefix="cmask-") as tmp:
        (Path(tmp) / "spec.mlir").write_text(text)
        (Path(tmp) / "batch.json").write_text(json.dumps(metadata))
        proc = _run([_find_tool("cmask-translate"), str(Path(tmp) / "spec.mlir"),
                     "--cmask-to-dense-json", f"--metadata={Path(tmp) / 'batch.json'}"],
                    "evaluating the mask")
    result = json.loads(proc.stdout)
    seqs = result["sequences"]
    if not 0 <= sequence < len(seqs):
        raise IndexError(f"cmask.visualize: sequence {sequence} of a batch of {len(seqs)}")
    rows = seqs[sequence]["rows"]
    dense = np.array([[c == "1" for c in r] for r in rows], dtype=bool).reshape(
        seqs[sequence]["q_len"], seqs[sequence]["k_len"])
    fig, ax = plt.subplots(figsize=(6, 6 * max(dense.shape[0], 1) / max(dense.shape[1], 1) + 0.5))
    ax.imshow(dense, cmap="Blues", interpolation="nearest", aspect="auto")
    ax.set_xlabel("key j")
    ax.set_ylabel("query i")
    ax.set_title(f"{result['spec']}: sequence {sequence} "
                 f"({int(dense.sum())} of {dense.size} pairs visible)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def __getattr__(name):
    if name in ("Mask", "Prepared"):
        from . import mask
        return getattr(mask, name)
    raise AttributeError(name)
