#!/usr/bin/env bash
# On the H200: install the Python package (this checkout's), then time
# attention forward and forward+backward (benchmarks/bench_attention.py). Artifacts from
# scripts/gpu/prepare_attention.sh (carry: build-gpu/attention). Where the peers do not
# import and .peers/b is here (the second of scripts/gpu/fetch-peers.sh's two calls),
# installs them first. Issues 14 and 15's table:
#   bash benchmarks/run_attention_bench.sh --masks causal,hstu,reward_model --lengths 32768 \
#     --gqa-lengths 16384 --peers fa4,flex_fa4,cudnn_flex --rounds 3 --varlen-kv-heads 8
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cmask-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ! python3 -c "import flash_attn.cute, cudnn.flex_attention" 2>/dev/null &&
  [ -f .peers/b/install-peers.sh ]; then
  source .peers/b/install-peers.sh || exit 1
fi
python3 -m pip install --no-build-isolation --no-deps --no-index -q . > "$OUT/pip.log" 2>&1 ||
  { tail -30 "$OUT/pip.log"; exit 1; }
python3 benchmarks/bench_attention.py --artifacts build-gpu/attention --out "$OUT" "$@" 2>&1 |
  tee "$OUT/bench.log"
