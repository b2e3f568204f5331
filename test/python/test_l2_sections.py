"""benchmarks/l2_sections.py, the model of the forward's DRAM reads per
schedule: compulsory reads only where L2 holds what the running items
share, and more once a section's keys and values outgrow it; each order's
balance (the list schedule's tail) without L2."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("l2_sections",
                                              ROOT / "benchmarks" / "l2_sections.py")
l2 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(l2)

TILE = l2.TILE_BYTES


def compulsory(lengths, heads):
    """Every Q, K and V tile read once."""
    return 3 * heads * sum(-(-n // l2.TILE) for n in lengths) * TILE


def test_items_cover_every_query_tile_of_every_head_once():
    lengths, heads = [300, 1024, 129], 6
    want = sorted((s, h, i) for s, n in enumerate(lengths) for h in range(heads)
                  for i in range(-(-n // l2.TILE)))
    assert sorted(l2.grid_items(lengths, heads)) == want
    for g in (1, 4, 6, 8):
        assert sorted(l2.persistent_items(lengths, heads, g)) == want


def test_heaviest_query_tiles_first_heads_innermost_in_a_section():
    items = l2.persistent_items([512, 256], 4, 2)
    assert items[:4] == [(0, 0, 3), (0, 1, 3), (0, 0, 2), (0, 1, 2)]
    assert {h for _, h, _ in items[:len(items) // 2]} == {0, 1}


def test_an_l2_that_holds_everything_reads_each_tile_once():
    lengths, heads = [1024, 1024], 4
    big = 1 << 40
    for items in (l2.grid_items(lengths, heads), l2.persistent_items(lengths, heads, 4)):
        assert l2.dram_bytes(items, 16, big) == compulsory(lengths, heads)


def test_a_section_beyond_l2_reads_more_than_one_within_it():
    # 8 sequences of 1K, 8 heads: 512 KB of K and V per head and sequence,
    # 4 MB per head; L2 of 6 MB holds one head's K/V, not four.
    lengths, heads, sms, cache = [1024] * 8, 8, 32, 6 << 20
    one = l2.dram_bytes(l2.persistent_items(lengths, heads, 1), sms, cache)
    four = l2.dram_bytes(l2.persistent_items(lengths, heads, 4), sms, cache)
    assert one == compulsory(lengths, heads)
    assert four > 1.3 * one


def test_balance_is_the_tail_of_the_list_schedule():
    # One item per worker: the makespan is the heaviest item, so the balance
    # is its time over the mean. Two equal items on two workers: perfect.
    # (The workers start 1e-3 units apart.)
    steps = l2.balance([(0, 0, 3), (0, 0, 0)], 2)
    assert steps == pytest.approx((2 + 4) * 2 / ((2 + 4) + (2 + 1)), abs=1e-3)
    assert l2.balance([(0, 0, 3), (0, 1, 3)], 2) == pytest.approx(1.0, abs=1e-3)
    # A single 4K sequence of 32 heads on 132 workers: heads outermost (one
    # head a section, the grid's order) leaves the last heads' heaviest tiles
    # for the end; sections of 8 heads take them early enough.
    lengths, heads = [4096], 32
    one = l2.balance(l2.persistent_items(lengths, heads, 1), 132)
    eight = l2.balance(l2.persistent_items(lengths, heads, 8), 132)
    assert one > 1.05 > 1.01 > eight >= 1.0
