#!/usr/bin/env bash
# On the GPU machine, best one with several GPUs (nvidia-h200-x2, -x4): install
# the Python package offline, run the context-parallel GPU tests (two ranks
# over NCCL where there are two GPUs, sharing one GPU over gloo otherwise), then
# the scaling benchmark at 1, 2 and 4 GPUs (as many as the machine has) with
# PyTorch's context parallelism of FlexAttention beside it (docs/distributed.md).
# Logs under $OUT; the benchmark's table printed last.
#   run: bash scripts/gpu/check_context_parallel.sh   (carry: build-gpu/attention)
#   TOKENS=32768,65536 MASKS=causal,hstu PEER=flex|none to change the benchmark.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/cmask-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# NVLink multicast off (../.library/device/KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
n=$(nvidia-smi -L | wc -l)
gpus=1
[ "$n" -ge 2 ] && gpus=1,2
[ "$n" -ge 4 ] && gpus=1,2,4
echo "GPUs: $n (benchmark at $gpus)"
python3 -m pip install --no-build-isolation --no-deps --no-index -q . \
    > "$OUT/pip.log" 2>&1 || { tail -30 "$OUT/pip.log"; exit 1; }
CMASK_ARTIFACTS=build-gpu/attention python3 -m pytest -q -rs -s --timeout=300 \
    test/gpu/test_context_parallel.py > "$OUT/cp-tests.log" 2>&1
tests=$?
grep -E "relFro|passed|failed|skipped|Error" "$OUT/cp-tests.log" | tail -20
python3 benchmarks/bench_context_parallel.py build-gpu/attention \
    --masks "${MASKS:-causal,hstu}" --tokens-per-gpu "${TOKENS:-65536}" \
    --gpus "$gpus" --peer "${PEER:-flex}" --iters 3 --warmup 1 \
    > "$OUT/cp-bench.log" 2>&1
bench=$?
tail -30 "$OUT/cp-bench.log"
echo "tests rc $tests, benchmark rc $bench"
[ "$tests" = 0 ] && [ "$bench" = 0 ]
