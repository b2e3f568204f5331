#!/usr/bin/env python3
"""Compares descriptors bit for bit, both directions (rows and columns): the
CPU twin's (cmask-translate --cmask-to-descriptor-json) with the GPU's
(cmask-preprocess-run).

    compare_descriptors.py EXPECTED.json[.gz] GOT.json[.gz] [--label NAME]

Prints one line per mismatching batch (at most 5) and a closing
`N passed, N failed` line counting batches; exits non-zero on a mismatch.
"""

import argparse
import gzip
import json
import sys


def compare_direction(label, e, g, problems):
    """Interval tables and tiles of one direction (rows, or columns)."""
    if len(e["sequences"]) != len(g.get("sequences", [])):
        problems.append(f"{label}different numbers of sequences")
    for b, (es, gs) in enumerate(zip(e["sequences"], g.get("sequences", []))):
        if len(es["rows"]) != len(gs["rows"]):
            problems.append(f"{label}seq {b}: {len(gs['rows'])} rows != {len(es['rows'])}")
        for i, (er, gr) in enumerate(zip(es["rows"], gs["rows"])):
            if er["slots"] != gr["slots"]:
                problems.append(f"{label}seq {b} row {i}: slots {gr['slots']} != {er['slots']}")
                break
    for shape, et in e["tiles"].items():
        gt = g.get("tiles", {}).get(shape)
        if gt is None:
            problems.append(f"{label}tiles {shape}: missing")
            continue
        for field, value in et.items():
            if gt.get(field) != value:
                problems.append(f"{label}tiles {shape} {field} differ")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("expected")
    ap.add_argument("got")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    expected, got = (json.load(gzip.open(path) if path.endswith(".gz") else open(path))
                     for path in (args.expected, args.got))
    if len(expected) != len(got):
        print(f"{args.label}: {len(expected)} expected batches, got {len(got)}")
        print(f"0 passed, {len(expected)} failed")
        return 1
    passed = failed = 0
    for n, (e, g) in enumerate(zip(expected, got)):
        problems = []
        if e.get("error") != g.get("error"):
            problems.append(f"error flags {g.get('error')} != {e.get('error')}")
        compare_direction("", e, g, problems)
        ec, gc = e.get("columns", {}), g.get("columns", {})
        for field in ("mode", "num_slots"):
            if ec.get(field) != gc.get(field):
                problems.append(f"columns {field} {gc.get(field)} != {ec.get(field)}")
        if "sequences" in ec:
            compare_direction("columns ", ec, gc, problems)
        if problems:
            failed += 1
            if failed <= 5:
                print(f"{args.label} batch {n}: " + "; ".join(problems[:3]))
        else:
            passed += 1
    print(f"{args.label}: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
