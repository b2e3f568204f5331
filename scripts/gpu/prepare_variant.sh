#!/usr/bin/env bash
# Here (where the compiler is): the forward-relevant artifacts of the current
# build (D=128, bf16, 128x128 and 128x64) into build-gpu/exp/VARIANT/<mask>/,
# for an A/B of kernel variants on the GPU machine (benchmarks/ab_forward.py).
#   bash scripts/gpu/prepare_variant.sh VARIANT [mask ...]   (default: the four seed masks)
# PTXAS_OPTIONS='...' builds the attention cubins with those ptxas options
# (cmask-translate --ptxas-options): a variant of ptxas's schedule alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${CMASK_BIN_DIR:-build/bin}
var=${1:?usage: prepare_variant.sh VARIANT [mask ...]}; shift
masks=${*:-causal hstu reward_model clear}
rm -rf "build-gpu/exp/$var"; mkdir -p "build-gpu/exp/$var"
for m in $masks; do
  log=$("$BIN/cmask-translate" "masks/$m.mlir" --cmask-to-artifact -o "build-gpu/exp/$var/$m" \
      --tile-shapes=128x128,128x64 --head-dims=128 --dtypes=bf16 \
      ${PTXAS_OPTIONS:+"--ptxas-options=$PTXAS_OPTIONS"} 2>&1) \
    || { echo "$log" >&2; echo "prepare_variant: $m failed" >&2; exit 1; }
  echo "$log" | grep -v "^cmask: \(the transposed\|wrote\)" || true
  rm -f "build-gpu/exp/$var/$m"/*.ptx   # the cubins are what the H200 loads
done
du -sh "build-gpu/exp/$var"
