#!/usr/bin/env bash
# On the GPU machine: build the runtime, run every catalog mask's preprocess
# on the batches prepared by scripts/gpu/prepare_preprocess_check.py, and
# compare the GPU's descriptors bit for bit with the CPU twin's. Reruns
# must be bitwise identical; one mask also runs under compute-sanitizer.
#   bash scripts/gpu/check_preprocess.sh        (logs under $OUT or /tmp/out)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
CASES=${CASES:-build-gpu/preprocess}
nvidia-smi -L || true
echo "==> building the runtime"
cmake -S runtime -B build-rt -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/runtime-build.log" 2>&1 &&
  cmake --build build-rt >> "$OUT/runtime-build.log" 2>&1 || { tail -30 "$OUT/runtime-build.log"; exit 1; }
status=0
summary=""
for dir in "$CASES"/*/; do
  name=$(basename "$dir")
  if ! build-rt/cmask-preprocess-run "$dir/artifact" "$dir/cases.json" --repeat 2 \
      > "/tmp/$name.gpu.json" 2> "/tmp/$name.err"; then
    echo "$name: the GPU run failed:"; tail -5 "/tmp/$name.err"; status=1
    summary+="$name: run failed"$'\n'; continue
  fi
  line=$(python3 test/gpu/compare_descriptors.py "$dir/expected.json.gz" "/tmp/$name.gpu.json" --label "$name") || status=1
  echo "$line"
  summary+="$(echo "$line" | tail -1)"$'\n'
done
echo "==> CLEAR with separate cu_seqlens buffers (its column phases run; above they mirror the rows)"
if build-rt/cmask-preprocess-run "$CASES/clear/artifact" "$CASES/clear/cases.json" --separate-cu-seqlens \
    > /tmp/clear.separate.json 2> /tmp/clear.separate.err; then
  line=$(python3 test/gpu/compare_descriptors.py "$CASES/clear/expected.json.gz" /tmp/clear.separate.json --label "clear (separate cu_seqlens)") || status=1
else
  line="clear (separate cu_seqlens): run failed: $(tail -1 /tmp/clear.separate.err)"; status=1
fi
echo "$line"
summary+="$(echo "$line" | tail -1)"$'\n'
echo "==> the C API, and the preprocess captured in a CUDA graph"
capi=$(build-rt/cmask-capi-check "$CASES/causal/artifact" 2>&1) || status=1
echo "$capi"
summary+="C API and graph capture: $(echo "$capi" | tail -1)"$'\n'
echo "==> 1K-32K and 128K-token packed batches (digests of the descriptors)"
for dir in "$CASES"/*/; do
  name=$(basename "$dir")
  if ! build-rt/cmask-preprocess-run "$dir/artifact-large" "$dir/large_cases.json" --digest --repeat 2 \
      > "/tmp/$name.large.json" 2> "/tmp/$name.large.err"; then
    echo "$name large: the GPU run failed:"; tail -5 "/tmp/$name.large.err"; status=1; continue
  fi
  line=$(python3 -c "
import json, sys
e = json.load(open('$dir/large_expected.json')); g = json.load(open('/tmp/$name.large.json'))
ok = sum(a == b for a, b in zip(e, g)); bad = len(e) - ok
print(f'$name 1K-128K: {ok} passed, {bad} failed')
sys.exit(1 if bad else 0)") || status=1
  echo "$line"
  summary+="$line"$'\n'
done
echo "==> compute-sanitizer memcheck (hstu, clear)"
for name in hstu clear; do
  compute-sanitizer --tool memcheck --error-exitcode 3 --log-file "$OUT/memcheck-$name.log" \
    build-rt/cmask-preprocess-run "$CASES/$name/artifact" "$CASES/$name/cases.json" \
    > /dev/null
  rc=$?
  echo "memcheck $name: exit $rc, $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/memcheck-$name.log") clean summaries"
  tail -2 "$OUT/memcheck-$name.log"
  [ $rc -eq 0 ] || status=1
done
echo "==> invalid metadata given to the runtime (memcheck; must be flagged 4)"
for name in document reward_model; do
  compute-sanitizer --tool memcheck --error-exitcode 3 --log-file "$OUT/memcheck-bad-$name.log" \
    build-rt/cmask-preprocess-run "$CASES/$name/artifact" "$CASES/$name/bad_cases.json" \
    > "/tmp/$name.bad.json"
  rc=$?
  flags=$(python3 -c "import json; print(' '.join(str(b['error']) for b in json.load(open('/tmp/$name.bad.json'))))")
  echo "bad metadata $name: memcheck exit $rc, error flags: $flags"
  line="$name invalid metadata: $(echo "$flags" | tr ' ' '\n' | grep -c '^4$') passed, $(echo "$flags" | tr ' ' '\n' | grep -vc '^4$') failed"
  summary+="$line"$'\n'
  [ $rc -eq 0 ] || status=1
  [ "$(echo "$flags" | tr ' ' '\n' | grep -vc '^4$')" -eq 0 ] || status=1
done
echo "==> summary (batches per mask; each batch = interval table + 4 tile shapes, run twice)"
printf "%s" "$summary"
exit $status
