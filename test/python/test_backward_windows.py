"""benchmarks/backward_windows.py, the model of the backward's steps under
query windows: the fixed keys' layouts, the windows' rounding and CLEAR's
contiguous steps, whose two halves see the whole query tile between them."""

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
TRANSLATE = Path(os.environ.get("CMASK_BIN_DIR", ROOT / "build" / "bin")) / "cmask-translate"
spec = importlib.util.spec_from_file_location("backward_windows",
                                              ROOT / "benchmarks" / "backward_windows.py")
bw = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bw)


@pytest.mark.parametrize("stride", [64, 128, 192, 512])
def test_pairs_cover_every_chunk_once(stride):
    chunks = 37
    got = [c for pair in bw.pairs(chunks, stride) for c in pair if c is not None]
    assert sorted(got) == list(range(chunks))
    for c, d in bw.pairs(chunks, stride):
        assert d is None or d - c == stride // 64


def test_contiguous_pairs_are_todays_128_key_tiles():
    assert bw.pairs(5, 64) == [(0, 1), (2, 3), (4, None)]


def test_window_rounds_out_to_16():
    rows = np.zeros(64, bool)
    assert bw.window(rows) == 0
    rows[17] = True
    assert bw.window(rows) == 16
    rows[33] = True
    assert bw.window(rows) == 32  # [16, 48)


def test_causal_partial_steps_are_the_diagonal_whole():
    total, full, widths, work, per_wg, skip = bw.steps(bw.Causal(1024), 64)
    # 8 key tiles of 128; tile c is seen by query tiles 2c..15: its first two
    # (the diagonal) are partial, and in each the diagonal half sees all 64
    # queries.
    assert total == sum(16 - 2 * c for c in range(8))
    assert widths == {64: 16}
    assert work == pytest.approx(total)
    # Per warpgroup: in the first of the two (query tile 2c) the second half
    # sees nothing and costs dQ's share; in the second the first half is full.
    assert per_wg == pytest.approx(total - 8 * (1 - (1 + bw.FIXED) / 2))


def test_clear_contiguous_windows_are_whole_paired_by_width_narrow():
    mask = bw.Clear(8192, text=128, radius=8)  # a 128-wide grid, text one row
    assert mask.width == 128
    total, _, widths, work, per_wg, skip = bw.steps(mask, 64)
    assert set(widths) == {64} and work == pytest.approx(total)
    assert per_wg < 0.9 * total  # one half of each partial step is narrow
    assert per_wg < skip < total  # skipping dV's and dK's k-steps: less
    total_w, _, widths_w, work_w, _, _ = bw.steps(mask, mask.width)
    assert min(widths_w) < 64 and work_w < 0.9 * total


def test_steps_count_the_visible_pairs_brute_force():
    mask = bw.Clear(1024, text=64, radius=5)
    n = mask.tokens
    full = np.zeros((n, n), bool)
    for q0 in range(0, n, 64):
        for k0 in range(0, n, 64):
            b = mask.block(q0, k0)
            full[q0:q0 + b.shape[0], k0:k0 + b.shape[1]] = b
    for stride in (64, mask.width, 192):
        want = 0
        for c, d in bw.pairs(-(-n // 64), stride):
            keys = [c] + ([d] if d is not None else [])
            for q0 in range(0, n, 64):
                if any(full[q0:q0 + 64, 64 * k:64 * k + 64].any() for k in keys):
                    want += 1
        assert bw.steps(mask, stride)[0] == want


@pytest.mark.skipif(not TRANSLATE.exists(), reason=f"no {TRANSLATE} (build the compiler)")
def test_the_descriptors_column_windows_give_the_models_work():
    """The training descriptor's column direction (the CPU twin's) holds each
    warpgroup's query window: the work per warpgroup from them equals the
    brute-force model's on a small CLEAR."""
    mask = bw.Clear(8192, text=128, radius=8)
    total, _, _, _, per_wg, _ = bw.steps(mask, 64)
    steps, work = bw.twin_work(TRANSLATE, mask)
    assert steps == total
    assert work == pytest.approx(per_wg)
    assert work < 0.9 * total


def test_a_window_past_the_sequence_is_causal():
    assert bw.steps(bw.Sliding(1024, 4096), 64) == bw.steps(bw.Causal(1024), 64)
    assert isinstance(bw.make("sliding:1024/64"), bw.Sliding)
    assert bw.make("sliding:1024/64").window == 64
    total, full, _, _, per_wg, _ = bw.steps(bw.make("sliding:1024/64"), 64)
    assert full < total and per_wg < total
