#!/usr/bin/env bash
# The C and C++ sources as .clang-format says (clang-format 22, which
# scripts/setup.sh installs): lists each file that differs with the first
# lines to change, and fails. The ctest `format` runs it.
#
#   bash scripts/check-format.sh          check every tracked .c/.cpp/.h
#   bash scripts/check-format.sh --fix    format them in place
#   bash scripts/check-format.sh FILE...  check (or --fix) only these
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-$(command -v clang-format-22 || echo /usr/lib/llvm-22/bin/clang-format)}
if [ ! -x "$CLANG_FORMAT" ]; then
  echo "check-format: clang-format 22 not found (apt-get install clang-format-22)" >&2
  exit 77 # ctest: skipped
fi
fix=0
if [ "${1:-}" = "--fix" ]; then
  fix=1
  shift
fi
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.c' '*.cpp' '*.h')
fi
if [ $fix = 1 ]; then
  "$CLANG_FORMAT" -i "${files[@]}"
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! "$CLANG_FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1; then
    bad=$((bad + 1))
    echo "$f: not formatted; first differences:"
    { "$CLANG_FORMAT" --dry-run "$f" 2>&1 || true; } | grep -E "^$f:[0-9]+:[0-9]+: " |
      head -3 | sed 's/^/  /' || true
  fi
done
if [ $bad -gt 0 ]; then
  echo "check-format: $bad of ${#files[@]} files are not formatted (bash scripts/check-format.sh --fix)"
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
