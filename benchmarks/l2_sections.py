#!/usr/bin/env python3
"""A model of the causal forward's DRAM reads under an LRU L2, per schedule:
the grid kernel (heads outermost) and the persistent kernel in sections of
G query heads (heads innermost in a section; rt::sectionHeads in
runtime/include/cmask_runtime/Schedule.h). No GPU, no cmask.

What it models: SMS workers (one item each at a time, the next item from
the schedule's order when one ends: the persistent kernel's counter, or
the grid's CTAs in launch order); an item (sequence, head, query tile i)
reads its Q tile, then key/value tiles 0..i (causal, 128 x 128 tiles of
D = 128, bf16: 32 KB each), one step per time unit; every read goes
through one LRU cache of --l2 MiB at tile granularity, and a miss
is a DRAM read. Query tiles are taken heaviest first (the descriptor's
order). It leaves out the output's writes, the descriptor's words, L2's
sets and its two partitions, and any difference in step times. A second
table gives each order's balance without L2: the list schedule's makespan
over its ideal (the items' time units over SMS), what the order's tail
costs (heads outermost leaves the last heads' heaviest query tiles of a
single sequence for the end).

Checked against ncu (H100, causal 8 x 4K, docs/performance.md,
2026-12-07, forty-third and forty-fifth sessions): measured DRAM reads
0.91 GB (grid), 2.52 GB (persistent, sections of 4 heads), 1.37 GB (2
heads) and 1.04 GB (1 head); the model gives 0.81 / 2.00 GB at 50 MiB
(grid / 4 heads) and 0.81 / 2.45 / 1.21 / 0.81 GB at 30 MiB (GB: 10^9
bytes). It leaves out what fewer heads cost in cycles where many SMs read
one K/V tile: at a single 8K sequence 4 heads took 1.11x the cycles of 16.

    python3 benchmarks/l2_sections.py [--shapes 8x4096,16x2048,varlen] [--l2 50,30]
        [--sections 1,2,4,8] [--heads 32] [--sms 132]

A shape is BxN (B sequences of N tokens) or varlen (benchmarks/peers.py's
packed documents: 30 sequences, 32K tokens, seed 0).
"""

import argparse
import heapq
import math
from collections import OrderedDict

TILE = 128
TILE_BYTES = TILE * 128 * 2  # a 128 x 128 bf16 tile of Q, K or V


def query_tiles(lengths):
    """(sequence, query tile) heaviest first (causal: tile i takes i + 1 steps)."""
    tiles = [(s, i) for s, n in enumerate(lengths) for i in range(math.ceil(n / TILE))]
    return sorted(tiles, key=lambda t: -t[1])


def grid_items(lengths, heads):
    order = query_tiles(lengths)
    return [(s, h, i) for h in range(heads) for (s, i) in order]


def persistent_items(lengths, heads, section):
    order = query_tiles(lengths)
    items = []
    for first in range(0, heads, section):
        last = min(heads, first + section)
        items += [(s, h, i) for (s, i) in order for h in range(first, last)]
    return items


def dram_bytes(items, sms, l2_bytes, item_steps=2.0):
    """DRAM bytes read by `items` run on `sms` workers through an LRU L2."""
    return simulate(items, sms, l2_bytes, item_steps)[0]


def balance(items, sms, item_steps=2.0):
    """The list schedule's makespan over its ideal (every worker busy until
    the end: the items' time units over `sms`), its L2 left out: what the
    order's tail costs. 1.0 is a perfect balance."""
    _, makespan = simulate(items, sms, 0, item_steps)
    work = sum(item_steps + i + 1 for _, _, i in items)
    return makespan * sms / work


def simulate(items, sms, l2_bytes, item_steps=2.0):
    """(DRAM bytes, makespan in time units) of `items` on `sms` workers;
    l2_bytes 0: no cache model (bytes 0)."""
    capacity = max(1, l2_bytes // TILE_BYTES)
    l2 = OrderedDict()
    misses = 0

    def read(key):
        nonlocal misses
        if not l2_bytes:
            return
        if key in l2:
            l2.move_to_end(key)
            return
        misses += 1
        l2[key] = None
        if len(l2) > capacity:
            l2.popitem(last=False)

    # (time, worker, item, step): step -1 reads Q (the item's fixed cost),
    # then key/value tile `step` each time unit.
    events, taken, end = [], 0, 0.0
    for w in range(min(sms, len(items))):
        heapq.heappush(events, (w * 1e-3, w, taken, -1))
        taken += 1
    while events:
        t, w, index, step = heapq.heappop(events)
        end = max(end, t)
        s, h, i = items[index]
        if step < 0:
            read(("q", s, h, i))
            heapq.heappush(events, (t + item_steps, w, index, 0))
        elif step <= i:
            read(("k", s, h, step))
            read(("v", s, h, step))
            heapq.heappush(events, (t + 1.0, w, index, step + 1))
        elif taken < len(items):
            heapq.heappush(events, (t, w, taken, -1))
            taken += 1
    return misses * TILE_BYTES, end


def lengths_of(shape):
    if shape == "varlen":
        from peers import varlen_lengths  # noqa: PLC0415 (imports torch)
        return varlen_lengths(32768, 30, 0)
    b, _, n = shape.partition("x")
    if not (b.isdigit() and n.isdigit()):
        raise SystemExit(f"l2_sections: shape {shape!r} is BxN or varlen")
    return [int(n)] * int(b)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="8x4096,16x2048,4x8192,8x1024,varlen")
    p.add_argument("--l2", default="50,30", help="L2 sizes to model, MiB")
    p.add_argument("--sections", default="1,2,4,8", help="the persistent kernel's G")
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--sms", type=int, default=132)
    a = p.parse_args()
    sections = [int(g) for g in a.sections.split(",")]
    print("| shape | L2 MiB | K/V per head MiB | grid GB | "
          + " | ".join(f"G={g} GB" for g in sections) + " |")
    print("|---|---|---|---|" + "---|" * len(sections))
    for shape in a.shapes.split(","):
        lengths = lengths_of(shape)
        per_head = 2 * sum(lengths) * 128 * 2 / 2**20
        for mb in (float(x) for x in a.l2.split(",")):
            cap = int(mb * 2**20)
            grid = dram_bytes(grid_items(lengths, a.heads), a.sms, cap)
            pers = [dram_bytes(persistent_items(lengths, a.heads, g), a.sms, cap)
                    for g in sections]
            print(f"| {shape} | {mb:g} | {per_head:.0f} | {grid / 1e9:.2f} | "
                  + " | ".join(f"{x / 1e9:.2f}" for x in pers) + " |", flush=True)
    print("\nThe order's balance, makespan / ideal (no L2: what the tail costs):\n")
    print("| shape | grid | " + " | ".join(f"G={g}" for g in sections) + " |")
    print("|---|---|" + "---|" * len(sections))
    for shape in a.shapes.split(","):
        lengths = lengths_of(shape)
        grid = balance(grid_items(lengths, a.heads), a.sms)
        pers = [balance(persistent_items(lengths, a.heads, g), a.sms) for g in sections]
        print(f"| {shape} | {grid:.3f} | " + " | ".join(f"{x:.3f}" for x in pers) + " |",
              flush=True)


if __name__ == "__main__":
    main()
