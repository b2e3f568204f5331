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
  python3 - "$rep.csv" "$rep-details.csv" <<'PY' > "$rep.txt" 2>> "$rep.log" ||
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
# The header is the first row naming the address and source columns.
h = next(i for i, r in enumerate(rows) if "Source" in r and "Address" in r)
head, body = rows[h], [r for r in rows[h + 1:] if len(r) == len(rows[h])]
def col(name):
    return next((i for i, c in enumerate(head) if c.startswith(name)), None)
src, samp, notis, ex = (col(n) for n in ("Source", "Warp Stall Sampling (All",
                                          "Warp Stall Sampling (Not", "Instructions Executed"))
def num(r, i):
    try:
        return float(r[i].replace(",", "")) if i is not None else 0.0
    except ValueError:
        return 0.0
total = sum(num(r, samp) for r in body)
print(f"instructions {len(body)}, stall samples {total:.0f}")
details = [r for r in csv.reader(open(sys.argv[2])) if r]
dh = next((r for r in details if "Metric Name" in r), None)
if dh:
    mn, mu, mv = (dh.index(c) for c in ("Metric Name", "Metric Unit", "Metric Value"))
    for r in details[details.index(dh) + 1:]:
        if len(r) == len(dh) and any(
                k in r[mn] for k in ("Duration", "SM Frequency", "Elapsed Cycles",
                                     "Compute (SM) Throughput", "Warp Cycles Per Issued")):
            print(f"  {r[mn]}: {r[mv]} {r[mu]}")
# Samples per stall reason (the source page's per-reason columns, if any).
reasons = [(c, i) for i, c in enumerate(head) if c.startswith("stall_") and "(Not" not in c]
if reasons:
    tot = sorted(((sum(num(r, i) for r in body), c) for c, i in reasons), reverse=True)
    print("reasons:", ", ".join(f"{c[6:]} {v / max(total, 1) * 100:.1f}%" for v, c in tot[:8] if v))
print(f"{'share':>6} {'samples':>8} {'not issued':>10} {'executed':>10}  instruction")
for r in sorted(body, key=lambda r: -num(r, samp))[:40]:
    print(f"{num(r, samp) / max(total, 1) * 100:5.1f}% {num(r, samp):8.0f} {num(r, notis):10.0f} "
          f"{num(r, ex):10.0f}  {r[src][:90]}")
# The whole listing in address order, for phases (sum the share over a
# loop's instructions, executed as often as its steps): index, share,
# times executed, instruction, its three largest stall reasons.
print("\nlisting")
for k, r in enumerate(body):
    v = num(r, samp)
    top = sorted(((num(r, i), c[6:]) for c, i in reasons), reverse=True)[:3]
    why = " ".join(f"{c}:{w / max(v, 1) * 100:.0f}" for w, c in top if w > 0)
    print(f"{k:5d} {v / max(total, 1) * 100:5.2f} {num(r, ex):10.0f}  {r[src].strip()[:70]:70s} {why}")
PY
    { status=1; echo "profile_sass: the summary of $rep.csv failed"; tail -5 "$rep.log"; continue; }
  sed '/^listing$/,$d' "$rep.txt"
  rm -f "$rep.ncu-rep" "$rep-details.csv" "$rep.log"
done
exit $status
