#!/usr/bin/env bash
# On the H200: install the Python package (this checkout's), then time
# attention forward and forward+backward (benchmarks/bench_attention.py). Artifacts from
# scripts/gpu/prepare_attention.sh (carry: build-gpu).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cmask-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install --no-build-isolation --no-deps --no-index -q . > "$OUT/pip.log" 2>&1 ||
  { tail -30 "$OUT/pip.log"; exit 1; }
python3 benchmarks/bench_attention.py --artifacts build-gpu/attention --out "$OUT" "$@" 2>&1 |
  tee "$OUT/bench.log"
