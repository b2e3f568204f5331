#!/usr/bin/env bash
# Here (where the compiler is): the catalog's artifacts with attention kernels,
# into build-gpu/attention/<mask>/ (carried to the GPU machine; see
# scripts/gpu/check_attention.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${CMASK_BIN_DIR:-build/bin}
OUTDIR=${OUTDIR:-build-gpu/attention}   # (OUTDIR=... to build elsewhere, e.g. a baseline)
# PTXAS_OPTIONS='...': the attention cubins built with those ptxas options
# (cmask-translate --ptxas-options; a variant's full artifacts for its tests).
mkdir -p "$OUTDIR"
# The catalog, and the test-only specs of test/gpu/Inputs.
for spec in masks/*.mlir test/gpu/Inputs/*.mlir; do
  name=$(basename "$spec" .mlir)
  rm -rf "$OUTDIR/$name"
  "$BIN/cmask-translate" "$spec" --cmask-to-artifact -o "$OUTDIR/$name" \
      --tile-shapes=128x128,128x64 --head-dims=64,128 --dtypes=bf16,f16 \
      ${PTXAS_OPTIONS:+"--ptxas-options=$PTXAS_OPTIONS"} 2>&1 | grep -v "^cmask: the transposed"
  rm -f "$OUTDIR/$name"/*.ptx   # the cubins are what the H200 loads
done
du -sh "$OUTDIR"
