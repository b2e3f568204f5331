"""The Python bindings' structures come from the runtime library
(cmask_abi()), not from a copy: built, checked, and used to read an
artifact. Needs the runtime library (built where the CUDA toolkit is; on a
machine without a driver the ctest runs it against the toolkit's stub); no
GPU."""

import ctypes
import os
import subprocess
from pathlib import Path

import pytest

import cmask
from cmask import _capi

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    not _capi.library_path().exists(),
    reason="the runtime library is not built (set CMASK_RUNTIME_LIBRARY)")


def test_structures_from_the_library():
    description = _capi.abi()["structs"]
    for name, cname in _capi._STRUCTS.items():
        cls = getattr(_capi, name)
        assert ctypes.sizeof(cls) == description[cname]["size"]
        assert [f for f, _ in cls._fields_] == [f for f, _, _ in description[cname]["fields"]]
    # Nested structures are the library's too.
    assert dict(_capi.AttentionArgs._fields_)["q"] is _capi.Tensor
    bounds = _capi.Bounds(3, 100, 64, 1, 100, 64)
    assert (bounds.num_seqs, bounds.max_seqlen_q) == (3, 64)


def test_enums_from_the_library():
    assert (_capi.OK, _capi.BF16, _capi.F16) == (0, 0, 1)
    assert (_capi.ROLE_SCALAR, _capi.ROLE_PER_SEQUENCE, _capi.ROLE_OFFSETS) == (0, 1, 2)
    with pytest.raises(AttributeError):
        _capi.NOT_A_NAME


def test_tile_entry_fields():
    # key tile 5, partial, slots 3 .. 3 + 2
    word = 5 | 1 << 16 | 3 << 18 | 2 << 25
    assert [_capi.tile_entry_field(word, f) for f in ("tile", "state", "first_slot",
                                                       "slot_count")] == [5, 1, 3, 2]


def test_artifact_check(tmp_path):
    art = tmp_path / "hstu.art"
    translate = Path(os.environ.get("CMASK_BIN_DIR", REPO / "build" / "bin")) / "cmask-translate"
    subprocess.run([str(translate), str(REPO / "masks" / "hstu.mlir"), "--cmask-to-artifact",
                    "-o", str(art)], check=True, capture_output=True)
    _capi.check(_capi.lib().cmask_artifact_check(str(art).encode()))
    manifest = art / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"num_heads"', '"heads"', 1))
    with pytest.raises(_capi.RuntimeError_, match="argument .* is 'heads' .* in the artifact "
                       "and 'num_heads' .* in this runtime"):
        _capi.check(_capi.lib().cmask_artifact_check(str(art).encode()))
    # Loading it (the runtime's full load path) refuses it the same way,
    # before any CUDA call: no GPU is needed to see the message.
    handle = ctypes.c_void_p()
    with pytest.raises(_capi.RuntimeError_, match="kernel ABI differs from this runtime's: "
                       "kernel cmask_hstu_bwd_bf16_d128: argument 19 is 'heads' .i32. "
                       "in the artifact and 'num_heads' .i32. in this runtime"):
        _capi.check(_capi.lib().cmask_artifact_load(str(art).encode(), 0,
                                                     ctypes.byref(handle)))
    assert not handle.value
