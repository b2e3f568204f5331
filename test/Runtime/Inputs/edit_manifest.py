"""Edits an artifact's manifest.json for the runtime's refusal tests.

  edit_manifest.py DIR swap KERNEL I J     swap arguments I and J of KERNEL
  edit_manifest.py DIR drop KERNEL I       drop argument I (-1: the last)
  edit_manifest.py DIR kind KERNEL I KIND  change argument I's kind
  edit_manifest.py DIR format N            set the format
  edit_manifest.py DIR remove KEY          remove a top-level key
  edit_manifest.py DIR set KERNEL KEY JSON set a field of an attention kernel
"""
import json
import sys
from pathlib import Path

path = Path(sys.argv[1]) / "manifest.json"
manifest = json.loads(path.read_text())
op, rest = sys.argv[2], sys.argv[3:]
kernels = manifest["kernel_abi"]["kernels"]
if op == "swap":
    args = kernels[rest[0]]
    i, j = int(rest[1]), int(rest[2])
    args[i], args[j] = args[j], args[i]
elif op == "drop":
    kernels[rest[0]].pop(int(rest[1]))
elif op == "kind":
    kernels[rest[0]][int(rest[1])][1] = rest[2]
elif op == "format":
    manifest["format"] = int(rest[0])
elif op == "remove":
    del manifest[rest[0]]
elif op == "set":
    entry = next(k for k in manifest["attention"]["kernels"] if k["kernel"] == rest[0])
    entry[rest[1]] = json.loads(rest[2])
else:
    sys.exit(f"unknown edit {op}")
path.write_text(json.dumps(manifest, indent=2) + "\n")
