"""Checks an artifact's attention modules (manifest format 7): every module's
files exist, each kernel (and a backward kernel's _pre, _dq, _dqr) is an
.entry of the module it names and of no other. Prints one line per module."""

import json
import re
import sys
from pathlib import Path

art = Path(sys.argv[1])
attention = json.loads((art / "manifest.json").read_text())["attention"]
modules = attention["modules"]
entries = []
for m in modules:
    assert (art / m["ptx"]).is_file(), m
    assert "cubin" not in m or (art / m["cubin"]).is_file(), m
    entries.append(set(re.findall(r"\.entry (\w+)\(", (art / m["ptx"]).read_text())))
want = [set() for _ in modules]
for k in attention["kernels"]:
    names = [k["kernel"]]
    if k["pass"] == "backward":
        names += [k["kernel"] + s for s in ("_pre", "_dq")]
        if "dq_rows_tile_shape" in k:
            names.append(k["kernel"] + "_dqr")
    want[k["module"]].update(names)
for i, m in enumerate(modules):
    assert entries[i] == want[i], (m["ptx"], sorted(entries[i] ^ want[i]))
    print(f"{m['ptx']}: {len(entries[i])} kernels")
