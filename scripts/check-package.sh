#!/usr/bin/env bash
# The Python package as a new user gets it: builds the sdist and the wheel
# (python -m build), then in fresh virtual environments installs the wheel,
# the sdist with the CUDA toolkit hidden from CMake (as on a machine without
# it: no runtime), and the checkout as docs/python.md
# says (`pip install .` and `pip install -e .` in its root), and in each
# compiles a spec, runs the command line and visualize, and loads the
# runtime library (or checks the message that says why there is none).
# Needs PyPI (build, scikit-build-core, numpy, matplotlib) and the compiler
# (build/bin, or $CMASK_BIN_DIR). These builds leave the compiler out of the
# package (SKBUILD_CMAKE_DEFINE=CMASK_BUILD_COMPILER=OFF in the environment:
# it takes 3-5 minutes a build on two cores); then one more wheel is built
# with it and used without $CMASK_BIN_DIR, build/bin or PATH's tools
# (CMASK_PACKAGE_COMPILER=0 leaves that out). The wheel is also installed
# with PyTorch (from PyPI, about 4.6 GB: CMASK_PACKAGE_TORCH=0 leaves it
# out) to import the torch part and build the eager attention operator.
#   bash scripts/check-package.sh        (prints "N passed, N failed" last)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export CMASK_BIN_DIR=${CMASK_BIN_DIR:-$ROOT/build/bin}
export SKBUILD_CMAKE_DEFINE="CMASK_BUILD_COMPILER=OFF"
WORK=$(mktemp -d /tmp/cmask-package-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export CMASK_CACHE_DIR=$WORK/cache
# The driver library where there is no GPU: the toolkit's stub (loads, no device).
STUBS=$WORK/stubs
mkdir -p "$STUBS"
for stub in /usr/local/cuda/lib64/stubs/libcuda.so /usr/local/cuda/targets/*/lib/stubs/libcuda.so; do
  [ -f "$stub" ] && ln -sf "$stub" "$STUBS/libcuda.so.1" && break
done
pass=0
fail=0
check() { # NAME COMMAND...: runs it, counts it
  local name=$1
  shift
  if out=$("$@" 2>&1); then
    pass=$((pass + 1))
    echo "PASS: $name"
  else
    fail=$((fail + 1))
    echo "FAIL: $name"
    echo "$out" | tail -15 | sed 's/^/    /'
  fi
}
venv() { # DIR: a fresh virtual environment with numpy and matplotlib
  python3 -m venv "$1" && "$1/bin/pip" install -q numpy matplotlib
}
python3 -m venv "$WORK/tools" || exit 1
if ! "$WORK/tools/bin/pip" install -q build; then
  echo "check-package: PyPI is not reachable (pip install build failed): skipped"
  exit 77 # ctest: skipped
fi
check "python -m build (sdist and wheel)" "$WORK/tools/bin/python" -m build -o "$WORK/dist" "$ROOT"
wheel=$(ls "$WORK"/dist/cmask-*.whl 2>/dev/null)
sdist=$(ls "$WORK"/dist/cmask-*.tar.gz 2>/dev/null)
check "the wheel's tag is py3-none (the library links no Python)" \
  sh -c "case '$wheel' in *-py3-none-*.whl) true ;; *) echo '$wheel'; false ;; esac"
check "the sdist holds python/ and runtime/" \
  sh -c "tar tzf '$sdist' | grep -q /runtime/CMakeLists.txt && tar tzf '$sdist' | grep -q /python/cmask/cli.py"

use() { # VENV LABEL: compile, the command line, visualize in that environment
  local py=$1/bin/python label=$2
  check "$label: cmask.compile" "$py" -c "
import cmask
s = cmask.Spec('c')
s.region('r', rule=s.j <= s.i)
print(cmask.compile(s, load=False, tile_shapes=('128x64',), head_dims=(64,), dtypes=('bf16',)))"
  check "$label: cmask show (console script)" sh -c \
    "'$1/bin/cmask' show '$ROOT/masks/hstu.mlir' --q-len 6 context=1 num_targets=2 | grep -q 'target       \[0, 4) U \[5, 6)'"
  check "$label: cmask visualize" "$1/bin/cmask" visualize "$ROOT/masks/hstu.mlir" \
    -o "$WORK/$label.png" --q-len 64 context=4 num_targets=8
}

runtime() { # VENV LABEL: the runtime library loads where the build made one
  # (the CUDA toolkit was found), with the PyTorch binding's sources and
  # the runtime's headers; else the error names the reason
  check "$2: the runtime library loads (the binding's sources beside it), or says why there is none" \
    env LD_LIBRARY_PATH="$STUBS" "$1/bin/python" -c "
import json
import cmask._capi as c
info = json.loads(c._installed('_build.json').read_text())
try:
    c.lib()
    assert not info['runtime'], 'loaded, yet the build says ' + info['runtime']
    # What the PyTorch binding is built from on first use.
    from cmask import _binding
    assert _binding._SOURCE.is_file(), _binding._SOURCE
    _binding._runtime_include()
except ImportError as e:
    assert info['runtime'] and info['runtime'] in str(e), e
    print('no runtime:', e)"
}

venv "$WORK/wheel" && "$WORK/wheel/bin/pip" install -q "$wheel"
use "$WORK/wheel" wheel
runtime "$WORK/wheel" wheel

# The sdist where the CUDA toolkit is not found (hidden from CMake's
# find_package), as on a machine without it.
venv "$WORK/sdist" && "$WORK/sdist/bin/pip" install -q \
  -Ccmake.define.CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON "$sdist"
use "$WORK/sdist" sdist-no-toolkit
check "sdist-no-toolkit: the missing runtime is explained" "$WORK/sdist/bin/python" -c "
import cmask._capi as c
try:
    c.lib()
except ImportError as e:
    assert 'built where the CUDA toolkit (cuda.h) was not found' in str(e), e
else:
    raise SystemExit('the runtime loaded')"

# docs/python.md's commands, literally, in the repository's root.
venv "$WORK/root" && (cd "$ROOT" && "$WORK/root/bin/pip" install -q .)
use "$WORK/root" root
runtime "$WORK/root" root

venv "$WORK/editable" && (cd "$ROOT" && "$WORK/editable/bin/pip" install -q -e .)
use "$WORK/editable" editable
check "editable: the sources are the checkout's" "$WORK/editable/bin/python" -c "
import cmask
assert cmask.__file__.startswith('$ROOT/python/'), cmask.__file__"
runtime "$WORK/editable" editable

# The torch part, where PyTorch is installed (from PyPI; CMASK_PACKAGE_TORCH=0
# leaves it out): the ops registered on import, and the eager attention
# operator built against that PyTorch and loaded over the runtime (the stub
# driver: no GPU needed to build, check the C structures and look up the C
# API).
if [ "${CMASK_PACKAGE_TORCH:-1}" = 1 ] && ! { venv "$WORK/torch" &&
  "$WORK/torch/bin/pip" install -q "$wheel" torch > "$WORK/torch.log" 2>&1; }; then
  echo "SKIP: the torch part: pip install torch failed here ($(tail -1 "$WORK/torch.log"))"
elif [ "${CMASK_PACKAGE_TORCH:-1}" = 1 ]; then
  check "torch: import cmask registers the custom ops" "$WORK/torch/bin/python" -c "
import torch, cmask
assert hasattr(torch.ops.cmask, 'attention_forward') and hasattr(torch.ops.cmask, 'preprocess')"
  check "torch: the PyTorch binding builds against it, loads over the runtime, raises" \
    env LD_LIBRARY_PATH="$STUBS" CMASK_TORCH_BINDING=1 "$WORK/torch/bin/python" -c "
import torch
from cmask import _binding
assert _binding.load(), _binding.status()
t = torch.zeros(4, 2, 64, dtype=torch.bfloat16)
try:  # an error thrown in the binding reaches Python (no abort)
    torch.ops.cmask_native.attention(t, t, t, 12345, -1.0, -1, False)
except RuntimeError as e:
    assert 'descriptor 12345 is gone' in str(e), e
else:
    raise SystemExit('an unknown descriptor id was accepted')"
  rm -rf "$WORK/torch" # 4.6 GB
else
  echo "SKIP: the torch part (CMASK_PACKAGE_TORCH=0)"
fi

# The compiler inside the package: a wheel built where LLVM/MLIR 22 is, used
# with neither $CMASK_BIN_DIR nor the checkout's build/bin nor PATH's tools.
if [ "${CMASK_PACKAGE_COMPILER:-1}" = 1 ]; then
  check "python -m build --wheel with the compiler" env -u SKBUILD_CMAKE_DEFINE \
    "$WORK/tools/bin/python" -m build --wheel -o "$WORK/dist-compiler" "$ROOT"
  venv "$WORK/compiler" && "$WORK/compiler/bin/pip" install -q "$WORK"/dist-compiler/cmask-*.whl
  check "compiler wheel: cmask.compile finds the package's cmask-translate" \
    env -u CMASK_BIN_DIR PATH=/usr/bin:/bin "$WORK/compiler/bin/python" -c "
import cmask, pathlib
tool = pathlib.Path(cmask._find_tool('cmask-translate'))
assert tool.parent == pathlib.Path(cmask.__file__).parent / 'bin', tool
s = cmask.Spec('c')
s.region('r', rule=s.j <= s.i)
print(cmask.compile(s, load=False, tile_shapes=('128x64',), head_dims=(64,), dtypes=('bf16',)))"
  check "compiler wheel: cmask compile (console script)" \
    env -u CMASK_BIN_DIR PATH=/usr/bin:/bin "$WORK/compiler/bin/cmask" compile \
    "$ROOT/masks/causal.mlir" -o "$WORK/causal.art"
else
  echo "SKIP: the compiler inside the package (CMASK_PACKAGE_COMPILER=0)"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
