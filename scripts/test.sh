#!/usr/bin/env bash
# Runs every test (lit, GoogleTest, differential tests, install consumer,
# the fuzzers for CMASK_FUZZ_SECONDS each) under ctest. Run scripts/setup.sh
# first.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake --build "$BUILD_DIR"
cmake --build "$BUILD_DIR" --target mlir-doc >/dev/null
bash scripts/build-fuzz.sh
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)"
