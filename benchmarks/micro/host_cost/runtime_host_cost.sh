#!/usr/bin/env bash
# The cmask runtime's own host time per call, on any machine (no GPU needed):
# builds the stand-in libcuda (cuda_stub.c: every driver call returns at
# once, nothing is launched) and runtime_host_cost.cpp against the runtime
# library of the build, then times cmask_attention_forward, _backward and
# cmask_preprocess on a prepared descriptor under the stand-in.
#
#   bash benchmarks/micro/host_cost/runtime_host_cost.sh [ARTIFACT_DIR] [--n N]
#        [--batch B] [--heads H] [--calls C]
#
# ARTIFACT_DIR: an artifact of a mask without metadata (default: masks/causal.mlir,
# translated into a temporary folder, about 10 s). CMASK_BUILD_DIR (default
# build/) has lib/libcmask_runtime.so and bin/cmask-translate; CUDA_HOME (default
# /usr/local/cuda) the driver API's header.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
build="${CMASK_BUILD_DIR:-$repo/build}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for need in "$build/lib/libcmask_runtime.so" "$cuda/include/cuda.h"; do
  [[ -e "$need" ]] || { echo "runtime_host_cost: $need is missing (build the project first: bash scripts/setup.sh)" >&2; exit 1; }
done
art=""
if [[ $# -gt 0 && "$1" != --* ]]; then art="$1"; shift; fi
if [[ -z "$art" ]]; then
  art="$work/causal.art"
  echo "runtime_host_cost: translating masks/causal.mlir (about 10 s)" >&2
  "$build/bin/cmask-translate" "$repo/masks/causal.mlir" --cmask-to-artifact -o "$art" > /dev/null
fi
gcc -O2 -shared -fPIC -I"$cuda/include" -Wl,-soname,libcuda.so.1 \
  -o "$work/libcuda.so.1" "$here/cuda_stub.c"
g++ -O2 -std=c++17 -I"$repo/runtime/include" -I"$cuda/include" -o "$work/runtime_host_cost" \
  "$here/runtime_host_cost.cpp" -L"$build/lib" -lcmask_runtime -L"$work" -l:libcuda.so.1 \
  -Wl,-rpath,"$build/lib"
LD_LIBRARY_PATH="$work" "$work/runtime_host_cost" "$art" "$@"
