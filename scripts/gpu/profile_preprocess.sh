#!/usr/bin/env bash
# On the GPU machine: per-kernel GPU times (ncu) of the preprocess of the
# 32K benchmark batch of some masks (training descriptor: both directions,
# checked mode), from the cases of benchmarks/prepare_preprocess_bench.py.
#   bash scripts/gpu/profile_preprocess.sh [mask ...]   (needs build-rt)
set -uo pipefail
cd "$(dirname "$0")/../.."
for name in "${@:-causal clear}"; do
  for m in $name; do
    python3 -c "import json,sys; json.dump([json.load(open('build-gpu/bench/$m/cases.json'))[-1]], sys.stdout)" > "/tmp/$m.32k.json"
    echo "== $m (32K): preprocess kernel, GPU time (ns)"
    ncu --metrics gpu__time_duration.sum --csv build-rt/cmask-preprocess-run \
      "build-gpu/bench/$m/artifact" "/tmp/$m.32k.json" --digest 2>/dev/null |
      python3 -c "
import csv, sys
rows = [r for r in csv.reader(l for l in sys.stdin if l.startswith('\"'))]
head = rows[0]; k = head.index('Kernel Name'); v = head.index('Metric Value')
for r in rows[1:]: print(f'  {r[k]:<28} {r[v]:>10}')"
  done
done
