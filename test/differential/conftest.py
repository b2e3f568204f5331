"""Shared fixtures of the differential tests (test/differential/).

The tests run the C++ tools `cmask-opt` and `cmask-translate`. They are looked
up in $CMASK_BIN_DIR, by default <repo>/build/bin. Missing tools are a test
failure, not a skip: these tests are the end-to-end check of the compiler.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

# masks/reference.py is imported as `reference` by the tests.
if str(REPO_ROOT / "masks") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "masks"))


def bin_dir() -> Path:
    return Path(os.environ.get("CMASK_BIN_DIR", REPO_ROOT / "build" / "bin"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def tool():
    """`tool(name)` -> path of a cmask tool binary; fails the test when missing."""

    def find(name: str) -> Path:
        path = bin_dir() / name
        if not (path.is_file() and os.access(path, os.X_OK)):
            pytest.fail(
                f"tool {name!r} not found at {path}: build the project "
                f"(cmake --build build) or point CMASK_BIN_DIR at the folder "
                f"holding cmask-opt and cmask-translate",
                pytrace=False,
            )
        return path

    return find


def run_tool(args, what: str) -> str:
    """Runs a tool, fails the test with its stderr when it exits non-zero."""
    proc = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0:
        pytest.fail(
            f"{what}: `{' '.join(map(str, args))}` exited {proc.returncode}\n"
            f"--- stderr ---\n{proc.stderr[-4000:]}",
            pytrace=False,
        )
    return proc.stdout


def translate_batches(tool, spec: Path, batches: list, tmp_path: Path, tag: str):
    """Writes `batches` as one JSON array and runs cmask-translate in both
    modes. Returns (intervals_outputs, dense_outputs), one entry per batch."""
    md = tmp_path / f"{tag}.metadata.json"
    md.write_text(json.dumps(batches))
    translate = tool("cmask-translate")
    outs = []
    for mode in ("--cmask-to-intervals-json", "--cmask-to-dense-json"):
        text = run_tool([translate, spec, mode, f"--metadata={md}"], f"{tag} {mode}")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            pytest.fail(f"{tag} {mode}: output is not JSON ({e}):\n{text[:2000]}",
                        pytrace=False)
        if not isinstance(data, list) or len(data) != len(batches):
            pytest.fail(f"{tag} {mode}: expected a JSON array of {len(batches)} "
                        f"batch results, got {type(data).__name__}"
                        f"{' of ' + str(len(data)) if isinstance(data, list) else ''}",
                        pytrace=False)
        outs.append(data)
    return outs[0], outs[1]


def slots_to_string(slots, k_len: int) -> str:
    """The visible set of a row of the intervals output, as a dense string."""
    row = ["0"] * k_len
    for lo, hi in slots:
        for j in range(max(lo, 0), min(hi, k_len)):
            row[j] = "1"
    return "".join(row)


def bool_row_to_string(row) -> str:
    return "".join("1" if v else "0" for v in row)
