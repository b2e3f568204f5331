#!/usr/bin/env bash
# Here (where the compiler is): a kernel variant kept as a patch on main
# (benchmarks/variants/NAME.patch) built into artifacts for the GPU machine:
# the patch applied to the work tree, cmask-translate rebuilt in BUILD_DIR
# and copied aside, the patch reverted and cmask-translate rebuilt again;
# then build-gpu/exp/NAME (prepare_variant.sh, for benchmarks/ab_forward.py)
# and build-gpu/attention-NAME (prepare_attention.sh, for the GPU tests of
# scripts/gpu/check_variants.sh). Needs a clean work tree.
#   bash scripts/gpu/prepare_patch_variant.sh NAME [--no-tests]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
name=${1:?usage: prepare_patch_variant.sh NAME [--no-tests]}
patch=benchmarks/variants/$name.patch
[ -f "$patch" ] || { echo "prepare_patch_variant: no $patch" >&2; exit 1; }
git diff --quiet HEAD || { echo "prepare_patch_variant: the work tree has changes; commit or stash them first" >&2; exit 1; }
bin=$(mktemp -d)
trap 'git apply -R "$patch" 2>/dev/null || true' EXIT
echo "==> $name: applying $patch and building cmask-translate"
git apply "$patch"
ninja -C "$BUILD_DIR" cmask-translate > "$bin/ninja.log" || { tail -30 "$bin/ninja.log"; exit 1; }
cp "$BUILD_DIR/bin/cmask-translate" "$bin/"
git apply -R "$patch"
trap - EXIT
echo "==> $name: main's cmask-translate rebuilt"
ninja -C "$BUILD_DIR" cmask-translate > "$bin/ninja.log" || { tail -30 "$bin/ninja.log"; exit 1; }
CMASK_BIN_DIR=$bin bash scripts/gpu/prepare_variant.sh "$name"
if [ "${2:-}" != "--no-tests" ]; then
  CMASK_BIN_DIR=$bin OUTDIR=build-gpu/attention-$name bash scripts/gpu/prepare_attention.sh
fi
rm -rf "$bin"
