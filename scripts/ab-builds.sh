#!/usr/bin/env bash
# A/B of two builds on the GPU machine: the benchmarks of this tree run against two libraries in
# one process session each, alternating, so that both see the same machine state. A is a source
# tree of another commit (BASE, e.g. `git archive <commit> | tar -x -C .base`, carried to the
# machine), B is this tree. Nothing in the library reads a measurement switch: a variant to
# compare is a second build.
#
#   scripts/ab-builds.sh [BENCH...]     (default: every bench/<name>.py but attention_kernels)
#
# Environment: BASE (default .base), ROUNDS (default 2), BENCH_ARGS_<name> (extra arguments for
# bench/<name>.py, e.g. BENCH_ARGS_pool="--quick"), OUT (logs and tables; default ./gpu-out).
# Builds: build-base (BASE's library) and build-gpu (this tree's, shared with scripts/gpu-check.sh),
# each configured for the device's architecture only and built if missing or stale.
set -u
OUT=${OUT:-$PWD/gpu-out}
BASE=${BASE:-.base}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')

build() {  # build SRC DIR: the library of SRC in DIR
  local src=$1 dir=$2
  [ -f "$dir/build.ninja" ] ||
    meson setup "$dir" "$src" -Dcuda=enabled -Dgpu_arch="$arch" >"$OUT/setup-$(basename "$dir").log" 2>&1 ||
    { echo "setup of $src failed"; tail -20 "$OUT/setup-$(basename "$dir").log"; return 1; }
  ninja -C "$dir" libtorchlean_rt.so.1.0.0 >"$OUT/build-$(basename "$dir").log" 2>&1 ||
    { echo "build of $src failed"; tail -40 "$OUT/build-$(basename "$dir").log"; return 1; }
}
build "$BASE" "$PWD/build-base" || exit 1
build . build-gpu || exit 1

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in bench/*.py; do
    n=$(basename "$f" .py)
    case "$n" in common | attention_kernels) continue ;; esac
    names+=("$n")
  done
fi
for n in "${names[@]}"; do
  argvar="BENCH_ARGS_$n"
  for r in $(seq 1 "$ROUNDS"); do
    for side in base gpu; do
      lib="$PWD/build-$side/libtorchlean_rt.so"
      label=$([ "$side" = base ] && echo A || echo B)
      # shellcheck disable=SC2086
      TORCHLEAN_RT_LIB=$lib TORCHLEAN_RT_INCLUDE=$PWD/abi timeout 300 \
        python3 "bench/$n.py" ${!argvar:-} --out "$OUT/ab_${n}_${label}${r}.md" \
        >"$OUT/ab_${n}_${label}${r}.log" 2>&1
      echo "== $n [$label round $r]: rc=$?"
    done
  done
done
