"""The `cmask` command line (also `python -m cmask`):

    cmask compile SPEC [-o DIR] [--arch sm_90a] [--tile-shapes 128x128,128x64]
                       [--head-dims 64,128] [--dtypes bf16,f16] [--attention-tile QxK]
                       [--no-cache]
    cmask show SPEC (--q-len N [--k-len N] | --cu-seqlens 0,40,49 | --batch FILE)
                    [NAME=VALUE ...]
    cmask visualize SPEC -o PNG (batch as for show) [--sequence N] [NAME=VALUE ...]

SPEC is a MaskSpec file. compile prints the artifact's directory (the
compile cache's entry, or -o DIR). show prints every row's visible keys as
intervals [lo, hi) and its region, compiled from the spec; visualize writes
a PNG of one sequence's mask. The metadata as NAME=VALUE: a scalar
`context=4`, a per-sequence value one int per sequence `num_targets=8,2`,
offsets one list per sequence separated by `;` (`docs="4,9;3"`). Errors
print one located message and exit 2 (bad input) or 1 (a failed compile).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import CompileError, _METADATA_DECL, _batch_json, _evaluate, _spec_text, compile, visualize


def _ints(text: str, what: str) -> list:
    try:
        return [int(x) for x in text.split(",") if x.strip() != ""]
    except ValueError:
        raise ValueError(f"{what}: {text!r} is not a comma-separated list of ints") from None


def _metadata(text: str, items: list) -> dict:
    """NAME=VALUE arguments as the spec's roles read them."""
    roles = dict(_METADATA_DECL.findall(text))
    out = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"metadata {item!r}: expected NAME=VALUE")
        if name not in roles:
            raise ValueError(f"metadata {name!r}: the spec takes {sorted(roles) or 'none'}")
        if roles[name] == "scalar":
            try:
                out[name] = int(value)
            except ValueError:
                raise ValueError(f"metadata {name}={value!r}: a scalar is one int") from None
        elif roles[name] == "per_sequence":
            out[name] = _ints(value, f"metadata {name}")
        else:
            out[name] = [_ints(part, f"metadata {name}") for part in value.split(";")]
    return out


def _batch(a, text: str) -> dict:
    if a.batch:
        if a.q_len is not None or a.cu_seqlens or a.metadata:
            raise ValueError("--batch FILE holds the lengths and the metadata: give nothing else")
        return json.loads(Path(a.batch).read_text())
    layout = {}
    if a.cu_seqlens:
        layout["cu_seqlens_q"] = _ints(a.cu_seqlens, "--cu-seqlens")
        if a.cu_seqlens_k:
            layout["cu_seqlens_k"] = _ints(a.cu_seqlens_k, "--cu-seqlens-k")
    elif a.q_len is not None:
        layout["q_len"], layout["k_len"] = a.q_len, a.k_len
    return _batch_json(text, **layout, **_metadata(text, a.metadata))


def _show(a) -> None:
    text = _spec_text(a.spec)
    result = _evaluate(text, _batch(a, text), "--cmask-to-intervals-json",
                       "computing the intervals")
    regions = result["regions"]
    print(f"@{result['spec']}: {result['num_slots']} interval slots per row; regions "
          + ", ".join(regions))
    for b, seq in enumerate(result["sequences"]):
        print(f"sequence {b} (q_len {seq['q_len']}, k_len {seq['k_len']}):")
        for i, row in enumerate(seq["rows"]):
            spans = [f"[{lo}, {hi})" for lo, hi in row["slots"] if lo < hi]
            region = regions[row["region"]] if row["region"] >= 0 else "(none)"
            print(f"  row {i:5d}  {region:12s} {' U '.join(spans) or 'nothing'}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="cmask", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="compile a spec into an artifact")
    c.add_argument("spec")
    c.add_argument("-o", "--out", help="the artifact's directory (default: the cache's entry)")
    c.add_argument("--arch", default="sm_90a", choices=["sm_90a", "sm_80"])
    c.add_argument("--tile-shapes", default="128x128,128x64")
    c.add_argument("--head-dims", default="64,128")
    c.add_argument("--dtypes", default="bf16,f16")
    c.add_argument("--attention-tile")
    c.add_argument("--no-cache", action="store_true", help="run the compiler whatever the cache holds")
    for name, help_ in (("show", "print each row's visible key intervals for a batch"),
                        ("visualize", "write a PNG of one sequence's mask")):
        s = sub.add_parser(name, help=help_)
        s.add_argument("spec")
        s.add_argument("--q-len", type=int)
        s.add_argument("--k-len", type=int)
        s.add_argument("--cu-seqlens", help="B + 1 comma-separated offsets of the queries")
        s.add_argument("--cu-seqlens-k", help="... of the keys (default: --cu-seqlens)")
        s.add_argument("--batch", help="a metadata file (docs/metadata-json.md)")
        if name == "visualize":
            s.add_argument("-o", "--out", required=True, help="the PNG to write")
            s.add_argument("--sequence", type=int, default=0)
    # NAME=VALUE metadata may stand anywhere after the command.
    a, rest = p.parse_known_args(argv)
    a.metadata = [] if a.command == "compile" else \
        [x for x in rest if "=" in x and not x.startswith("-")]
    if len(a.metadata) != len(rest):
        p.error("unrecognized arguments: " + " ".join(x for x in rest if x not in a.metadata))
    try:
        if a.command == "compile":
            out = compile(Path(a.spec), a.arch, a.out, tile_shapes=tuple(a.tile_shapes.split(",")),
                          head_dims=tuple(_ints(a.head_dims, "--head-dims")),
                          dtypes=tuple(a.dtypes.split(",")), attention_tile=a.attention_tile,
                          load=False, cache=not a.no_cache)
            print(out)
        elif a.command == "show":
            _show(a)
        else:
            visualize(Path(a.spec), a.out, _batch(a, _spec_text(Path(a.spec))),
                      sequence=a.sequence)
            print(a.out)
    except CompileError as e:
        print(e, file=sys.stderr)
        return 1
    except (ValueError, TypeError, IndexError, FileNotFoundError, json.JSONDecodeError) as e:
        print(f"cmask {a.command}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
