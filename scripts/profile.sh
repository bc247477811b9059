#!/usr/bin/env bash
# Nsight Compute over one launch of one kernel of a benchmark run, on the GPU machine: where the
# time of a kernel that misses its target goes (DRAM bytes against the nominal count, L2 hit rate,
# issue activity, the stall reasons), without changing the clocks (--clock-control none, as the
# device notes require). The full report goes to $OUT/ncu-NAME.txt; a few lines are printed.
#
#   scripts/profile.sh NAME KERNEL_REGEX SKIP COMMAND...
#     NAME          label of the report ($OUT/ncu-NAME.txt)
#     KERNEL_REGEX  ncu --kernel-name regex (e.g. sep_kernel, fused_pipe_bwd, dkdv_kernel)
#     SKIP          launches of matching kernels to skip first (warm-ups)
#   e.g. TORCHLEAN_RT_LIB=$PWD/build-gpu/libtorchlean_rt.so \
#        scripts/profile.sh pool sep_kernel 2 python3 bench/pool.py --only k3_s1_p1 --iters 3
# Environment: PROFILE_TIMEOUT (seconds, default 150), OUT (default ./gpu-out).
set -u
[ $# -ge 4 ] || { sed -n '2,13p' "$0"; exit 2; }
name=$1 kre=$2 skip=$3
shift 3
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
rep="$OUT/ncu-$name.txt"
timeout "${PROFILE_TIMEOUT:-150}" ncu --clock-control none --kernel-name "regex:$kre" \
  --launch-skip "$skip" --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
  --section SchedulerStats --section Occupancy --section LaunchStats \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum \
  "$@" >"$rep" 2>&1
rc=$?
echo "== ncu $name ($kre): rc=$rc, report $rep"
grep -E "^  [A-Za-z_].*\(|Duration|DRAM Throughput|dram__bytes_(read|write)\.sum|lts__t_sector_hit_rate|smsp__inst_executed\.sum|L1/TEX Hit|L2 Hit Rate|Issue Slots Busy|No Eligible|Achieved Occupancy|Registers Per Thread|Warp Cycles Per Issued|Stall" "$rep" | head -30
exit $rc
