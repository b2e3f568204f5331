#!/usr/bin/env python3
"""Prepares the GPU preprocess check (run here, where the compiler is built).

For every catalog mask, writes into OUT (default build-gpu/preprocess):
  <mask>/artifact/   cmask-translate --cmask-to-artifact (PTX, cubin, manifest)
  <mask>/cases.json  random small batches (masks/reference.py) plus one
                     benchmark-sized packed batch
  <mask>/expected.json.gz  what the CPU twin builds for them
                     (cmask-translate --cmask-to-descriptor-json)
Then scripts/gpu/check_preprocess.sh runs the same batches on the GPU and
test/gpu/compare_descriptors.py compares bit for bit.
"""

import argparse
import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "masks"))
import reference  # noqa: E402

SHAPES = "128x128,128x64,4x4,8x3"
LARGE_SHAPES = "128x128,128x64"
sys.path.insert(0, str(REPO / "benchmarks"))
from prepare_preprocess_bench import batch as bench_batch  # noqa: E402


def large_batches(name: str) -> list:
    """Benchmark-shaped batches of 1K-32K tokens, and a packed batch of four
    32K sequences (128K tokens; CLEAR: four 33280-token images)."""
    out = [bench_batch(name, n) for n in (1024, 4096, 16384, 32768)]
    one = bench_batch(name, 32768)
    packed = {"sequences": one["sequences"] * 4, "metadata": {}}
    for key, value in one["metadata"].items():
        packed["metadata"][key] = value * 4 if isinstance(value, list) else value
    out.append(packed)
    return out


def large_batch(name: str, n: int) -> dict:
    """One benchmark-shaped batch of about n tokens (DESIGN.md shapes)."""
    rng = np.random.default_rng(n)
    if name == "clear":
        w = 1 << int(np.ceil(np.log2(np.sqrt(n))))
        h, t = n // w, 512
        L = t + h * w
        return {"sequences": [{"q_len": L, "k_len": L}],
                "metadata": {"text_len": t, "height": h, "width": w, "radius": 16}}
    # Packed: three sequences of uneven lengths summing to n.
    lens = [n // 2, n // 3, n - n // 2 - n // 3]
    seqs = [{"q_len": L, "k_len": L} for L in lens]
    md = {}
    if name == "sliding_window":
        md["window"] = 256
    if name in ("document", "causal_document"):
        md["docs"] = [sorted(rng.integers(0, L + 1, size=6).tolist()) for L in lens]
    if name == "prefix_lm":
        md["prefix_len"] = [L // 4 for L in lens]
    if name == "reward_model":
        md["prompt_len"] = [L // 4 for L in lens]
        md["responses"] = [[L // 4 + r * (L - L // 4) // 4 for r in range(4)] for L in lens]
    if name == "hstu":
        md["context"] = 8
        md["num_targets"] = [L // 8 for L in lens]
    return {"sequences": seqs, "metadata": md}


def artifact(translate, spec, out, shapes):
    """The spec's artifact for the preprocess check: its attention kernels
    at one head dimension and element type only, and no PTX (the GPU loads
    the cubins), so that the nine masks' cases stay within the 64 MiB the
    device tool carries (all four attention modules and the PTX made 77 MB)."""
    subprocess.run([translate, spec, "--cmask-to-artifact", "-o", out, "--arch=sm_90a",
                    f"--tile-shapes={shapes}", "--head-dims=128", "--dtypes=bf16"],
                   check=True)
    for ptx in Path(out).glob("*.ptx"):
        ptx.unlink()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(REPO / "build-gpu" / "preprocess"))
    ap.add_argument("--bin", default=str(REPO / "build" / "bin"))
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--large", type=int, default=4096)
    args = ap.parse_args()
    translate = Path(args.bin) / "cmask-translate"
    for name in reference.REFERENCES:
        out = Path(args.out) / name
        out.mkdir(parents=True, exist_ok=True)
        spec = REPO / "masks" / f"{name}.mlir"
        artifact(translate, spec, out / "artifact", SHAPES)
        rng = np.random.default_rng(7)
        cases = [reference.random_metadata(name, rng) for _ in range(args.batches)]
        cases.append(large_batch(name, args.large))
        (out / "cases.json").write_text(json.dumps(cases))
        expected = subprocess.run(
            [translate, spec, "--cmask-to-descriptor-json", f"--tile-shapes={SHAPES}",
             f"--metadata={out / 'cases.json'}"], check=True, capture_output=True,
            text=True).stdout
        # Compressed: the device tool carries at most 64 MiB.
        (out / "expected.json.gz").write_bytes(gzip.compress(expected.encode()))
        if name in ("document", "reward_model"):
            # Metadata the file validation would refuse, given to the runtime
            # directly: the kernels must stay in bounds and flag them (4).
            key = "docs" if name == "document" else "responses"
            bad = []
            for offsets in ([[9, 3, 12]], [[0, 4, 5000]], [[-7, 2]], [[2, 2, 1, 1]]):
                c = json.loads(json.dumps(cases[0]))
                c["sequences"] = [{"q_len": 16, "k_len": 16}]
                c["metadata"] = {k: v[:1] for k, v in c["metadata"].items()}
                c["metadata"][key] = offsets
                bad.append(c)
            (out / "bad_cases.json").write_text(json.dumps(bad))
        # Large batches: compared through digests of the descriptors.
        artifact(translate, spec, out / "artifact-large", LARGE_SHAPES)
        (out / "large_cases.json").write_text(json.dumps(large_batches(name)))
        digests = subprocess.run(
            [translate, spec, "--cmask-to-descriptor-json", "--descriptor-digest",
             f"--tile-shapes={LARGE_SHAPES}", f"--metadata={out / 'large_cases.json'}"],
            check=True, capture_output=True, text=True).stdout
        (out / "large_expected.json").write_text(digests)
        print(f"{name}: {len(cases)} batches, expected "
              f"{len(expected) // 1024} KiB", flush=True)


if __name__ == "__main__":
    main()
