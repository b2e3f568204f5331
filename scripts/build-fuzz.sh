#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) into build-fuzz/ with clang-22:
# every library instrumented for libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer. scripts/setup.sh and scripts/test.sh call it;
# without clang-22 and its fuzzer runtime (apt: clang-22 libclang-rt-22-dev)
# it says so and does nothing (the ctests fuzz-* are then skipped).
#   bash scripts/build-fuzz.sh         FUZZ_BUILD_DIR=build-fuzz by default
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
CXX_FUZZ=$(command -v clang++-22 || true)
CC_FUZZ=$(command -v clang-22 || true)
runtime=$(ls /usr/lib/llvm-22/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null | head -1 || true)
if [ -z "$CXX_FUZZ" ] || [ -z "$CC_FUZZ" ] || [ -z "$runtime" ]; then
  echo "build-fuzz: clang-22 or its libFuzzer runtime is missing (apt install clang-22 libclang-rt-22-dev); the fuzz tests will be skipped"
  exit 0
fi
if [ ! -f "$FUZZ_BUILD_DIR/CMakeCache.txt" ]; then
  CC="$CC_FUZZ" CXX="$CXX_FUZZ" cmake -G Ninja -S . -B "$FUZZ_BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DCMASK_FUZZ=ON -DCMASK_ENABLE_TESTS=OFF -DCMASK_BUILD_RUNTIME=OFF >/dev/null
fi
cmake --build "$FUZZ_BUILD_DIR" --target cmask-spec-fuzzer cmask-metadata-fuzzer
