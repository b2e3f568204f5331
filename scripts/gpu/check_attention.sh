#!/usr/bin/env bash
# On the GPU machine (H200): install the Python package offline (its build
# compiles the runtime with cmake), then run the GPU attention tests against
# the artifacts of scripts/gpu/prepare_attention.sh (CMASK_ARTIFACTS, default
# build-gpu/attention: another OUTDIR of it, e.g. a kernel variant's). Logs
# under $OUT.
#   run: bash scripts/gpu/check_attention.sh [pytest args]   (carry: build-gpu)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/cmask-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
time python3 -m pip install --no-build-isolation --no-deps --no-index -q . \
    > "$OUT/pip.log" 2>&1 || { tail -30 "$OUT/pip.log"; exit 1; }
echo "installed: $(python3 -c 'import cmask, cmask._capi as c; print(c.library_path())')"
CMASK_ARTIFACTS=${CMASK_ARTIFACTS:-build-gpu/attention} python3 -m pytest -q -rs -s --timeout=120 \
    test/gpu/test_attention.py test/gpu/test_backward.py test/gpu/test_training.py \
    test/gpu/test_context_parallel.py \
    test/python/test_torch_part.py \
    "$@" 2>&1 | tee "$OUT/attention-tests.log" | grep -v "^$"
exit "${PIPESTATUS[0]}"
