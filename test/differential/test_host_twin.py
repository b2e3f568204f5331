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
        for b, (es, ts) in enumerate(zip(ev["sequences"], tw["sequences"])):
            assert len(es["rows"]) == len(ts["rows"])
            for i, (er, tr) in enumerate(zip(es["rows"], ts["rows"])):
                assert tr["slots"] == er["slots"], (
                    f"{name} instance={n} b={b} row={i}: host twin "
                    f"{tr['slots']} != evaluator {er['slots']}\n"
                    f"metadata: {json.dumps(batches[n])}")
                rows += 1
    assert rows > 0
