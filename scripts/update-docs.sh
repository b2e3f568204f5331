#!/usr/bin/env bash
# Regenerates docs/generated/ (dialect, op and pass docs) from the ODS files.
# The ctest `generated-docs` fails when they are out of date.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake --build "$BUILD_DIR" --target mlir-doc
cp "$BUILD_DIR"/docs/CMask/*.md docs/generated/
echo "updated docs/generated/"
