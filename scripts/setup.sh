#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: install every dependency, build
# cmask, and run the main job on a bundled example (compile the HSTU catalog
# mask, show its slots, evaluate them on example metadata).
#
#   bash scripts/setup.sh            # BUILD_DIR=build by default
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

echo "==> Installing Debian packages (LLVM/MLIR 22, build tools, GoogleTest, Python, clang-format, clang and libFuzzer)"
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools \
  cmake ninja-build g++ libgtest-dev python3 python3-venv python3-pip \
  clang-format-22 clang-22 libclang-rt-22-dev >/dev/null

echo "==> Installing Python packages into .venv (requirements.txt)"
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r requirements.txt

echo "==> Configuring and building ($BUILD_DIR)"
cmake -G Ninja -S . -B "$BUILD_DIR" \
  -DCMAKE_BUILD_TYPE=Release \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
  -DCMASK_PYTHON="$PWD/.venv/bin/python" >/dev/null
cmake --build "$BUILD_DIR"
echo "==> The fuzz build (build-fuzz: clang-22, libFuzzer + ASan + UBSan)"
bash scripts/build-fuzz.sh

echo "==> Main job: compile masks/hstu.mlir to interval slots"
"$BUILD_DIR/bin/cmask-opt" masks/hstu.mlir --cmask-lower-to-intervals
echo "==> Its slots on masks/examples/hstu.json (one row per line)"
"$BUILD_DIR/bin/cmask-translate" masks/hstu.mlir --cmask-to-intervals-json \
  --metadata=masks/examples/hstu.json |
  .venv/bin/python scripts/show_slots.py
echo "==> Its GPU artifact: preprocess and attention kernels (build/hstu.art)"
"$BUILD_DIR/bin/cmask-translate" masks/hstu.mlir --cmask-to-artifact -o "$BUILD_DIR/hstu.art"
