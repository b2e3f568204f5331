#!/usr/bin/env bash
# On the GPU machine: kernel variants checked and timed in one call. Installs
# the Python package offline, runs the GPU tests named by TESTS on each
# variant's full artifacts (build-gpu/attention-VAR: OUTDIR of
# prepare_attention.sh, built from the variant's code), then one A/B of the
# variants' build-gpu/exp/VAR artifacts (prepare_variant.sh) with
# benchmarks/ab_forward.py. Logs under $OUT; the A/B's table printed last.
#   run: bash scripts/gpu/check_variants.sh [--backward] BASE,COPY,VAR,... SHAPES
#        (carry: build-gpu/exp and each build-gpu/attention-VAR)
#   TESTS="test/gpu/test_backward.py test/gpu/test_training.py" (the default:
#   the backward's; the forward's is test/gpu/test_attention.py)
# A variant without build-gpu/attention-VAR is timed but not tested (said).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/cmask-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
direction=()
[ "${1:-}" = "--backward" ] && { direction=(--backward); shift; }
variants=${1:?usage: check_variants.sh [--backward] BASE,COPY,VAR,... SHAPES}
shapes=${2:?usage: check_variants.sh [--backward] BASE,COPY,VAR,... SHAPES}
tests=${TESTS:-test/gpu/test_backward.py test/gpu/test_training.py}
python3 -m pip install --no-build-isolation --no-deps --no-index -q . \
    > "$OUT/pip.log" 2>&1 || { tail -30 "$OUT/pip.log"; exit 1; }
status=0
declare -A tested
for var in ${variants//,/ }; do
  name=${var%%@*}
  [ -n "${tested[$name]:-}" ] && continue
  tested[$name]=1
  dir=build-gpu/attention-$name
  if [ ! -d "$dir" ]; then
    echo "$name: not tested ($dir is not here)"
    continue
  fi
  # shellcheck disable=SC2086
  CMASK_ARTIFACTS=$dir python3 -m pytest -q -rs --timeout=300 $tests \
      > "$OUT/tests-$name.log" 2>&1
  rc=$?
  echo "$name: $(tail -1 "$OUT/tests-$name.log")"
  [ $rc -ne 0 ] && { status=1; grep -E "^FAILED|Error" "$OUT/tests-$name.log" | head -20; }
done
python3 benchmarks/ab_forward.py "${direction[@]}" "$variants" "$shapes" \
    > "$OUT/ab.log" 2>&1 || status=1
tail -40 "$OUT/ab.log"
exit $status
