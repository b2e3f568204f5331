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
import sys
import tempfile
from pathlib import Path

from . import builder
from .builder import Spec

__all__ = ["compile", "cache_dir", "load", "visualize", "Mask", "Prepared", "CompileError", "Spec",
           "builder"]


class CompileError(RuntimeError):
    """The compiler rejected the spec; the message holds its located diagnostics."""


def _find_tool(name: str) -> str:
    """cmask-translate from $CMASK_BIN_DIR, else this package's bin/ (built
    into it where LLVM/MLIR 22 was found), else PATH, else this repository's
    build/bin."""
    from ._capi import _installed

    candidates = []
    if os.environ.get("CMASK_BIN_DIR"):
        candidates.append(Path(os.environ["CMASK_BIN_DIR"]) / name)
    candidates.append(_installed(f"bin/{name}"))
    found = shutil.which(name)
    if found:
        candidates.append(Path(found))
    candidates.append(Path(__file__).resolve().parents[2] / "build" / "bin" / name)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    why = ""
    info = _installed("_build.json")
    if info.is_file():  # what the package's build said of the compiler
        note = json.loads(info.read_text()).get("compiler")
        why = f" (this package was {note})" if note else ""
    raise FileNotFoundError(
        f"cmask: {name} not found{why}: install the package where LLVM/MLIR 22 is "
        "(its build then puts the compiler in it), or set CMASK_BIN_DIR to the "
        "compiler's bin directory, or put it on PATH. On a machine without the "
        "compiler, compile the artifact elsewhere and use cmask.load(artifact_dir).")


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


def _torch_part():
    """cmask.mask (Mask, Prepared, the custom ops), which needs PyTorch."""
    try:
        from . import mask
    except ModuleNotFoundError as e:
        if e.name != "torch":
            raise
        raise ImportError("cmask: loading artifacts and attention need PyTorch, which is not "
                          "installed: pip install torch (or the package's extra, "
                          "pip install \".[torch]\")") from None
    return mask


def load(artifact_dir, device=None):
    """Loads an artifact (cmask-translate --cmask-to-artifact) on a CUDA device."""
    return _torch_part().Mask(artifact_dir, device=device)


_METADATA_DECL = re.compile(r"cmask\.metadata\s+@(\w+)\s*:\s*(scalar|per_sequence|offsets)")


def _as_ints(value, what: str) -> list:
    """A list of ints from a list, a tuple or a tensor/array (no device sync
    concerns here: visualize runs on the CPU)."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    try:
        return [int(x) for x in value]
    except (TypeError, ValueError):
        raise ValueError(f"cmask: {what} must be a list of ints, got {value!r}") \
            from None


def _batch_json(text: str, *, q_len=None, k_len=None, cu_seqlens_q=None, cu_seqlens_k=None,
                **metadata) -> dict:
    """The metadata file's batch (docs/metadata-json.md) of attention-style
    arguments: one sequence (q_len, k_len) or packed ones (cu_seqlens_q/k),
    the metadata by name as Mask.attention takes them (scalars as ints,
    per-sequence values as lists or tensors, offsets as per-sequence lists or
    (values, starts)), checked against the spec's declarations."""
    if cu_seqlens_q is not None:
        cq = _as_ints(cu_seqlens_q, "cu_seqlens_q")
        ck = _as_ints(cu_seqlens_k if cu_seqlens_k is not None else cu_seqlens_q, "cu_seqlens_k")
        if len(cq) < 2 or len(cq) != len(ck):
            raise ValueError("cmask: cu_seqlens_q and cu_seqlens_k need B + 1 "
                             "entries each (B >= 1)")
        lens = [(cq[b + 1] - cq[b], ck[b + 1] - ck[b]) for b in range(len(cq) - 1)]
    elif q_len is not None:
        lens = [(int(q_len), int(k_len if k_len is not None else q_len))]
    else:
        raise ValueError("cmask: give q_len= (and k_len=) for one sequence, or "
                         "cu_seqlens_q= (and cu_seqlens_k=) for a batch")
    if any(q < 0 or k < 0 for q, k in lens):
        raise ValueError(f"cmask: negative sequence lengths {lens}")
    declared = dict(_METADATA_DECL.findall(text))
    missing, unknown = set(declared) - set(metadata), set(metadata) - set(declared)
    if missing or unknown:
        raise ValueError(f"cmask: the spec takes metadata {sorted(declared) or 'none'}"
                         + (f"; missing {sorted(missing)}" if missing else "")
                         + (f"; unknown {sorted(unknown)}" if unknown else ""))
    out = {}
    for name, role in declared.items():
        value = metadata[name]
        if role == "scalar":
            out[name] = int(value)
        elif role == "per_sequence":
            out[name] = _as_ints(value, f"metadata {name}")
            if len(out[name]) != len(lens):
                raise ValueError(f"cmask: metadata {name} has {len(out[name])} "
                                 f"values for {len(lens)} sequences")
        else:
            if isinstance(value, tuple) and len(value) == 2:
                values, starts = _as_ints(value[0], name), _as_ints(value[1], f"{name} starts")
                if len(starts) != len(lens) + 1:
                    raise ValueError(f"cmask: metadata {name}: starts has "
                                     f"{len(starts)} entries for {len(lens)} sequences")
                value = [values[starts[b]:starts[b + 1]] for b in range(len(lens))]
            out[name] = [_as_ints(v, f"metadata {name}") for v in value]
            if len(out[name]) != len(lens):
                raise ValueError(f"cmask: metadata {name} has {len(out[name])} "
                                 f"boundary lists for {len(lens)} sequences")
    return {"sequences": [{"q_len": q, "k_len": k} for q, k in lens], "metadata": out}


def _evaluate(text: str, batch: dict, mode: str, what: str) -> dict:
    """cmask-translate's evaluation `mode` (--cmask-to-dense-json,
    --cmask-to-intervals-json) of the spec on one batch, as JSON. An error in
    the batch raises ValueError located in <batch>; one in the spec
    CompileError located in <spec>."""
    with tempfile.TemporaryDirectory(prefix="cmask-") as tmp:
        spec, meta = Path(tmp) / "spec.mlir", Path(tmp) / "batch.json"
        spec.write_text(text)
        meta.write_text(json.dumps(batch))
        try:
            proc = _run([_find_tool("cmask-translate"), str(spec), mode, f"--metadata={meta}"],
                        what)
        except CompileError as e:
            message = str(e).replace(str(meta), "<batch>").replace(str(spec), "<spec>")
            raise (ValueError if "<batch>" in message else CompileError)(message) from None
    return json.loads(proc.stdout)


def visualize(spec, path, batch: dict | None = None, *, sequence: int = 0, **layout_and_metadata
              ) -> None:
    """Writes a PNG of the mask of one sequence of a batch.

    The batch as Mask.attention takes it, lengths instead of tensors:
    ``q_len=``/``k_len=`` (one sequence) or ``cu_seqlens_q=``/``cu_seqlens_k=``
    (lists or tensors), and the metadata by name, e.g.
    ``cmask.visualize("masks/hstu.mlir", "hstu.png", q_len=64, context=4,
    num_targets=[8])``; or a batch dict as in docs/metadata-json.md
    (``{"sequences": [{"q_len": 64, "k_len": 64}], "metadata": {...}}``).
    The mask is evaluated from the spec's rules element by element (the
    compiler's oracle, ``--cmask-to-dense-json``). Bad metadata raise
    ValueError.
    """
    if isinstance(path, dict):  # the earlier order: visualize(spec, batch, path)
        path, batch = batch, path
    text = _spec_text(spec)
    if batch is None:
        batch = _batch_json(text, **layout_and_metadata)
    elif layout_and_metadata:
        raise TypeError("cmask.visualize: give the batch as a dict or as keyword arguments, "
                        "not both")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    result = _evaluate(text, batch, "--cmask-to-dense-json", "evaluating the mask")
    seqs = result["sequences"]
    if not 0 <= sequence < len(seqs):
        raise IndexError(f"cmask: sequence {sequence} of a batch of {len(seqs)}")
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
        return getattr(_torch_part(), name)
    raise AttributeError(name)


# The custom ops (torch.ops.cmask.*) are registered by the torch part. A
# script that imported PyTorch first has them once cmask is imported; without
# PyTorch loaded, `import cmask` stays free of it (the compiler side needs no
# PyTorch, and importing it takes seconds), and the ops come with the first
# cmask.Mask, cmask.load or `import cmask.mask`.
# Where that fails (a PyTorch too old for torch.library.custom_op, a stub),
# `import cmask` still serves the compiler side, and cmask.load raises the
# error.
if sys.modules.get("torch") is not None:
    try:
        _torch_part()
    except Exception:  # noqa: BLE001 - reported again by cmask.load / cmask.Mask
        pass
