"""Differential test of the mask catalog (masks/*.mlir).

For every catalog spec and >= 250 seeded random metadata batches, three
versions of every row must agree exactly:
  * the compiled intervals (`cmask-translate --cmask-to-intervals-json`),
  * the dense oracle that evaluates the original rule element by element
    (`cmask-translate --cmask-to-dense-json`),
  * the independent numpy reference (masks/reference.py).
It also checks the K (num_slots) the compiler derives and the output format
(docs/metadata-json.md).
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import reference
from conftest import (bool_row_to_string, run_tool, slots_to_string,
                      translate_batches)

CATALOG = list(reference.REFERENCES)
NUM_BATCHES = 250


def expected_region(name: str, i: int, q_len: int, b: int, md: dict) -> int:
    """Index of the region that applies to row i (first guard that holds)."""
    if name == "reward_model":
        return 0 if i < md["prompt_len"][b] else 1
    if name == "hstu":
        if i < md["context"]:
            return 0
        return 1 if i < q_len - md["num_targets"][b] else 2
    if name == "clear":
        return 0 if i < md["text_len"] else 1
    return 0


def test_catalog_is_complete(repo_root):
    files = sorted(p.stem for p in (repo_root / "masks").glob("*.mlir"))
    assert files == sorted(CATALOG), "masks/*.mlir and reference.REFERENCES differ"


@pytest.mark.parametrize("name", CATALOG)
def test_lower_to_intervals(name, tool, repo_root):
    """cmask-opt lowers every catalog spec to interval form."""
    out = run_tool(
        [tool("cmask-opt"), repo_root / "masks" / f"{name}.mlir",
         "--cmask-lower-to-intervals"],
        f"{name}: cmask-opt --cmask-lower-to-intervals")
    assert "cmask.slots" in out, f"{name}: no cmask.slots in the lowered output"
    assert f"num_slots = {reference.EXPECTED_K[name]}" in out, (
        f"{name}: lowered spec does not record num_slots = "
        f"{reference.EXPECTED_K[name]}:\n{out[:3000]}")


@pytest.mark.parametrize("name", CATALOG)
def test_catalog_differential(name, tool, repo_root, tmp_path):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    batches = [reference.random_metadata(name, rng) for _ in range(NUM_BATCHES)]
    spec = repo_root / "masks" / f"{name}.mlir"
    intervals, dense = translate_batches(tool, spec, batches, tmp_path, name)
    K = reference.EXPECTED_K[name]

    problems = []  # (kind, message)
    rows_checked = 0

    def report(kind, msg):
        problems.append((kind, msg))

    for n, (batch, iv, dn) in enumerate(zip(batches, intervals, dense)):
        where = f"spec={name} instance={n}"
        if iv.get("spec") != name or dn.get("spec") != name:
            report("format", f"{where}: spec names {iv.get('spec')!r}/{dn.get('spec')!r}")
        if iv.get("num_slots") != K:
            report("K", f"{where}: num_slots = {iv.get('num_slots')}, expected {K}")
        seqs = batch["sequences"]
        if len(iv["sequences"]) != len(seqs) or len(dn["sequences"]) != len(seqs):
            report("format", f"{where}: {len(seqs)} sequences in, "
                   f"{len(iv['sequences'])}/{len(dn['sequences'])} out")
            continue
        md = batch["metadata"]
        refs = reference.reference_batch(name, batch)
        for b, (s, ivs, dns, ref) in enumerate(zip(seqs, iv["sequences"], dn["sequences"], refs)):
            q, k = s["q_len"], s["k_len"]
            w = f"{where} b={b} (q_len={q}, k_len={k}) metadata={md}"
            if (ivs["q_len"], ivs["k_len"], dns["q_len"], dns["k_len"]) != (q, k, q, k):
                report("format", f"{w}: lengths echoed wrongly")
            if len(ivs["rows"]) != q or len(dns["rows"]) != q:
                report("format", f"{w}: {len(ivs['rows'])}/{len(dns['rows'])} rows, expected {q}")
                continue
            for i in range(q):
                rows_checked += 1
                row = ivs["rows"][i]
                slots = row["slots"]
                if len(slots) != iv.get("num_slots") or len(slots) != K:
                    report("K", f"{w} row={i}: {len(slots)} slots, num_slots {iv.get('num_slots')}, expected {K}")
                for lo, hi in slots:
                    if not ((0 <= lo < hi <= k) or (lo, hi) == (0, 0)):
                        report("format", f"{w} row={i}: slot [{lo}, {hi}) is not clamped "
                               f"to [0, {k}] / empty not written [0, 0]: {slots}")
                reg = expected_region(name, i, q, b, md)
                if row["region"] != reg:
                    report("region", f"{w} row={i}: region {row['region']}, expected {reg}")
                got_iv = slots_to_string(slots, k)
                got_dn = dns["rows"][i]
                want = bool_row_to_string(ref[i])
                if not (got_iv == got_dn == want):
                    report("mismatch",
                           f"{w} row={i}:\n  intervals: {got_iv!r}  slots={slots}\n"
                           f"  dense:     {got_dn!r}\n  reference: {want!r}")
    if problems:
        kinds = {}
        for kind, _ in problems:
            kinds[kind] = kinds.get(kind, 0) + 1
        first = {}
        for kind, msg in problems:
            first.setdefault(kind, msg)
        pytest.fail(
            f"{name}: {len(problems)} problems over {rows_checked} rows {kinds}\n"
            + "\n".join(f"first {kind}: {msg}" for kind, msg in first.items()),
            pytrace=False)
    assert rows_checked > 1000
