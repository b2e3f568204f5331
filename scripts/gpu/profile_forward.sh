#!/usr/bin/env bash
# On the GPU machine: ncu of one cmask forward and one forward of each peer
# (benchmarks/profile_forward.py) on one workload, clocks left as the card
# runs them (--clock-control none), and the metrics that say where the time
# goes, one column per kernel (with --backward: forward+backward, every
# kernel of each call). Needs the cmask package installed (and the peers:
# scripts/gpu/install-peers.sh).
#   bash scripts/gpu/profile_forward.sh [--mask causal --n 32768 --peers fa4] [--backward]
#     [--batch 8 --schedules grid,persistent]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/cmask-out}
mkdir -p "$OUT"
metrics=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__cycles_active.avg,\
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\
smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,\
launch__registers_per_thread,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active,\
smsp__average_warp_latency_issue_stalled_barrier,smsp__average_warp_latency_issue_stalled_long_scoreboard,\
smsp__average_warp_latency_issue_stalled_wait,smsp__average_warp_latency_issue_stalled_math_pipe_throttle,\
smsp__average_warp_latency_issue_stalled_membar,smsp__average_warp_latency_issue_stalled_short_scoreboard,\
smsp__average_warp_latency_issue_stalled_dispatch_stall,smsp__average_warp_latency_issue_stalled_selected,\
smsp__average_warp_latency_issue_stalled_sleeping,smsp__average_warp_latency_issue_stalled_no_instruction,\
dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,\
sm__inst_executed_pipe_tensor_op_gmma.sum
ncu --profile-from-start off --clock-control none --metrics "$metrics" --csv \
  python3 benchmarks/profile_forward.py --artifacts build-gpu/attention "$@" \
  > "$OUT/profile_forward.csv" 2> "$OUT/profile_forward.err"
status=$?
grep -v '^"' "$OUT/profile_forward.csv" | tail -3
python3 - "$OUT/profile_forward.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head = rows[0]
ki, ni, vi, ui = (head.index(c) for c in ("Kernel Name", "Metric Name", "Metric Value", "Metric Unit"))
idi = head.index("ID")
kernels, table = [], {}
for r in rows[1:]:
    key = (r[idi], r[ki][:40])
    if key not in kernels:
        kernels.append(key)
    table.setdefault(r[ni] + (f" ({r[ui]})" if r[ui] else ""), {})[key] = r[vi]
print("| metric | " + " | ".join(k for _, k in kernels) + " |")
print("|---|" + "---|" * len(kernels))
for name, vals in table.items():
    print(f"| {name} | " + " | ".join(vals.get(k, "-") for k in kernels) + " |")
PY
exit $status
