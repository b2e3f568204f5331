"""The preprocess's CPU lowering (the host twin) against the evaluator.

For every catalog spec and 250 seeded random metadata batches, the interval
table the JIT-compiled preprocess builds (`cmask-translate
--cmask-to-descriptor-json`) must equal, slot for slot, the compiled
intervals the evaluator prints (`--cmask-to-intervals-json`): same order,
same clamped endpoints, empty slots as [0, 0]. The evaluator's intervals are
themselves checked against the element-wise oracle and the numpy references
in test_catalog.py.
"""

from __future__ import annotations

import json
import subprocess
import zlib

import numpy as np
import pytest

import reference
from conftest import run_tool

CATALOG = list(reference.REFERENCES)
NUM_BATCHES = 250


@pytest.mark.parametrize("name", CATALOG)
def test_host_twin_interval_table(name, tool, repo_root, tmp_path):
    rng = np.random.default_rng(zlib.crc32(("twin-" + name).encode()))
    batches = [reference.random_metadata(name, rng) for _ in range(NUM_BATCHES)]
    md = tmp_path / "metadata.json"
    md.write_text(json.dumps(batches))
    spec = repo_root / "masks" / f"{name}.mlir"
    translate = tool("cmask-translate")
    outputs = {}
    for mode in ("--cmask-to-intervals-json", "--cmask-to-descriptor-json"):
        outputs[mode] = json.loads(
            run_tool([translate, spec, mode, f"--metadata={md}"], f"{name} {mode}"))
    evaluated = outputs["--cmask-to-intervals-json"]
    twin = outputs["--cmask-to-descriptor-json"]
    assert len(twin) == len(evaluated) == NUM_BATCHES
    rows = 0
    for n, (ev, tw) in enumerate(zip(evaluated, twin)):
        assert tw["num_slots"] == ev["num_slots"] == reference.EXPECTED_K[name]
        assert tw["error"] == 0, f"{name} instance={n}: the check phase flagged valid metadata"
        for b, (es, ts) in enumerate(zip(ev["sequences"], tw["sequences"])):
            assert len(es["rows"]) == len(ts["rows"])
            for i, (er, tr) in enumerate(zip(es["rows"], ts["rows"])):
                assert tr["slots"] == er["slots"], (
                    f"{name} instance={n} b={b} row={i}: host twin "
                    f"{tr['slots']} != evaluator {er['slots']}\n"
                    f"metadata: {json.dumps(batches[n])}")
                rows += 1
    assert rows > 0


TILE_SHAPES = [(4, 4), (8, 3), (5, 16), (20, 3), (33, 5), (17, 16)]


WINDOW_ROWS, WINDOW_GROUPS = 64, 2  # DescriptorLayout.h: kWindowRows, kWindowGroups


def expected_windows(slots, r0, r1, c0, c1, k0, count):
    """An entry's column windows (DescriptorLayout.h, TileWindow): per group of
    WINDOW_ROWS rows, the hull over the entry's slot indices of the group's
    rows' (non-empty) slots, when it meets the tile, clipped to the tile;
    relative to c0, [0, 0] when none."""
    out = []
    for grp in range(WINDOW_GROUPS):
        g0, g1 = r0 + grp * WINDOW_ROWS, min(r1, r0 + (grp + 1) * WINDOW_ROWS)
        lo, hi = None, None
        for s in range(k0, k0 + count):
            spans = [slots[r]["slots"][s] for r in range(g0, g1)
                     if slots[r]["slots"][s][0] < slots[r]["slots"][s][1]]
            if not spans:
                continue
            hl, hh = min(a for a, _ in spans), max(b for _, b in spans)
            if hl < c1 and hh > c0:
                lo = max(hl, c0) if lo is None else min(lo, max(hl, c0))
                hi = min(hh, c1) if hi is None else max(hi, min(hh, c1))
        out += [lo - c0, hi - c0] if lo is not None else [0, 0]
    return out


def expected_tiles(batch, dense, intervals, tq, tk):
    """The tile descriptor of one shape by brute force: states from the
    element-wise oracle, slot ranges from the evaluator's intervals, column
    windows from the intervals' hulls, partial tiles per q tile."""
    q_tile_seq, states, entries, counts, windows, partials = [], [], [], [], [], []
    for b, seq in enumerate(batch["sequences"]):
        q, k = seq["q_len"], seq["k_len"]
        rows = np.array([[c == "1" for c in r] for r in dense["sequences"][b]["rows"]],
                        dtype=bool).reshape(q, k)
        slots = intervals["sequences"][b]["rows"]
        nkt = -(-k // tk)
        for t in range(-(-q // tq)):
            r0, r1 = t * tq, min(q, (t + 1) * tq)
            q_tile_seq.append(b)
            row_states, row_entries = "", []
            for kt in range(nkt):
                c0, c1 = kt * tk, min(k, (kt + 1) * tk)
                tile = rows[r0:r1, c0:c1]
                state = 2 if tile.all() else (1 if tile.any() else 0)
                row_states += str(state)
                if state:
                    touching = [s for r in range(r0, r1)
                                for s, (lo, hi) in enumerate(slots[r]["slots"])
                                if lo < hi and lo < c1 and hi > c0]
                    k0 = min(touching)
                    count = max(touching) - k0 + 1
                    row_entries.append([kt, state, k0, count])
                    windows.append(expected_windows(slots, r0, r1, c0, c1, k0, count))
            states.append(row_states)
            partials.append(row_states.count("1"))
            entries.extend(row_entries)
            counts.append(len(row_entries))
    offsets = [0]
    for c in counts:
        offsets.append(offsets[-1] + c)
    order = sorted(range(len(counts)), key=lambda g: (-counts[g], g))
    return {"num_q_tiles": len(counts), "q_tile_seq": q_tile_seq, "states": states,
            "offsets": offsets, "entries": entries, "order": order,
            "windows": windows, "partials": partials}


def check_tiles(name, tool, repo_root, tmp_path, seed, batches, shapes):
    md = tmp_path / "metadata.json"
    md.write_text(json.dumps(batches))
    spec = repo_root / "masks" / f"{name}.mlir"
    translate = tool("cmask-translate")
    shape_list = ",".join(f"{q}x{k}" for q, k in shapes)
    dense, intervals, twin = (
        json.loads(run_tool([translate, spec, mode, f"--metadata={md}"] + extra,
                            f"{name} {mode}"))
        for mode, extra in (("--cmask-to-dense-json", []),
                            ("--cmask-to-intervals-json", []),
                            ("--cmask-to-descriptor-json",
                             [f"--tile-shapes={shape_list}"])))
    tiles_checked = 0
    for n, (batch, dn, iv, tw) in enumerate(zip(batches, dense, intervals, twin)):
        tiles_checked += compare_tiles(f"{name} instance={n}", shapes, batch,
                                       directions(batch, dn, iv, tw))
    return tiles_checked


def compare_tiles(label, shapes, metadata, cases):
    """Every tile field of the twin's directions (directions()' tuples)
    against brute force; returns the tiles checked."""
    checked = 0
    for direction, b, d, i, got_tiles in cases:
        for q, k in shapes:
            want = expected_tiles(b, d, i, q, k)
            got = got_tiles[f"{q}x{k}"]
            for field in want:
                assert got[field] == want[field], (
                    f"{label} {direction} shape={q}x{k} field={field}:\n"
                    f"  twin:     {got[field]}\n  expected: {want[field]}\n"
                    f"metadata: {json.dumps(metadata)}")
            checked += sum(len(s) for s in want["states"])
    return checked


@pytest.mark.parametrize("name", CATALOG)
def test_host_twin_tiles(name, tool, repo_root, tmp_path):
    """Tile states equal brute-force classification of every tile, each
    entry's slot range is exactly the slots touching the tile, the CSR
    offsets, the heaviest-first order and the column windows are right, for
    six tile shapes."""
    rng = np.random.default_rng(zlib.crc32(("tiles-" + name).encode()))
    batches = [reference.random_metadata(name, rng) for _ in range(NUM_BATCHES)]
    assert check_tiles(name, tool, repo_root, tmp_path, "tiles", batches,
                       TILE_SHAPES) > 1000


LONG_SHAPES = [(128, 16), (96, 8)]


@pytest.mark.parametrize("name", CATALOG)
def test_host_twin_windows(name, tool, repo_root, tmp_path):
    """The same on sequences of up to 200 rows, with tiles of more than one
    64-row window group."""
    rng = np.random.default_rng(zlib.crc32(("windows-" + name).encode()))
    batches = [reference.random_metadata(name, rng, max_len=200) for _ in range(30)]
    assert check_tiles(name, tool, repo_root, tmp_path, "windows", batches,
                       LONG_SHAPES) > 100


def directions(batch, dense, intervals, twin):
    """The row direction, then the column direction seen as a mask of its own
    (rows: keys; columns: query rows): its batch with q_len and k_len
    swapped, the transposed oracle, and its interval table, whose union per
    key must be exactly the rows that see the key."""
    yield "rows", batch, dense, intervals, twin["tiles"]
    columns = twin["columns"]
    if columns["mode"] == "rows":  # no column descriptor: the fallback
        return
    swapped = {**batch, "sequences": [{"q_len": s["k_len"], "k_len": s["q_len"]}
                                      for s in batch["sequences"]]}
    dense_t = {"sequences": []}
    for b, seq in enumerate(batch["sequences"]):
        q, k = seq["q_len"], seq["k_len"]
        rows = np.array([[c == "1" for c in r] for r in dense["sequences"][b]["rows"]],
                        dtype=bool).reshape(q, k)
        dense_t["sequences"].append({"rows": ["".join("1" if v else "0" for v in col)
                                              for col in rows.T]})
        for j, col in enumerate(rows.T):
            covered = np.zeros(q, dtype=bool)
            for lo, hi in columns["sequences"][b]["rows"][j]["slots"]:
                assert 0 <= lo <= hi <= q, f"key {j}: slot [{lo}, {hi}) outside [0, {q}]"
                covered[lo:hi] = True
            assert (covered == col).all(), (
                f"b={b} key={j}: column slots {columns['sequences'][b]['rows'][j]} "
                f"cover rows {np.flatnonzero(covered).tolist()}, the oracle says "
                f"{np.flatnonzero(col).tolist()}\nmetadata: {json.dumps(batch)}")
    yield "columns", swapped, dense_t, columns, columns["tiles"]


@pytest.mark.parametrize("name", CATALOG)
def test_host_twin_column_mode(name, tool, repo_root, tmp_path):
    """Each catalog spec gets its column direction the way the design says
    (derived by transposition, or CLEAR by symmetry) with the expected K."""
    md = tmp_path / "metadata.json"
    rng = np.random.default_rng(0)
    md.write_text(json.dumps(reference.random_metadata(name, rng)))
    out = json.loads(run_tool([tool("cmask-translate"), repo_root / "masks" / f"{name}.mlir",
                               "--cmask-to-descriptor-json", f"--metadata={md}",
                               "--tile-shapes=4x4"], name))
    mode, k = reference.EXPECTED_COLUMNS[name]
    assert (out["columns"]["mode"], out["columns"]["num_slots"]) == (mode, k)


ISQRT_SPEC = """
cmask.spec @isqrt_edges {
  cmask.metadata @m : scalar
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %m = cmask.meta @m
    %c2 = cmask.constant 2 : i64
    %c3 = cmask.constant 3 : i64
    %mm = cmask.mul %m, %m
    %m2 = cmask.mul %m, %c2
    %a = cmask.add %mm, %m2
    %b = cmask.add %a, %i
    %x = cmask.sub %b, %c2
    %s = cmask.isqrt %x
    %d = cmask.sub %s, %m
    %e = cmask.add %d, %c3
    %v = cmask.cmp lt, %j, %e
    cmask.yield %v : i1
  }
}
"""


def test_host_twin_isqrt_near_squares(tool, tmp_path):
    """isqrt in the preprocess (a correctly rounded double square root and
    one correction step) is exact next to large perfect squares: rows 0-3
    see [0, 3), [0, 3), [0, 3), [0, 4) for (m + 1)^2 - 3 .. (m + 1)^2, up to
    m = 2^31 - 1 (arguments near 2^62), as the evaluator's integer isqrt."""
    spec = tmp_path / "isqrt.mlir"
    spec.write_text(ISQRT_SPEC)
    ms = [2**31 - 1, 2**31 - 2, 2**30, 3037000, 46340, 1, 0]
    batches = [{"sequences": [{"q_len": 4, "k_len": 8}], "metadata": {"m": m}}
               for m in ms]
    md = tmp_path / "md.json"
    md.write_text(json.dumps(batches))
    translate = tool("cmask-translate")
    evaluated, twin = (json.loads(run_tool([translate, spec, mode, f"--metadata={md}"],
                                           mode))
                       for mode in ("--cmask-to-intervals-json",
                                    "--cmask-to-descriptor-json"))
    for m, ev, tw in zip(ms, evaluated, twin):
        ev_rows = [r["slots"] for r in ev["sequences"][0]["rows"]]
        tw_rows = [r["slots"] for r in tw["sequences"][0]["rows"]]
        assert tw_rows == ev_rows, f"m={m}: twin {tw_rows} != evaluator {ev_rows}"
        if m >= 1:
            assert ev_rows == [[[0, 3]], [[0, 3]], [[0, 3]], [[0, 4]]], (m, ev_rows)


def shifted(slots, shift, present):
    """Slots of a window: shifted by the window's first key, clamped to the
    keys present, empty ones as [0, 0] (docs/descriptor.md, Windows)."""
    out = []
    for lo, hi in slots:
        lo, hi = (min(max(x - shift, 0), present) for x in (lo, hi))
        out.append([lo, hi] if lo < hi else [0, 0])
    return out


def random_window(rng, length):
    begin = int(rng.integers(0, length + 1))
    return [begin, int(rng.integers(begin, length + 1))]


@pytest.mark.parametrize("name", CATALOG)
def test_host_twin_batch_windows(name, tool, repo_root, tmp_path):
    """A window of a batch (q_window, k_window: present rows and keys of
    longer sequences, as a context-parallel shard sees them) gets exactly the
    descriptor of the window: its rows' slots are the whole sequence's,
    shifted to the present keys; its tiles and column direction are those of
    the window cut out of the element-wise oracle."""
    rng = np.random.default_rng(zlib.crc32(("batch-windows-" + name).encode()))
    batches = [reference.random_metadata(name, rng, max_len=64) for _ in range(60)]
    windowed = []
    for batch in batches:
        seqs = []
        for s in batch["sequences"]:
            w = dict(s)
            if rng.random() < 0.8:
                w["q_window"] = random_window(rng, s["q_len"])
            if rng.random() < 0.6:
                w["k_window"] = random_window(rng, s["k_len"])
            seqs.append(w)
        windowed.append({**batch, "sequences": seqs})
    translate, spec = tool("cmask-translate"), repo_root / "masks" / f"{name}.mlir"

    def run(mode, data, extra=()):
        md = tmp_path / f"{mode.strip('-')}-{len(data)}.json"
        md.write_text(json.dumps(data))
        return json.loads(run_tool([translate, spec, mode, f"--metadata={md}", *extra],
                                   f"{name} {mode}"))

    shapes = [(4, 4), (8, 3), (5, 16)]
    dense = run("--cmask-to-dense-json", batches)
    intervals = run("--cmask-to-intervals-json", batches)
    twin = run("--cmask-to-descriptor-json", windowed,
               ["--tile-shapes=" + ",".join(f"{q}x{k}" for q, k in shapes)])
    checked = 0
    for n, (batch, wb, dn, iv, tw) in enumerate(zip(batches, windowed, dense, intervals, twin)):
        assert tw["error"] == 0, f"{name} instance={n}: valid windows flagged"
        # The window as a batch of its own: lengths, oracle, intervals.
        plain = {**batch, "sequences": []}
        dn_w, iv_w = {"sequences": []}, {"sequences": []}
        for b, (seq, ws) in enumerate(zip(batch["sequences"], wb["sequences"])):
            q0, q1 = ws.get("q_window", [0, seq["q_len"]])
            k0, k1 = ws.get("k_window", [0, seq["k_len"]])
            plain["sequences"].append({"q_len": q1 - q0, "k_len": k1 - k0})
            dn_w["sequences"].append({"rows": [r[k0:k1] for r in dn["sequences"][b]["rows"][q0:q1]]})
            rows = [{"slots": shifted(r["slots"], k0, k1 - k0)}
                    for r in iv["sequences"][b]["rows"][q0:q1]]
            iv_w["sequences"].append({"rows": rows})
            got = tw["sequences"][b]["rows"]
            assert [r["slots"] for r in got] == [r["slots"] for r in rows], (
                f"{name} instance={n} b={b} window q{[q0, q1]} k{[k0, k1]}: slots differ\n"
                f"metadata: {json.dumps(wb)}")
        checked += compare_tiles(f"{name} instance={n}", shapes, wb,
                                 directions(plain, dn_w, iv_w, tw))
    assert checked > 500


def test_host_twin_window_outside_sequence(tool, repo_root, tmp_path):
    """A window that is not inside its sequence is refused where it is
    written (the runtime's check phase flags it as 16)."""
    md = tmp_path / "bad.json"
    md.write_text(json.dumps({"sequences": [{"q_len": 8, "k_len": 8, "q_window": [3, 9]}],
                              "metadata": {}}))
    proc = subprocess.run([tool("cmask-translate"), repo_root / "masks" / "causal.mlir",
                           "--cmask-to-descriptor-json", f"--metadata={md}"],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert "sequences[0].q_window: must be [begin, end] with 0 <= begin <= end <= q_len (8)" \
        in proc.stderr, proc.stderr
    proc = subprocess.run([tool("cmask-translate"), repo_root / "masks" / "causal.mlir",
                           "--cmask-to-intervals-json", f"--metadata={md}"],
                          capture_output=True, text=True)
    assert "windows are read by --cmask-to-descriptor-json only" in proc.stderr, proc.stderr
