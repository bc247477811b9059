#!/usr/bin/env bash
# One scripted GPU run (DESIGN section 5): build with CUDA, run the whole test suite (parity must
# run, not skip), compute-sanitizer over the parity tests, the exhaustive host/device math check,
# and the benchmarks. Logs go to $OUT (default ./gpu-out); a summary table is printed last.
#   scripts/gpu-check.sh [--quick]        (--quick: strided math check, shorter benchmarks)
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
quick=0; [ "${1:-}" = "--quick" ] && quick=1
summary=()
note() { summary+=("$1"); echo "== $1"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
git rev-parse --short HEAD 2>/dev/null | tee -a "$OUT/gpu.txt"

# Meson: use the machine's, else a carried wheel (.whl/meson-*.whl).
if ! command -v meson >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/mesonpkg .whl/meson-*.whl || exit 1
  export PYTHONPATH=/tmp/mesonpkg${PYTHONPATH:+:$PYTHONPATH}
  meson() { python3 -m mesonbuild.mesonmain "$@"; }
fi

B=build-gpu
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
rm -rf "$B"
if meson setup "$B" -Dcuda=enabled -Dgpu_arch="$arch" -Dbuildtype=release >"$OUT/setup.log" 2>&1 &&
   ninja -C "$B" >"$OUT/build.log" 2>&1; then
  note "build: ok (sm_$arch)"
else
  note "build: FAILED"; tail -40 "$OUT/setup.log" "$OUT/build.log"; exit 1
fi

meson test -C "$B" --num-processes 8 --logbase gpu >"$OUT/test.log" 2>&1
cp "$B/meson-logs/gpu.txt" "$OUT/testlog.txt" 2>/dev/null
note "meson test: $(grep -E '^(Ok|Fail|Skipped|Timeout):' "$OUT/test.log" | tr -s ' ' | tr '\n' ' ')"
grep -E '^ *[0-9]+/[0-9]+ .*(FAIL|SKIP|TIMEOUT|ERROR)' "$OUT/test.log" | head -20

# compute-sanitizer over every parity test binary (any finding -> non-zero exit).
for t in "$B"/tests/parity/test_*; do
  [ -x "$t" ] || continue
  for tool in memcheck racecheck initcheck synccheck; do
    name=$(basename "$t")-$tool
    if compute-sanitizer --tool $tool --error-exitcode 99 "$t" >"$OUT/sanitizer-$name.log" 2>&1; then
      note "compute-sanitizer $tool $(basename "$t"): clean"
    else
      note "compute-sanitizer $tool $(basename "$t"): FINDINGS (rc=$?)"; tail -30 "$OUT/sanitizer-$name.log"
    fi
  done
done

# Host vs device shared math, bit for bit.
if [ -x "$B/tests/parity/math_exhaustive" ]; then
  stride=1; [ $quick = 1 ] && stride=257
  if "$B/tests/parity/math_exhaustive" $stride >"$OUT/math_exhaustive.log" 2>&1; then
    note "shared math host==device over all inputs (stride $stride): ok"
  else
    note "shared math host==device (stride $stride): MISMATCH"; cat "$OUT/math_exhaustive.log"
  fi
fi

# Benchmarks against PyTorch in the same process.
if [ -f bench/elementwise.py ]; then
  TORCHLEAN_RT_LIB=$PWD/$B/libtorchlean_rt.so TORCHLEAN_RT_INCLUDE=$PWD/abi \
    python3 bench/elementwise.py --out "$OUT/bench_elementwise.md" >"$OUT/bench.log" 2>&1 \
    && note "bench: ok" || { note "bench: FAILED"; tail -30 "$OUT/bench.log"; }
  cat "$OUT/bench_elementwise.md" 2>/dev/null
fi

echo; echo "==== summary"; printf '%s\n' "${summary[@]}"
