"""ctypes bindings of the runtime's C API (runtime/include/cmask_runtime/cmask_runtime.h).

The library is ``libcmask_runtime.so``: the one installed in this package by
``pip install ./python``, or the file named by ``$CMASK_RUNTIME_LIBRARY``.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

OK = 0
ROLE_SCALAR, ROLE_PER_SEQUENCE, ROLE_OFFSETS = 0, 1, 2
BF16, F16 = 0, 1


class MetadataArg(ctypes.Structure):
    _fields_ = [("scalar", ctypes.c_int32), ("values", ctypes.c_uint64),
                ("num_values", ctypes.c_size_t), ("starts", ctypes.c_uint64)]


class Bounds(ctypes.Structure):
    _fields_ = [("num_seqs", ctypes.c_int32), ("total_q", ctypes.c_int64),
                ("max_seqlen_k", ctypes.c_int64), ("columns", ctypes.c_int),
                ("total_k", ctypes.c_int64), ("max_seqlen_q", ctypes.c_int64)]


class TileView(ctypes.Structure):
    _fields_ = [("q_tile_base", ctypes.c_uint64), ("q_tile_seq", ctypes.c_uint64),
                ("counts", ctypes.c_uint64), ("tile_state", ctypes.c_uint64),
                ("tile_offsets", ctypes.c_uint64), ("tile_entries", ctypes.c_uint64),
                ("tile_order", ctypes.c_uint64), ("nkt_words", ctypes.c_int32),
                ("max_q_tiles", ctypes.c_int64)]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64), ("dtype", ctypes.c_int),
                ("tokens", ctypes.c_int64), ("heads", ctypes.c_int64),
                ("head_dim", ctypes.c_int64), ("token_stride", ctypes.c_int64),
                ("head_stride", ctypes.c_int64)]


class AttentionArgs(ctypes.Structure):
    _fields_ = [("q", Tensor), ("k", Tensor), ("v", Tensor), ("out", Tensor),
                ("lse", ctypes.c_uint64), ("scale", ctypes.c_float),
                ("tile_shape", ctypes.c_int), ("stats", ctypes.c_uint64)]


class BackwardArgs(ctypes.Structure):
    _fields_ = [("q", Tensor), ("k", Tensor), ("v", Tensor), ("out", Tensor),
                ("dout", Tensor), ("dq", Tensor), ("dk", Tensor), ("dv", Tensor),
                ("lse", ctypes.c_uint64), ("scratch", ctypes.c_uint64),
                ("scale", ctypes.c_float), ("deterministic", ctypes.c_int32),
                ("max_seqlen_q", ctypes.c_int64)]


class RuntimeError_(RuntimeError):
    """A failed runtime call; the message is the runtime's."""


_lib = None


def library_path() -> Path:
    env = os.environ.get("CMASK_RUNTIME_LIBRARY")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent / "libcmask_runtime.so"


def lib():
    """The loaded runtime library (loaded on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    if not path.exists():
        raise ImportError(
            f"cmask: the runtime library {path} is missing. Install the package "
            "with `pip install ./python` on a machine with the CUDA toolkit, or "
            "build runtime/ (cmake -S runtime -B build-rt) and set "
            "CMASK_RUNTIME_LIBRARY=build-rt/libcmask_runtime.so")
    L = ctypes.CDLL(str(path))
    P, I, I32, I64, U64, S = (ctypes.c_void_p, ctypes.c_int, ctypes.c_int32,
                              ctypes.c_int64, ctypes.c_uint64, ctypes.c_char_p)
    sig = {
        "cmask_last_error": (S, []),
        "cmask_artifact_load": (I, [S, I, ctypes.POINTER(P)]),
        "cmask_artifact_destroy": (None, [P]),
        "cmask_artifact_num_metadata": (I, [P]),
        "cmask_artifact_metadata_name": (S, [P, I]),
        "cmask_artifact_metadata_role": (I, [P, I]),
        "cmask_artifact_column_mode": (S, [P]),
        "cmask_artifact_num_slots": (I64, [P, I]),
        "cmask_artifact_num_tile_shapes": (I, [P, I]),
        "cmask_artifact_tile_shape": (I, [P, I, I, ctypes.POINTER(I64), ctypes.POINTER(I64)]),
        "cmask_descriptor_create": (I, [P, ctypes.POINTER(Bounds), ctypes.POINTER(P)]),
        "cmask_descriptor_destroy": (None, [P]),
        "cmask_descriptor_intervals": (U64, [P, I]),
        "cmask_descriptor_error_flags": (U64, [P]),
        "cmask_descriptor_tiles": (I, [P, I, I, ctypes.POINTER(TileView)]),
        "cmask_preprocess": (I, [P, P, I32, I64, I64, U64, U64, ctypes.POINTER(MetadataArg),
                                 I, P, I]),
        "cmask_read_error_flags": (I, [P, P, P, ctypes.POINTER(I32)]),
        "cmask_artifact_has_attention": (I, [P]),
        "cmask_artifact_attention_unavailable": (S, [P]),
        "cmask_artifact_default_attention_shape": (I, [P]),
        "cmask_artifact_num_attention_kernels": (I, [P]),
        "cmask_artifact_attention_kernel": (I, [P, I, ctypes.POINTER(I), ctypes.POINTER(I64),
                                                ctypes.POINTER(I)]),
        "cmask_attention_forward": (I, [P, P, ctypes.POINTER(AttentionArgs), P]),
        "cmask_backward_scratch_bytes": (ctypes.c_size_t, [I64, I64, I64, I64]),
        "cmask_attention_backward": (I, [P, P, ctypes.POINTER(BackwardArgs), P]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(L, name)
        fn.restype = res
        fn.argtypes = args
    _lib = L
    return L


def check(status: int) -> None:
    """Raises the runtime's message when a call failed."""
    if status != OK:
        raise RuntimeError_(lib().cmask_last_error().decode())
