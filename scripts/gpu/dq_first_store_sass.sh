#!/usr/bin/env bash
# On the GPU machine: where the backward main kernel waits with and without the
# dQ accumulator's first store (CMASK_DQ_FIRST_STORE=1 against the runtime's rule):
# per configuration, ncu's duration and the executions and stall share of the
# SASS lines of the spin loop (NANOSLEEP), the atomics and the L1 invalidation
# after them (CCTL), bulk copies, wait groups and barriers: those of the dQ warp's
# protocol always, the others where they are among the 25 most sampled.
# Needs build-gpu/exp/VARIANT (scripts/gpu/prepare_variant.sh VARIANT causal).
#   bash scripts/gpu/dq_first_store_sass.sh [VARIANT]   (carry build-gpu/exp)
# CONFIGS: the configurations, each SHAPE:FS (ab_forward.py's shape; FS 1 or 0
# sets CMASK_DQ_FIRST_STORE, u leaves the rule), e.g.
#   CONFIGS="causal:32768:1 causal:32768:0" bash scripts/gpu/dq_first_store_sass.sh
# for the long-sequence loss (thirty-fifth session: the main kernel 10.8% slower
# at causal 32K with the first store, why not measured).
# First run in the thirty-fourth session (docs/performance.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=${OUT:-/tmp/cmask-out}
OUT=$TOP/dq_first_store   # its own folder, archived at the end
mkdir -p "$OUT"
t0=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps --no-index -q . > $OUT/pip.log 2>&1 || tail -5 $OUT/pip.log
for cfg in ${CONFIGS:-gqa:16384:1 gqa:16384:u causal:16384:1 causal:16384:0}; do
  shape=${cfg%:*}; fs=${cfg##*:}; tag=$(echo $cfg | tr ':' '_')
  if [ $fs = u ]; then unset CMASK_DQ_FIRST_STORE; else export CMASK_DQ_FIRST_STORE=$fs; fi
  timeout 200 ncu -k 'regex:cmask_causal_bwd_bf16_d128$' --launch-count 1 --section SourceCounters \
    --section WarpStateStats --section SpeedOfLight --import-source no -f -o $OUT/$tag \
    python3 benchmarks/ab_forward.py --backward ${1:-base} $shape > $OUT/$tag.log 2>&1 || tail -3 $OUT/$tag.log
  ncu -i $OUT/$tag.ncu-rep --page source --print-source sass --csv > $OUT/$tag.csv 2>/dev/null
  ncu -i $OUT/$tag.ncu-rep --page details --csv > $OUT/$tag-d.csv 2>/dev/null
  rm -f $OUT/$tag.ncu-rep
  echo "== $cfg ($(( $(date +%s)-t0 ))s)"
  python3 - $OUT/$tag.csv $OUT/$tag-d.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
h = next(i for i, r in enumerate(rows) if "Source" in r and "Address" in r)
head, body = rows[h], [r for r in rows[h + 1:] if len(r) == len(rows[h])]
col = lambda n: next((i for i, c in enumerate(head) if c.startswith(n)), None)
src, samp, ex = col("Source"), col("Warp Stall Sampling (All"), col("Instructions Executed")
num = lambda r, i: float(r[i].replace(",", "") or 0) if i is not None else 0.0
total = sum(num(r, samp) for r in body)
for r in csv.reader(open(sys.argv[2])):
    if len(r) > 5 and any(k in " ".join(r) for k in ("Duration", "SM Frequency", "Elapsed Cycles", "SM Active Cycles", "DRAM Throughput")):
        print("  ", [c for c in r if c][-3:])
print(f"  stall samples {total:.0f}")
keys = ("NANOSLEEP", "ATOMG", "ATOM.", "REDG", "RED.", "UBLK", "UTMA", "DEPBAR", "BAR.", "SYNCS", "MEMBAR", "FENCE", "LDG.E.STRONG", "CCTL", "ERRBAR")
hits = [r for r in body if any(k in r[src] for k in keys) and num(r, ex) > 0]
always = ("NANOSLEEP", "ATOM", "RED", "UBLK", "DEPBAR")
top = sorted(hits, key=lambda r: -num(r, samp))[:25]
for r in [r for r in hits if r in top or any(k in r[src] for k in always)]:
    print(f"  {num(r, ex):10.0f} exec {num(r, samp) / max(total, 1) * 100:5.2f}%  {r[src][:80]}")
PY
done
# One archive: the device tool brings back a limited number of files.
tar -czf "$TOP/dq_first_store.tgz" -C "$TOP" dq_first_store && rm -rf "$OUT"
echo "total $(( $(date +%s)-t0 ))s (per-line CSVs in $TOP/dq_first_store.tgz)"
