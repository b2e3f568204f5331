#!/usr/bin/env bash
# On the GPU machine: where one kernel's warps stall, per SASS instruction.
# ncu's SourceCounters and WarpStateStats of the first launch of each kernel
# named by a regular expression, one profiled run of
# benchmarks/profile_forward.py (its arguments after --) per expression,
# then each report's source page as CSV and the instructions with the most
# stall samples.
# Needs the cmask package installed (and the peers for a peer's kernel).
#   bash scripts/gpu/profile_sass.sh 'cmask_causal_bwd_bf16_d128$' \
#     'FlashAttentionBackwardSm90' -- --mask causal --n 16384 --backward --peers fa4
# Writes $OUT/sass-<i>.csv (the source page) and $OUT/sass-<i>.txt (the
# summary, printed, then the whole listing in address order with each
# instruction's share, executions and main stall reasons); the report and
# the logs are kept under $OUT only on a failure (the device tool brings
# back a few files a call).
# Then, anywhere: python3 benchmarks/sass_phases.py cmask=sass-0.csv ...
# compares the kernels' step loops phase by phase. The peers' CuTe DSL
# kernels leave their PTX and cubin (for nvdisasm) when their process runs
# with CUTE_DSL_KEEP_PTX=1 CUTE_DSL_KEEP_CUBIN=1 CUTE_DSL_DUMP_DIR=DIR.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/cmask-out}
mkdir -p "$OUT"
regexes=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do regexes+=("$1"); shift; done
[ $# -gt 0 ] && shift
if [ ${#regexes[@]} -eq 0 ]; then
  echo "usage: profile_sass.sh REGEX [REGEX ...] -- [profile_forward.py arguments]" >&2
  exit 2
fi
status=0
for i in "${!regexes[@]}"; do
  rep="$OUT/sass-$i"
  echo "== kernel ${regexes[$i]}"
  ncu --profile-from-start off --clock-control none -k "regex:${regexes[$i]}" \
    --launch-count 1 --section SourceCounters --section WarpStateStats \
    --section SpeedOfLight --import-source no -f -o "$rep" \
    python3 benchmarks/profile_forward.py --artifacts build-gpu/attention "$@" \
    > "$rep.log" 2>&1 || { status=1; tail -5 "$rep.log"; continue; }
  ncu -i "$rep.ncu-rep" --page source --print-source sass --csv > "$rep.csv" 2>> "$rep.log" ||
    { status=1; tail -5 "$rep.log"; continue; }
  ncu -i "$rep.ncu-rep" --page details --csv > "$rep-details.csv" 2>> "$rep.log" ||
    { status=1; tail -5 "$rep.log"; continue; }
  python3 benchmarks/sass_phases.py --summary "$rep.csv" "$rep-details.csv" \
      > "$rep.txt" 2>> "$rep.log" ||
    { status=1; echo "profile_sass: the summary of $rep.csv failed"; tail -5 "$rep.log"; continue; }
  sed '/^listing$/,$d' "$rep.txt"
  rm -f "$rep.ncu-rep" "$rep-details.csv" "$rep.log"
done
exit $status
