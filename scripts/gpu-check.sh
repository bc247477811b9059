#!/usr/bin/env bash
# Scripted GPU run (DESIGN section 5): build with CUDA, run the whole test suite (parity must run,
# not skip), compute-sanitizer over the parity tests, the exhaustive host/device math check, and
# the benchmarks against PyTorch. Logs go to $OUT (default ./gpu-out); a summary is printed last.
#
#   scripts/gpu-check.sh [STEP...]     steps: build test digits memcheck sanitizers mma math hostcost bench
#                                      (default: all, in that order; a step needs the build;
#                                      `parity` runs only the parity suite; `profile`, run only
#                                      when named, is described at its step below)
# BENCHES: the bench/<name>.py to run (default: elementwise reduce layout index softmax blas).
# Environment: MATH_STRIDE (default 1 = all 2^32 inputs), PARITY_SANITIZE_MAX_N (default 4097),
# SANITIZE_ONLY (a shell pattern over the test binaries' names, default: all of them).
set -u
shopt -s extglob  # SANITIZE_ONLY may be a pattern like "*_@(fft|scan)"
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
steps=${*:-build test memcheck sanitizers mma math hostcost bench}
has() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }
summary=()
note() { summary+=("$1"); echo "== $1"; }
B=build-gpu

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

# Meson: use the machine's, else a carried wheel (.whl/meson-*.whl).
if ! command -v meson >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/mesonpkg .whl/meson-*.whl || exit 1
  export PYTHONPATH=/tmp/mesonpkg${PYTHONPATH:+:$PYTHONPATH}
  meson() { python3 -m mesonbuild.mesonmain "$@"; }
fi

# A build directory left by an earlier call on a still-warm machine is rebuilt incrementally.
if has build || [ ! -f "$B/build.ninja" ]; then
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
  [ -f "$B/build.ninja" ] || { rm -rf "$B"; meson setup "$B" -Dcuda=enabled -Dgpu_arch="$arch" \
                                 >/tmp/setup.log 2>&1; }
  if [ -f "$B/build.ninja" ] && ninja -C "$B" >/tmp/build.log 2>&1; then
    note "build: ok (sm_$arch)"
  else
    note "build: FAILED"; tail -40 /tmp/setup.log /tmp/build.log; exit 1
  fi
fi

# Only the parity suite (quicker than `test` while iterating on kernels); PARITY_TESTS: test names
# (e.g. "parity_pool parity_attention") instead of the whole suite.
if has parity; then
  meson test -C "$B" --suite parity --num-processes 2 --print-errorlogs ${PARITY_TESTS:-} \
      >/tmp/parity.log 2>&1
  cp /tmp/parity.log "$OUT/parity${PARITY_TAG:+-$PARITY_TAG}.log"  # PARITY_TAG: one log per run
  note "parity${PARITY_TAG:+ [$PARITY_TAG]}: $(grep -E '^(Ok|Fail|Skipped|Timeout):' /tmp/parity.log | tr -s ' ' | tr '\n' ' ')"
  grep -E 'MISMATCH|FAIL' /tmp/parity.log | head -40
fi

if has test; then
  meson test -C "$B" --num-processes 4 --logbase gpu --print-errorlogs >/tmp/test.log 2>&1
  cp /tmp/test.log "$OUT/test.log"
  note "meson test: $(grep -E '^(Ok|Fail|Skipped|Timeout):' /tmp/test.log | tr -s ' ' | tr '\n' ' ')"
  grep -E '^ *[0-9]+/[0-9]+ .*(FAIL|SKIP|TIMEOUT|ERROR)' /tmp/test.log | head -20
fi

# The digits examples on the GPU (the device has no scikit-learn: the data file exported on the
# build machine travels in .gl/digits.bin, carried).
if has digits && [ -f .gl/digits.bin ]; then
  for ex in digits_mlp digits_cnn; do
    if "$B/examples/$ex" --cuda .gl/digits.bin >"$OUT/$ex-cuda.log" 2>&1; then
      note "$ex --cuda: ok ($(tail -1 "$OUT/$ex-cuda.log"))"
    else
      note "$ex --cuda: FAILED"; tail -5 "$OUT/$ex-cuda.log"
    fi
  done
fi

# compute-sanitizer over every parity test binary (any finding -> non-zero exit). Sizes are capped
# to keep the instrumented runs short; the full sizes ran uninstrumented in `test`.
sanitize() {
  for t in "$B"/tests/parity/test_* "$B"/tests/grad/test_*; do
    [ -f "$t" ] && [ -x "$t" ] || continue
    case "$(basename "$t")" in ${SANITIZE_ONLY:-*}) ;; *) continue ;; esac
    for tool in "$@"; do
      log=/tmp/sanitizer-$(basename "$t")-$tool.log
      TLRT_PARITY_MAX_N=${PARITY_SANITIZE_MAX_N:-4097} timeout 240 \
          compute-sanitizer --tool "$tool" --error-exitcode 99 "$t" >"$log" 2>&1
      rc=$?
      if grep -q "terminated before first instrumented API call" "$log"; then
        # A test that made no CUDA call (a CPU-only grad test) leaves the sanitizer nothing to check.
        note "compute-sanitizer $tool $(basename "$t"): no CUDA call to check (test exit as logged)"
      elif [ $rc -eq 0 ]; then
        note "compute-sanitizer $tool $(basename "$t"): clean ($(grep -o 'ERROR SUMMARY.*' "$log" | tail -1))"
      elif [ $rc -eq 124 ]; then
        note "compute-sanitizer $tool $(basename "$t"): TIMED OUT after 240 s (no finding before)"
      else
        note "compute-sanitizer $tool $(basename "$t"): FINDINGS or failure (rc=$rc)"
        tail -30 "$log"
      fi
      { echo "#### $tool $(basename "$t")"; cat "$log"; } >>"$OUT/sanitizer.log"
    done
  done
}
has memcheck && sanitize memcheck
has sanitizers && sanitize racecheck initcheck synccheck

# The warp-level TF32 primitives (cuda/common/mma_tf32.cuh) on the tensor cores: the fragment layouts
# the emulator assumes, checked on the device.
if has mma; then
  if nvcc -std=c++17 -arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.') \
       -I. scripts/mma_check.cu -o /tmp/mma_check >"$OUT/mma_check.log" 2>&1 &&
     /tmp/mma_check >>"$OUT/mma_check.log" 2>&1; then
    note "mma primitives: $(tail -1 "$OUT/mma_check.log")"
  else
    note "mma primitives: FAILED"; tail -20 "$OUT/mma_check.log"
  fi
  # The warpgroup primitives (cuda/common/wgmma_tf32.cuh, sm_90a only): layouts and raw product rate.
  if [ "$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)" = "9.0" ]; then
    if nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -I. scripts/wgmma_check.cu \
         -o /tmp/wgmma_check >"$OUT/wgmma_check.log" 2>&1 &&
       /tmp/wgmma_check >>"$OUT/wgmma_check.log" 2>&1; then
      note "wgmma primitives: $(tail -1 "$OUT/wgmma_check.log")"
    else
      note "wgmma primitives: FAILED"; tail -20 "$OUT/wgmma_check.log"
    fi
  fi
fi

# Host vs device shared math, bit for bit.
if has math && [ -x "$B/tests/parity/math_exhaustive" ]; then
  stride=${MATH_STRIDE:-1}
  if timeout 420 "$B/tests/parity/math_exhaustive" "$stride" >"$OUT/math_exhaustive.log" 2>&1; then
    note "shared math host == device (stride $stride): ok"
  else
    note "shared math host == device (stride $stride): MISMATCH or failure"
  fi
  cat "$OUT/math_exhaustive.log"
fi

# Host cost of small ops from C++ (and the raw CUDA calls they are made of).
if has hostcost && [ -x "$B/bench/host_cost" ]; then
  "$B/bench/host_cost" --cuda --calls 2000 | tee "$OUT/host_cost.md"
  "$B/bench/host_cost" --calls 2000 | tail -n +3 | tee -a "$OUT/host_cost.md"
fi

# Benchmarks against PyTorch in the same process: bench/<name>.py for each name in BENCHES.
if has bench; then
  for name in ${BENCHES:-elementwise reduce layout index softmax blas}; do
    [ -f "bench/$name.py" ] || continue
    if TORCHLEAN_RT_LIB=$PWD/$B/libtorchlean_rt.so TORCHLEAN_RT_INCLUDE=$PWD/abi timeout 300 \
        python3 "bench/$name.py" --out "$OUT/bench_$name.md" >"$OUT/bench_$name.log" 2>&1; then
      note "bench $name: ok"
    else
      note "bench $name: FAILED"; tail -30 "$OUT/bench_$name.log"
    fi
    cat "$OUT/bench_$name.md" 2>/dev/null
  done
fi

# A/B of two builds (another commit's tree against this one): scripts/ab-builds.sh.

# Nsight Compute on named kernels (scripts/profile.sh): PROFILES, entries "name|kernel regex|skip|
# command" separated by ';', e.g. "pool|sep_kernel|2|python3 bench/pool.py --only k3_s1_p1 --iters 3".
if has profile && [ -n "${PROFILES:-}" ]; then
  IFS=';' read -ra profs <<<"$PROFILES"
  for pr in "${profs[@]}"; do
    IFS='|' read -r pname pre pskip pcmd <<<"$pr"
    # shellcheck disable=SC2086
    TORCHLEAN_RT_LIB="$PWD/$B/libtorchlean_rt.so" OUT="$OUT" scripts/profile.sh "$pname" "$pre" \
      "$pskip" $pcmd
    note "profile $pname: rc=$?"
  done
fi

echo; echo "==== summary"; printf '%s\n' "${summary[@]}"
