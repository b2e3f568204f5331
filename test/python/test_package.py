"""The Python package's compiler side (no GPU): the MaskSpec builder, compile,
errors and visualize. Needs the compiler (CMASK_BIN_DIR) and numpy."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import cmask
from cmask.builder import any_, isqrt, maximum, minimum

ROOT = Path(__file__).resolve().parents[2]


def dense(spec_text: str, batch: dict, tmp_path: Path) -> list:
    src, meta = tmp_path / "spec.mlir", tmp_path / "batch.json"
    src.write_text(spec_text)
    meta.write_text(json.dumps(batch))
    out = subprocess.run([cmask._find_tool("cmask-translate"), str(src), "--cmask-to-dense-json",
                          f"--metadata={meta}"], capture_output=True, text=True, check=True)
    return [s["rows"] for s in json.loads(out.stdout)["sequences"]]


def hstu_spec() -> cmask.Spec:
    s = cmask.Spec("hstu")
    c = s.scalar("context")
    nt = s.per_sequence("num_targets")
    i, j, b, q_len = s.i, s.j, s.b, s.q_len
    hist_end = q_len - nt[b]
    s.region("contextual", guard=i < c, rule=j < hist_end)
    s.region("history", guard=i < hist_end, rule=(j < c) | ((j >= c) & (j <= i)))
    s.region("target", rule=(j < hist_end) | (j == i))
    return s


def test_builder_matches_the_catalog(tmp_path):
    """The builder's HSTU and masks/hstu.mlir give the same mask."""
    batch = {"sequences": [{"q_len": 23, "k_len": 23}, {"q_len": 9, "k_len": 9},
                           {"q_len": 0, "k_len": 0}],
             "metadata": {"context": 3, "num_targets": [5, 9, 0]}}
    built = dense(hstu_spec().to_mlir(), batch, tmp_path)
    catalog = dense((ROOT / "masks" / "hstu.mlir").read_text(), batch, tmp_path)
    assert built == catalog


def test_builder_offsets_and_unions(tmp_path):
    """Segments, bounded unions, min/max/isqrt: the mask the text describes."""
    s = cmask.Spec("mix")
    docs = s.offsets("docs")
    r = s.scalar("r")
    i, j = s.i, s.j
    same_doc = (docs.seg(j) == docs.seg(i)) & (j <= i)
    band = any_(-2, 2, lambda d: (d * d <= r * r) & (j == minimum(maximum(i + d, 0), 99)))
    s.region("all", rule=same_doc | band | (j < isqrt(r)))
    text = s.to_mlir()
    assert "cmask.any %d" in text and "cmask.seg @docs" in text
    batch = {"sequences": [{"q_len": 12, "k_len": 12}],
             "metadata": {"docs": [[4, 8]], "r": 1}}
    rows = dense(text, batch, tmp_path)[0]
    for i_ in range(12):
        for j_ in range(12):
            seg = lambda x: (x >= 4) + (x >= 8)  # noqa: E731
            want = (seg(j_) == seg(i_) and j_ <= i_) or abs(j_ - i_) <= 1 or j_ < 1
            assert rows[i_][j_] == ("1" if want else "0"), (i_, j_)


def test_builder_rejects_misuse():
    s = cmask.Spec("x")
    s.scalar("w")
    with pytest.raises(ValueError, match="already a metadata or region name"):
        s.region("w", rule=s.j <= s.i)
    with pytest.raises(TypeError, match="no Python truth value"):
        bool(s.j <= s.i)
    with pytest.raises(ValueError, match="no region"):
        cmask.Spec("empty").to_mlir()


def test_compile_writes_an_artifact(tmp_path):
    out = cmask.compile(hstu_spec(), out=tmp_path / "hstu.art", load=False, head_dims=(128,),
                        dtypes=("bf16",))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["spec"] == "hstu" and manifest["num_slots"] == 2
    kernels = [(k["kernel"], k["pass"], k.get("schedule"))
               for k in manifest["attention"]["kernels"]]
    assert kernels == [("cmask_hstu_fwd_bf16_d128_128x128", "forward", "grid"),
                       ("cmask_hstu_fwd_bf16_d128_128x128_persistent", "forward",
                        "persistent"),
                       ("cmask_hstu_fwd_bf16_d128_128x64", "forward", "grid"),
                       ("cmask_hstu_bwd_bf16_d128", "backward", None)]
    assert manifest["attention"]["default_tile_shape"] == "128x128"
    assert manifest["attention"]["tile_choice"] == "runtime"   # the compiler's default
    fixed = cmask.compile(hstu_spec(), out=tmp_path / "fixed.art", load=False, head_dims=(64,),
                          dtypes=("bf16",), attention_tile="128x64")
    attention = json.loads((fixed / "manifest.json").read_text())["attention"]
    assert (attention["default_tile_shape"], attention["tile_choice"]) == ("128x64", "fixed")
    forward = [k for k in attention["kernels"] if k["pass"] == "forward"]
    assert all(k["k_stages"] >= 2 and k["v_stages"] >= k["k_stages"] for k in forward)
    # From a path, too; sm_80 has no attention kernels.
    out80 = cmask.compile(ROOT / "masks" / "clear.mlir", arch="sm_80", out=tmp_path / "c80",
                          load=False)
    assert json.loads((out80 / "manifest.json").read_text())["attention"] is None


def test_compile_cache(tmp_path, monkeypatch):
    """A repeated compile is a cache hit (under 1 s, the same entry); another
    option or spec is another entry; out= gets a copy; a failed compile
    leaves nothing in the cache."""
    monkeypatch.setenv("CMASK_CACHE_DIR", str(tmp_path / "cache"))
    assert cmask.cache_dir() == tmp_path / "cache"
    opts = dict(load=False, head_dims=(64,), dtypes=("bf16",))
    first = cmask.compile(hstu_spec(), **opts)
    assert first.parent == tmp_path / "cache" and (first / "manifest.json").is_file()
    start = time.perf_counter()
    again = cmask.compile(hstu_spec().to_mlir(), **opts)  # the same text, as text
    assert time.perf_counter() - start < 1.0
    assert again == first
    copy = cmask.compile(hstu_spec(), out=tmp_path / "copy.art", **opts)
    assert copy == tmp_path / "copy.art"
    assert (copy / "manifest.json").read_text() == (first / "manifest.json").read_text()
    other = cmask.compile(hstu_spec(), load=False, head_dims=(64,), dtypes=("f16",))
    assert other != first and other.parent == first.parent
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(
        [first.name, other.name])
    bad = cmask.Spec("bad")
    bad.region("r", rule=bad.j * bad.j < bad.i)
    with pytest.raises(cmask.CompileError):
        cmask.compile(bad, load=False)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(
        [first.name, other.name])
    # cache=False runs the compiler into out, whatever the cache holds.
    fresh = cmask.compile(hstu_spec(), out=tmp_path / "fresh.art", cache=False, **opts)
    assert (fresh / "manifest.json").read_text() == (first / "manifest.json").read_text()


def test_compile_errors_are_located(tmp_path):
    """A builder's error names the user's Python line (and shows it); a spec
    from a file names the file; one from text names <spec text>, not a
    temporary file."""
    s = cmask.Spec("bad")
    line = sys._getframe().f_lineno + 1
    s.region("r", rule=s.j * s.j < s.i)
    with pytest.raises(cmask.CompileError) as e:
        cmask.compile(s, out=tmp_path / "bad", load=False)
    assert f"{__file__}:{line}:" in str(e.value) and "cannot isolate j" in str(e.value)
    assert 's.region("r", rule=s.j * s.j < s.i)' in str(e.value)  # the line, shown
    text = s.to_mlir()
    assert f'loc("{__file__}":{line}:' in text
    plain = cmask._without_locations(text)
    assert "loc(" not in plain
    with pytest.raises(cmask.CompileError, match=r"<spec text>:\d+:\d+: error: .*cannot isolate j"):
        cmask.compile(plain, out=tmp_path / "bad2", load=False)
    spec_file = tmp_path / "bad.mlir"
    spec_file.write_text(plain)
    with pytest.raises(cmask.CompileError, match=rf"{spec_file}:\d+:\d+: error: "):
        cmask.compile(spec_file, out=tmp_path / "bad3", load=False)
    with pytest.raises(ValueError, match="neither MaskSpec text"):
        cmask.compile("no/such/file.mlir", load=False)


def test_compile_paths_and_temporaries(tmp_path, monkeypatch):
    """A file whose name holds 'cmask.spec' is read as a file; a failed
    compile into a fresh directory leaves none; the cache's key leaves out
    the builder's locations (the same spec built on two lines hits)."""
    named = tmp_path / "my.cmask.spec.mlir"
    named.write_text((ROOT / "masks" / "causal.mlir").read_text())
    opts = dict(load=False, tile_shapes=("128x64",), head_dims=(64,), dtypes=("bf16",))
    assert (cmask.compile(str(named), out=tmp_path / "named", cache=False, **opts)
            / "manifest.json").is_file()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    bad = cmask.Spec("bad")
    bad.region("r", rule=bad.j * bad.j < bad.i)
    with pytest.raises(cmask.CompileError):
        cmask.compile(bad, cache=False, **opts)
    assert list((tmp_path / "tmp").iterdir()) == []
    monkeypatch.setenv("CMASK_CACHE_DIR", str(tmp_path / "cache"))
    one = cmask.Spec("c")
    one.region("r", rule=one.j <= one.i)
    two = cmask.Spec("c")
    two.region("r", rule=two.j <= two.i)
    assert one.to_mlir() != two.to_mlir()  # the same spec, made on other lines
    assert cmask.compile(one, **opts) == cmask.compile(two, **opts)
    assert len(list((tmp_path / "cache").iterdir())) == 1


def test_compile_with_load_fails_before_compiling(tmp_path, monkeypatch):
    """Without PyTorch or a CUDA device, compile(load=True) says so before it
    compiles anything (the cache stays empty)."""
    try:
        import torch
        if torch.cuda.is_available():
            pytest.skip("a CUDA device is present: the artifact would load")
    except ImportError:
        pass
    monkeypatch.setenv("CMASK_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises((RuntimeError, ImportError), match="load=False"):
        cmask.compile(hstu_spec())
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_visualize(tmp_path):
    """visualize takes the batch as attention does (lengths for tensors), or
    as a metadata-file dict; bad metadata raise ValueError."""
    pytest.importorskip("matplotlib")
    png = tmp_path / "hstu.png"
    cmask.visualize(hstu_spec(), png, q_len=40, context=4, num_targets=[8])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    batch = {"sequences": [{"q_len": 40, "k_len": 40}, {"q_len": 9, "k_len": 9}],
             "metadata": {"context": 4, "num_targets": [8, 2]}}
    assert cmask._batch_json(hstu_spec().to_mlir(), cu_seqlens_q=[0, 40, 49], context=4,
                             num_targets=[8, 2]) == batch
    cmask.visualize(hstu_spec(), tmp_path / "b.png", batch, sequence=1)
    cmask.visualize(hstu_spec(), batch, tmp_path / "c.png")  # the earlier argument order
    docs = ROOT / "masks" / "causal_document.mlir"
    packed = cmask._batch_json(docs.read_text(), cu_seqlens_q=[0, 12, 20],
                               docs=([4, 9, 3], [0, 2, 3]))
    assert packed["metadata"]["docs"] == [[4, 9], [3]]
    with pytest.raises(ValueError, match=r"takes metadata \['context', 'num_targets'\]; "
                                         r"missing \['num_targets'\]; unknown \['targets'\]"):
        cmask.visualize(hstu_spec(), png, q_len=40, context=4, targets=[8])
    with pytest.raises(ValueError, match="num_targets has 1 values for 2 sequences"):
        cmask.visualize(hstu_spec(), png, cu_seqlens_q=[0, 40, 49], context=4,
                        num_targets=[8])
    with pytest.raises(ValueError, match=r"<batch>:.*offsets must be non-decreasing"):
        cmask.visualize(docs, png, q_len=12, docs=[[9, 4]])  # the oracle's check
    with pytest.raises(ValueError, match="give q_len="):
        cmask.visualize(hstu_spec(), png, context=4, num_targets=[8])


def test_torch_part_says_what_is_missing():
    """Without PyTorch, cmask.Mask and cmask.load name the missing package and
    the install command (the compiler side works without it)."""
    try:
        import torch  # noqa: F401
        pytest.skip("PyTorch is installed")
    except ImportError:
        pass
    for get in (lambda: cmask.Mask, lambda: cmask.load("no/such/artifact")):
        with pytest.raises(ImportError, match=r'need PyTorch.*pip install ".\[torch\]"'):
            get()
