#!/usr/bin/env bash
# Runs one libFuzzer target of build-fuzz/ for a bounded time, seeded from
# the repository's specs or metadata files, and fails on a crash, a
# sanitizer report, an input slower than 20 s (a hang) or more than 2 GB.
# The ctests fuzz-spec and fuzz-metadata run it; exit 77 (skipped) when the
# fuzz build is not there (bash scripts/build-fuzz.sh).
#   bash scripts/run-fuzzer.sh spec|metadata [SECONDS]   (CMASK_FUZZ_SECONDS, default 60)
set -uo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: run-fuzzer.sh spec|metadata [SECONDS]}
seconds=${2:-${CMASK_FUZZ_SECONDS:-60}}
FUZZ_BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
bin="$FUZZ_BUILD_DIR/bin/cmask-$name-fuzzer"
if [ ! -x "$bin" ]; then
  echo "skipped: $bin is not built (bash scripts/build-fuzz.sh; needs clang-22 and libclang-rt-22-dev)"
  exit 77
fi
work="$FUZZ_BUILD_DIR/fuzz/$name"
rm -rf "$work/seeds" "$work/artifacts"
mkdir -p "$work/corpus" "$work/seeds" "$work/artifacts"
dict=()
seed() { for f in "$@"; do cp "$f" "$work/seeds/$(echo "$f" | tr / _)"; done; }
# The lit tests' inputs, one seed per `// -----` part.
split_seeds() {
  for f in "$@"; do
    awk -v out="$work/seeds/$(echo "$f" | tr / _)" \
      '/^\/\/ -----/ { n++; next } { print > (out "." n ".mlir") }' "$f"
  done
}
max_len=65536
case "$name" in
  spec)
    seed masks/*.mlir test/gpu/Inputs/*.mlir test/Target/Inputs/*.mlir
    split_seeds test/Dialect/CMask/*.mlir test/Transforms/*.mlir
    dict=(-dict=fuzz/spec.dict)
    max_len=8192 ;;
  metadata)
    seed masks/examples/*.json test/Target/Inputs/*.json ;;
  *) echo "run-fuzzer.sh: no fuzzer '$name' (spec, metadata)"; exit 2 ;;
esac
echo "fuzzing $name for $seconds s ($(ls "$work/seeds" | wc -l) seeds)"
"$bin" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
  -max_len="$max_len" -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
  "${dict[@]}" "$work/corpus" "$work/seeds" > "$work/log" 2>&1
status=$?
grep -E "^#[0-9]+.*(DONE|INITED)|^stat::(number_of_executed_units|peak_rss_mb)" "$work/log" | tail -3
if [ $status -ne 0 ]; then
  echo "cmask-$name-fuzzer failed (exit $status); the end of its log:"
  tail -40 "$work/log"
  for f in "$work"/artifacts/*; do
    [ -f "$f" ] || continue
    echo "== the input, $f ($(wc -c < "$f") bytes):"
    head -c 4000 "$f"; echo
  done
fi
exit $status
