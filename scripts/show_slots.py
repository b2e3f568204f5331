#!/usr/bin/env python3
"""Pretty-prints `cmask-translate --cmask-to-intervals-json` output.

    cmask-translate SPEC --cmask-to-intervals-json --metadata=F | show_slots.py
"""
import json
import sys


def show(batch):
    regions = batch["regions"]
    print(f"spec @{batch['spec']}: K = {batch['num_slots']}")
    for b, seq in enumerate(batch["sequences"]):
        print(f"  sequence {b}: q_len={seq['q_len']} k_len={seq['k_len']}")
        for i, row in enumerate(seq["rows"]):
            name = regions[row["region"]] if row["region"] >= 0 else "(none)"
            slots = " ".join(f"[{lo},{hi})" for lo, hi in row["slots"] if lo < hi)
            print(f"    row {i:3d} {name:>10}: {slots or '(sees nothing)'}")


def main():
    data = json.load(sys.stdin)
    for batch in data if isinstance(data, list) else [data]:
        show(batch)


if __name__ == "__main__":
    main()
