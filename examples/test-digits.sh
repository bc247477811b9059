#!/usr/bin/env bash
# The meson tests of the digits examples (suite 'examples'):
#   test-digits.sh PYTHON EXPORT_SCRIPT DATA_FILE COMMAND [ARGS...]
# exports scikit-learn's digits with EXPORT_SCRIPT to DATA_FILE (in the build directory), then
# runs COMMAND ARGS... DATA_FILE (the program exits nonzero below its accuracy target). Exit 77
# (skipped) when PYTHON cannot import scikit-learn: the data ship inside that package and are never
# copied into this repository.
# Under the valgrind test setup (TLRT_UNDER_VALGRIND set) meson's wrapper runs this shell under
# memcheck, so the shell never exits by itself (bash leaks at exit): it ends by exec. A native
# COMMAND then runs under memcheck itself, for DIGITS_VALGRIND_EPOCHS epochs (default 2) with no
# accuracy target (the full run takes minutes there), on the first DIGITS_VALGRIND_SUBSET images
# of each split when that is set (--subset: the same code paths in fewer steps); a Python one is
# skipped (CPython under memcheck is slow and noisy; the C example makes the same library calls).
set -u
py=$1
export_script=$2
data=$3
shift 3
skip() { exec "$py" -c "import sys; print(sys.argv[1]); sys.exit(77)" "$1"; }
"$py" -c "import sklearn" 2>/dev/null ||
  skip "scikit-learn is not importable by $py: skipped (python3 -m pip install scikit-learn)"
wrap=()
extra=()
if [ -n "${TLRT_UNDER_VALGRIND:-}" ]; then
  [ "$1" = "$py" ] && skip "Python example: skipped under valgrind"
  wrap=(valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect)
  extra=(--epochs "${DIGITS_VALGRIND_EPOCHS:-2}" --target 0)
  [ -n "${DIGITS_VALGRIND_SUBSET:-}" ] && extra+=(--subset "$DIGITS_VALGRIND_SUBSET")
fi
# In a sanitizer build (DIGITS_SANITIZER_EPOCHS set by meson) a native COMMAND runs that many
# epochs with no accuracy target.
if [ -z "${TLRT_UNDER_VALGRIND:-}" ] && [ -n "${DIGITS_SANITIZER_EPOCHS:-}" ] && [ "$1" != "$py" ]; then
  extra=(--epochs "$DIGITS_SANITIZER_EPOCHS" --target 0)
fi
"$py" "$export_script" "$data" || exec false
exec "${wrap[@]+"${wrap[@]}"}" "$@" "${extra[@]+"${extra[@]}"}" "$data"
