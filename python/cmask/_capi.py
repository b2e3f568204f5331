"""ctypes bindings of the runtime's C API (runtime/include/cmask_runtime/cmask_runtime.h).

The library is ``libcmask_runtime.so``: the one installed in this package by
``pip install .``, or the file named by ``$CMASK_RUNTIME_LIBRARY``.

The structures, enum values and the tile-entry encoding are not copied here:
the library describes its own (``cmask_abi()``, generated from
``cmask_runtime_structs.def`` and ``DescriptorLayout.h``), and the classes
``MetadataArg``, ``Bounds``, ``TileView``, ``Tensor``, ``AttentionArgs`` and
``BackwardArgs`` are built from that description when the library is first
used, their sizes and offsets checked against it.
"""

from __future__ import annotations

import ctypes
import json
import os
import sysconfig
from pathlib import Path

# Python names of the C API's structures and enum values.
_STRUCTS = {"MetadataArg": "cmask_metadata_arg", "Bounds": "cmask_bounds",
            "TileView": "cmask_tile_view", "Tensor": "cmask_tensor",
            "AttentionArgs": "cmask_attention_args",
            "BackwardArgs": "cmask_backward_args"}
_ENUMS = {"OK": ("cmask_status", "CMASK_OK"),
          "ROLE_SCALAR": ("cmask_metadata_role", "CMASK_ROLE_SCALAR"),
          "ROLE_PER_SEQUENCE": ("cmask_metadata_role", "CMASK_ROLE_PER_SEQUENCE"),
          "ROLE_OFFSETS": ("cmask_metadata_role", "CMASK_ROLE_OFFSETS"),
          "BF16": ("cmask_dtype", "CMASK_BF16"), "F16": ("cmask_dtype", "CMASK_F16")}
# The field types cmask_runtime_structs.def may use.
_C_TYPES = {"int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64,
            "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t,
            "int": ctypes.c_int, "float": ctypes.c_float}


class RuntimeError_(RuntimeError):
    """A failed runtime call; the message is the runtime's."""


class ABIError(ImportError):
    """The runtime library's structures are not what ctypes lays out."""


_lib = None
_abi = None
_structs = None


def library_path() -> Path:
    """$CMASK_RUNTIME_LIBRARY, else the library next to this file, else (an
    editable install, `pip install -e .`, builds it into the
    environment's site-packages and leaves the sources where they are) the
    one in site-packages/cmask."""
    env = os.environ.get("CMASK_RUNTIME_LIBRARY")
    if env:
        return Path(env)
    return _installed("libcmask_runtime.so")


def _installed(name: str) -> Path:
    """`name` next to this file, else in site-packages/cmask (an editable
    install's build output), else (absent) next to this file."""
    here = Path(__file__).resolve().parent / name
    for path in [here] + [Path(sysconfig.get_paths()[key]) / "cmask" / name
                          for key in ("platlib", "purelib")]:
        if path.exists():
            return path
    return here


def _build_structs(description: dict) -> dict:
    """ctypes classes for the library's structures, in the order it lists them
    (a structure's fields use only those before it)."""
    built = {}
    for cname, spec in description.items():
        fields = []
        for field, ctype, _ in spec["fields"]:
            if ctype in _C_TYPES:
                fields.append((field, _C_TYPES[ctype]))
            elif ctype in built:
                fields.append((field, built[ctype]))
            else:
                raise ABIError(f"cmask: {cname}.{field} has type {ctype}, unknown to the "
                               "bindings")
        cls = type(cname, (ctypes.Structure,), {"_fields_": fields})
        if ctypes.sizeof(cls) != spec["size"]:
            raise ABIError(f"cmask: {cname} is {spec['size']} bytes in the runtime library "
                           f"and {ctypes.sizeof(cls)} as ctypes lays it out")
        for field, _, offset in spec["fields"]:
            if getattr(cls, field).offset != offset:
                raise ABIError(f"cmask: {cname}.{field} is at offset {offset} in the runtime "
                               f"library and {getattr(cls, field).offset} in ctypes")
        built[cname] = cls
    return built


def lib():
    """The loaded runtime library (loaded on first use)."""
    global _lib, _abi, _structs
    if _lib is not None:
        return _lib
    path = library_path()
    if not path.exists():
        why, info = "", _installed("_build.json")
        if info.exists():  # what the package's build said of the runtime
            note = json.loads(info.read_text()).get("runtime")
            why = f" (this package was {note})" if note else ""
        raise ImportError(
            f"cmask: the runtime library {path} is missing{why}. Install the package "
            "with `pip install .` (the repository root) on a machine with the CUDA toolkit, or "
            "build runtime/ (cmake -S runtime -B build-rt) and set "
            "CMASK_RUNTIME_LIBRARY=build-rt/libcmask_runtime.so")
    L = ctypes.CDLL(str(path))
    if not hasattr(L, "cmask_abi"):
        raise ABIError(f"cmask: {path} does not describe its ABI (cmask_abi); it is "
                       "older than these bindings: rebuild it")
    L.cmask_abi.restype = ctypes.c_char_p
    L.cmask_abi.argtypes = []
    _abi = json.loads(L.cmask_abi().decode())
    _structs = _build_structs(_abi["structs"])
    S = {py: _structs[c] for py, c in _STRUCTS.items()}
    P, I, I32, I64, U64, CS = (ctypes.c_void_p, ctypes.c_int, ctypes.c_int32,
                               ctypes.c_int64, ctypes.c_uint64, ctypes.c_char_p)
    ptr = ctypes.POINTER
    sig = {
        "cmask_last_error": (CS, []),
        "cmask_artifact_load": (I, [CS, I, ptr(P)]),
        "cmask_artifact_check": (I, [CS]),
        "cmask_artifact_destroy": (None, [P]),
        "cmask_artifact_num_metadata": (I, [P]),
        "cmask_artifact_metadata_name": (CS, [P, I]),
        "cmask_artifact_metadata_role": (I, [P, I]),
        "cmask_artifact_column_mode": (CS, [P]),
        "cmask_artifact_num_slots": (I64, [P, I]),
        "cmask_artifact_num_tile_shapes": (I, [P, I]),
        "cmask_artifact_tile_shape": (I, [P, I, I, ptr(I64), ptr(I64)]),
        "cmask_descriptor_create": (I, [P, ptr(S["Bounds"]), ptr(P)]),
        "cmask_descriptor_bytes": (I, [P, ptr(S["Bounds"]), ptr(U64)]),
        "cmask_descriptor_create_at": (I, [P, ptr(S["Bounds"]), U64, U64, ptr(P)]),
        "cmask_descriptor_set_batch": (I, [P, P, I32, I64, I64, U64, U64]),
        "cmask_descriptor_destroy": (None, [P]),
        "cmask_descriptor_intervals": (U64, [P, I]),
        "cmask_descriptor_error_flags": (U64, [P]),
        "cmask_descriptor_tiles": (I, [P, I, I, ptr(S["TileView"])]),
        "cmask_preprocess": (I, [P, P, I32, I64, I64, U64, U64, ptr(S["MetadataArg"]),
                                 I, P, I]),
        "cmask_preprocess_window": (I, [P, P, I32, I64, I64, U64, U64,
                                        ptr(S["MetadataArg"]), I, P, I, I, I]),
        "cmask_read_error_flags": (I, [P, P, P, ptr(I32)]),
        "cmask_artifact_has_attention": (I, [P]),
        "cmask_artifact_attention_unavailable": (CS, [P]),
        "cmask_artifact_default_attention_shape": (I, [P]),
        "cmask_attention_tile_shape": (I, [P, P]),
        "cmask_artifact_num_attention_kernels": (I, [P]),
        "cmask_artifact_attention_kernel": (I, [P, I, ptr(I), ptr(I64), ptr(I)]),
        "cmask_attention_forward": (I, [P, P, ptr(S["AttentionArgs"]), P]),
        "cmask_backward_scratch_bytes": (ctypes.c_size_t, [I64, I64, I64, I64]),
        "cmask_attention_backward": (I, [P, P, ptr(S["BackwardArgs"]), P]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(L, name)
        fn.restype = res
        fn.argtypes = args
    # The structures and enum values as plain module attributes from now on
    # (the attention path reads them on every call; __getattr__ is for the
    # first use).
    globals().update(S)
    globals().update({name: _abi["enums"][enum][value]
                      for name, (enum, value) in _ENUMS.items()})
    _lib = L
    return L


def abi() -> dict:
    """The library's description of its structures, enums and tile entries."""
    lib()
    return _abi


def __getattr__(name: str):
    # The structures and enum values come from the loaded library.
    if name in _STRUCTS:
        lib()
        return _structs[_STRUCTS[name]]
    if name in _ENUMS:
        enum, value = _ENUMS[name]
        return abi()["enums"][enum][value]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def tile_entry_field(entries, field: str):
    """Field `field` ('tile', 'state', 'first_slot', 'slot_count') of tile-list
    entry words (ints, numpy arrays or torch tensors), decoded as the library
    encodes them."""
    shift, width = abi()["tile_entry"][field]
    return (entries >> shift) & ((1 << width) - 1)


def check(status: int) -> None:
    """Raises the runtime's message when a call failed."""
    if status != abi()["enums"]["cmask_status"]["CMASK_OK"]:
        raise RuntimeError_(lib().cmask_last_error().decode())
