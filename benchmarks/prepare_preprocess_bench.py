#!/usr/bin/env python3
"""Prepares the preprocess benchmark (run here, where the compiler is built).

For every catalog mask writes OUT/<mask>/artifact (one 128x128 tile shape,
sm_90a) and OUT/<mask>/cases.json: one single-sequence batch per length in
1K..32K with the shapes of DESIGN.md (HSTU targets N/8; RM prompt N/4 and 4
equal responses; CLEAR T=512, r=16, W the power of two >= sqrt(N), H=N/W;
document masks 8 equal documents; sliding window 256; prefix N/4).
benchmarks/bench_preprocess.py times them on the GPU next to FlexAttention's
create_block_mask.
"""

import argparse
import json
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LENGTHS = [1024, 2048, 4096, 8192, 16384, 32768]
MASKS = ["causal", "sliding_window", "document", "causal_document", "prefix_lm",
         "reward_model", "hstu", "clear"]


def batch(name: str, n: int) -> dict:
    if name == "clear":
        w = 1
        while w * w < n:
            w *= 2
        h, t = n // w, 512
        L = t + h * w
        return {"sequences": [{"q_len": L, "k_len": L}],
                "metadata": {"text_len": t, "height": h, "width": w, "radius": 16}}
    md = {}
    if name == "sliding_window":
        md["window"] = 256
    if name in ("document", "causal_document"):
        md["docs"] = [[n * d // 8 for d in range(1, 8)]]
    if name == "prefix_lm":
        md["prefix_len"] = [n // 4]
    if name == "reward_model":
        p = n // 4
        md["prompt_len"] = [p]
        md["responses"] = [[p + r * (n - p) // 4 for r in range(4)]]
    if name == "hstu":
        md["context"] = 0
        md["num_targets"] = [n // 8]
    return {"sequences": [{"q_len": n, "k_len": n}], "metadata": md}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(REPO / "build-gpu" / "bench"))
    ap.add_argument("--bin", default=str(REPO / "build" / "bin"))
    args = ap.parse_args()
    for name in MASKS:
        out = Path(args.out) / name
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run([Path(args.bin) / "cmask-translate", REPO / "masks" / f"{name}.mlir",
                        "--cmask-to-artifact", "-o", out / "artifact", "--arch=sm_90a",
                        "--tile-shapes=128x128"], check=True)
        (out / "cases.json").write_text(json.dumps([batch(name, n) for n in LENGTHS]))


if __name__ == "__main__":
    main()
