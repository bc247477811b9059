// CUDA backend, pooling (max, average, smooth max), forward and backward: the definitions of
// abi/tlrt_pool.h with the per-window arithmetic of core/numerics/pool_ops.hpp, the same code the
// CPU backend runs, so results agree bit for bit. Built with -fmad=false; divisions are __fdiv_rn;
// exp / log are the shared float32 functions. No atomics anywhere (the deterministic and the fast
// mode are one path); everything on the library stream; the geometry travels as a kernel
// parameter (pool::Dims by value: no device copy of the dims, no synchronisation).
//
// Two families of kernels. FAST kernels (bodies in cuda/kernels/pool.cuh, executed on the CPU over
// their whole grid by tests/unit/test_pool_kernels.cpp) for rank 2 and 3, 32-bit indices and the
// compiled configurations of the last two axes (k2 s2 p0, k3 s2 p1, k3 s1 p1); GENERIC kernels
// (below, any rank and geometry, 32- or 64-bit indices, rank 1, 2, 3 and any instantiated) for
// everything else. Bytes below: 4 (|x| + |y|) forward, 4 (2 |x| + |y|) max / smooth backward,
// 4 (|x| + |y|) average backward (the benchmark's nominal bytes).
//
// fast_fwd_kernel: one thread per 4 consecutive outputs of an output row: it loads the
//   3 SW + KW input columns its 4 windows span, window row by window row (float4 loads when the
//   rows are 16-byte aligned: 3 per row for k3 s2 p1), so neighbouring windows share loads through
//   registers; max is a strict '>' select taken rows first (the first maximum of each window row,
//   then the first largest of those: the same first maximum as the row-major walk, -0 / +0
//   included) with partial selects shared by neighbouring windows, plus one NaN flag per thread
//   (a rare second walk finds a window's first NaN); average a sum with padding read as -0 (the
//   identity), float4 stores. Index math: 2 or 3 multiply-shift divisions per thread.
//   k3 s1 max: 26 selects per 4 outputs (was 36 selects and 36 per-window NaN tests).
//   The KH rows of a window row are all loaded before any is used (pool::fast::for_loaded_rows:
//   rows outside the input are rows of the identity, -inf / -0, with no load and no branch): the
//   per-row branch of the previous revision made the compiler issue a row's loads, wait for
//   them, compute, then the next row (SASS: 3 round trips to memory per thread at KH = 3); now
//   all 9 loads of a k3 thread are in flight together. Max takes maxNum first (FMNMX, one
//   instruction where the select was FSETP + FSEL) and redoes the exact select pass only in a
//   thread with a zero result (maxNum may return either zero; equal nonzero floats have equal
//   bits). Registers (sm_90, rank 2): max k3 s1 46 -> 48 (5 blocks per SM either way), k3 s2
//   44 -> 61 (5 -> 4 blocks), average k3 s1 27 -> 32; rank 3 max lost its 4-24 byte spills.
// scatter_kernel (backward, disjoint windows: stride >= kernel on every axis, e.g. k2 s2 and 3-D
//   k2 s2): one thread per VS = 4 / SW windows (2 at k2 s2) computes their statistic from x once
//   (the selected cell; dy / divisor; pivot and sum) and writes its whole slab of dx, zeros
//   included, one float4 per slab row: a warp's store instruction covers 512 contiguous bytes
//   (whole 128-byte lines) where the 4-window thread's two float4s per row each covered half of
//   every 32-byte sector of 1 KB; the last group of a row is a float4 too when IW = W SW (it was
//   scalar: 1/14 of the threads at 112 columns). x and dy read once, dx written once, no scratch.
// stream_kernel (backward, overlapping rank-2 windows with one stride S on both axes, S | 4: k3 s1
//   p1 and the stem's k3 s2 p1; max and average, except max k3 s1 p1, which is sep_kernel's since
//   session 8 and only its since session 9, band_kernel's on most planes since session 16: the max
//   s1 figures below are that removed form's record): one thread per 4 columns of a run of at most
//   16 rows of a plane walks the window rows oh in increasing order: per window row it reads its NW
//   dy values (6 for s1, 3 for s2) and, for max, the S new x rows (8 or 7 columns: a float4 and
//   its halo), keeps per input row each window's first maximum (value, column) and per window
//   row the KH x 4 dx accumulators in registers, adds the window terms to the cells in output
//   order, and writes the S rows finished (a float4 each). No shared memory, no barrier; x and dy
//   are read once plus a halo of KH - S rows per run (L2: 1.25x at 56 rows in runs of 8) and a
//   few columns (L1); dx written once. Each thread prefetches (prefetch.global.L2 and .L1: no
//   register, no result) the dy row and, for max, the S new x rows of the next window row
//   (stream_ahead: 1 for every kind and stride, measured below): before, a thread had one window row of
//   loads in flight and only while not computing, 12-20 KB per SM (max s1: 3 blocks x 256 threads
//   x 32 B; average s1: 5 x 256 x 16 B) where an H100 needs ~40-64 KB; now ~48-82 KB per SM
//   are requested ahead and the demand loads hit L1 / L2. Max adds only the selected cell's dy
//   (ISETP + predicated FADD per cell and window, was ISETP + FSEL + FADD), keeps the per-row
//   positions as a KW + j nibbles (a row shift is one subtraction) and one NaN flag per row
//   (the rare window with a NaN finds it again from x). SASS of the max s1 loop, hot path (no
//   NaN, float4 rows): ~430 -> ~410 instructions per window row of 4 cells, i.e. ~100 per cell
//   for 12 bytes: at 3 TB/s an SM must retire ~1.1 cells per cycle, ~3.5 of its 4 warp
//   instructions per cycle, so max s1 is nearly issue-bound (average s1: ~210 per window row,
//   half of them its 6 correctly rounded divisions, now without a branch each; 8 bytes per cell:
//   ~2.6 of 4 per cycle). Registers, sm_90 (launch bounds per kind and stride keep the resident
//   blocks): max s1 78 (3 blocks), s2 61 (4); average s1 48 (5), s2 40 (6); no spills.
// tile_kernel (backward, the other overlapping rank-2 windows: unequal strides, smooth max): one
//   block per tile of tr x 4 tx input cells of one plane. Phase 1: one thread per window of the
//   tile's covering grid (at most (tr + 2) (4 tx + 2) windows: < 24.7 KB of shared memory for
//   smooth's 12 bytes per window) stores dy with the selected cell's position in the window
//   (max), dy / divisor (average) or dy, pivot and sum (smooth). Phase 2: one thread per 4 cells
//   of a row sums, in output order, the terms of the windows containing each cell: dx is written
//   once, x and dy read once plus the halo windows (about 20% for these tiles, from L2).
// SESSION 7 (stream kernel only; what limits the overlapping backward, from SASS / ptxas -v of
//   sm_90, no GPU run): max k3 s1 p1 ~400 instructions on the hot path per window row of 4 cells
//   (~100 per cell, 12 nominal bytes): ~2.7 of an SM's 4 warp instructions per cycle at 0.80 of
//   copy bandwidth, with 24 warps per SM (77-80 registers, 3 blocks): issue-bound. Its window
//   rows: ~115 row loads and first maxima of the new x row (8 columns, 6 windows), ~125 the
//   cross-row select of 6 windows and the NaN flags, ~80 the 36 compare + predicated adds of the
//   terms, ~25 register moves of the rows carried to the next window row, the rest addresses,
//   prefetch and the float4 store; the rare NaN rescan (6 x ~100) is skipped. Average k3 s1:
//   ~210 per window row of which ~115 the 6 __fdiv_rn (~19 each with range check and slow-path
//   branch). Memory: bytes in flight per SM max s1 3 x 256 x (32 B x + 24 B dy) = 43 KB plus 2
//   window rows of prefetch, average s1 5 x 256 x 24 B = 31 KB plus 3 rows; halo of a run of 14
//   rows: x rows 18 / 14 (1.29x), dy rows 16 / 14 (1.14x), mostly L1 / L2 hits (the runs of a
//   plane are neighbouring threads of one block); columns: 8 x and 6 dy values per 4 cells, the
//   halo columns in the neighbours' lines (L1). Stores: one float4 per thread and row, a warp
//   writes 224-byte row segments (whole 32-byte sectors; lines completed in L2 by the next
//   row's store). Changes:
//   - average with count_include_pad: dy / 9 by div_by (FMUL, FFMA, FFMA, FSETP, FSEL: equal to
//     '/' on all 2^32 floats, checked exhaustively on the CPU; not true for every divisor, 6
//     fails on subnormals, so only div_by_verified's list), in a loop instantiated for it (a
//     run-time choice inside the loop kept both divisions and a branch around each). Static
//     loop k3 s1 432 (both divisions) -> 205 (div_by) instructions, k3 s2 233 -> 168.
//   - max: each row's per-window first maximum starts from the window's first column (not from
//     -inf with the first real column; the cross-row select never takes a row where that
//     differs); the cross-row select is maxNum over the rows, then the first row equal to it
//     (its packed positions selected whole, unpacked once): k3 s1 loop 1052 -> 1023
//     instructions (hot path ~400 -> ~370), registers 78 -> 79 (cap 80); k3 s2 709 -> 699,
//     62 -> 56. Average: s1 48 registers (unchanged), s2 39 -> 40. No spills (ptxas -v).
//   - the prefetch distance a plan value (Plan::ahead); the session's measurement switches
//     (TLRT_POOL_STREAM_ROWS, TLRT_POOL_STREAM_AHEAD, the build's TLRT_POOL_AHEAD) are gone
//     again, the emulation test sets both through pool::fast::StreamOpt. Distance now 1 for
//     every kind and stride (was: stride 1 max 2, average 3; stride 2 none), from the
//     measurement below.
//   Tried and dropped: rotating the carried rows' registers instead of moving them (the window-
//   row loop unrolled over the 3 rotations): ptxas spilled 4-64 bytes in every stream kernel.
//   PREDICTED (H100, fraction of copy bandwidth): average backward k3 s1 p1 0.72 -> ~0.82, stem
//   0.77 -> ~0.80 (fewer instructions per byte; the rest unchanged); max backward k3 s1 p1 0.68
//   -> ~0.70, stem 0.77 -> ~0.78 (still issue-bound: max k3 s1 stays short of 0.80).
//   MEASURED (H100, 2026-11-24, bench/pool.py backward, fraction of copy bandwidth; parity
//   bitwise): at the then defaults max k3 s1 p1 0.69 (was 0.68), average 0.73 (0.72), max stem
//   0.76 (0.77), average stem 0.78 (0.77); the average's fewer instructions showed only with
//   less prefetch (0.77 at distance 0 or 1, predicted ~0.82). Prefetch distance 0 / 1 / 2 / 3 / 4:
//   max s1 0.65 / 0.70 / 0.70 / 0.69 / 0.66, average s1 0.77 / 0.77 / 0.76 / 0.74 / 0.69, max
//   stem 0.77 / 0.78 / 0.69 / 0.63 / 0.61, average stem 0.78 at 0 and 1 -> distance 1 for all
//   (expected: max s1 0.70, average s1 0.77, max stem 0.78, average stem 0.78).
// SESSION 7, continued (max stream backward): two COLUMNS-FIRST variants of the max stream
//   kernel were written, checked bitwise in emulation and measured, and REMOVED (in history:
//   commits eff5d67, 10591a5): per column the first row of its largest value, then per window
//   the first of its columns holding the window's largest (a column is shared by KW windows),
//   with 4 (V1, 79 registers) or 8 columns per thread (V2, 127 registers, 2 blocks per SM).
//   SASS per dx cell, max s1: V0 (this kernel) 106, V1 99, V2 78; max s2 43 / 43 / 26.
//   PREDICTED max k3 s1 / stem: V1 ~0.72 / ~0.78, V2 ~0.76 / ~0.80. MEASURED (H100, 2026-11-24,
//   20 calls): V0 0.71 / 0.79, V1 0.69 / 0.79, V2 0.67 / 0.80: fewer instructions did not
//   turn into bandwidth (V2 halves the warps per SM). What stays per window row: 36 compares +
//   predicated FADDs of the terms (every cell tests its KH x KW windows), ~40 register moves of
//   the rows and accumulators carried to the next window row (unrolling by 3 to rename them
//   spilled 472 bytes at the 80-register cap), the loads and their addresses.
//   Average k3 s1 p1 (analysis): its hot path is ~34 SASS instructions per cell (36 FADD per 4
//   cells, 12 of them the new row's +0 + term; 30 for the 6 div_by; ~25 addresses and prefetch;
//   ~20 loads, stores and selects; ~10 loop): ~1.7 of 4 warp instructions per cycle at copy
//   bandwidth, not issue-bound. Left: 1792 blocks at 5 per SM = 2.7 waves (the last 72% full)
//   and the dy halo of 2 rows per run of 14. RUNS OF 8 ROWS (kStreamRows 16 -> 8: 3136 blocks,
//   4.75 waves, dy halo 1.25x), predicted ~0.80-0.82 for the average; MEASURED (H100,
//   2026-11-24, same build otherwise): average k3 s1 0.80 -> 0.82, max stem 0.79 -> 0.85,
//   average stem 0.79 -> 0.84, max k3 s1 0.71 -> 0.70: kept for every kind and stride.
// SESSION 8 (max k3 s1 p1 backward, issue 7: 0.146 ms = 0.70 of copy bandwidth, target <= 0.128
//   ms = 0.80): sep_kernel (pool::fast::sep_body), the default from then on and since session 9
//   the only form (below), same thread decomposition as the stream kernel (4 columns of a run of
//   8 rows), bitwise the same sums (tests/unit/test_pool_kernels: every stream geometry, ties /
//   zeros / -inf / every distribution, run heights 1 2 3 5 8 4096, prefetch distances 0 1 2 8).
//   What changes per window row (details at sep_body):
//   - row-first argmax with 3 shared pairs per new input row: 9 first-max steps (FSETP, FSEL,
//     SEL) for the 6 windows; the cross-row choice 2 FSETP + 3 SEL per window; left / top padding
//     a NaN sentinel that loses every '!(e >= l)' compare (no -inf / first-real-cell fix-up),
//     real NaNs found by 4 FSETP.NAN per row and sent to an exact rescan (rare, off the path);
//   - codes are absolute byte offsets into a per-thread ring of 4 dx rows x 8 columns in shared
//     memory (slot-major, thread-minor: conflict-free at any slot mix), the loop unrolled by 4 so
//     every ring row is a constant; each window's term is ONE scatter, ring[code] += dy (IADD,
//     LDS, FADD, STS), in output order, where stream_run tested every (cell, window) pair (36
//     ISETP + 36 predicated FADD) and moved its accumulator registers;
//   - the plane's bottom -inf row is a separate last step (no row-range test in the loop).
//   SASS (sm_90, float4 body, hot path of one loop step = one window row of 4 cells, no NaN):
//   ~167 instructions (FSETP 26, SEL 21, FSEL 15, LDS 10, STS 10, FADD 6, LDG 6 + CCTL 4, the
//   rest addresses, loop and row writes) against ~400 for stream_kernel's max s1: ~42 per cell
//   (12 nominal bytes) where the average k3 s1 backward (~34 per cell, 8 bytes) measures 0.82.
//   78 registers (cap 80: 3 blocks per SM as before), no spill; sm_80 / sm_89 no spill (the
//   scalar body, odd widths only, spills 40 bytes on sm_90).
//   32 KB shared memory per block (96 KB per SM at 3 blocks). Shared-memory traffic per window
//   row and warp: 12 scatter accesses + 8 for the finished row, ~20 wavefronts of 128 B.
//   TLRT_POOL_BWD=sepfw (removed in session 9): the same kernel with the FORWARDED scatter (the 6
//   LDS issued together, a window's sum taken from the previous window's when their codes are
//   equal, which is the only possible alias: proof at sep_body in commit 22ffc5d), no dependent
//   shared-memory chain; ~175 instructions per window row (5 ISETP + 5 FSEL more), 78 registers,
//   no spill.
//   PREDICTED (H100, bench/pool.py k3 s1 p1 (32, 256, 56, 56) max backward, 0.146 ms = 0.70
//   today): no longer issue-bound (~1.2 of 4 warp instructions per cycle at copy bandwidth):
//   sep ~0.82 of copy bandwidth (~0.125 ms), if the 24 resident warps hide each thread's chain
//   of 6 dependent LDS -> FADD -> STS (~200 cycles per window row); sepfw ~0.82 too (~0.125 ms),
//   the better of the two if the chain is not hidden.
//   MEASURED (H200, 2026-11-26, same build, bench/pool.py; copy 4255 GB/s): max k3 s1 p1 backward
//   stream 0.141 ms (0.51 of the H200's copy bandwidth), sep 0.117 (0.62), sepfw 0.117 (0.62):
//   -17%, the chain is hidden; the other pooling rows unchanged. sep became the default (the
//   scalar body too: the same bits; odd widths were not timed); TLRT_POOL_BWD=stream / sepfw
//   selected the others. H100 (2026-11-26, bench/pool.py, copy ~3010 GB/s): 0.146 -> 0.136 ms,
//   0.70 -> 0.76 of copy bandwidth (0.32x torch): short of the predicted ~0.82 and of the 0.80
//   target. Next suspects: the 32 KB ring per block (3 blocks per SM, 96 KB of shared memory)
//   and the rings' LDS / STS traffic (~20 wavefronts per window row and warp), not the
//   instruction count.
// SESSION 9: after these measurements both alternatives were REMOVED with their switch
//   TLRT_POOL_BWD: the stream kernel's max k3 s1 p1 form (slower on the H200 and the H100) and
//   sepfw (sep_body's forwarded scatter, its FWD template parameter: equal to sep on the H200, not
//   timed on the H100). Max k3 s1 p1 on the stream path is sep_kernel only (chosen at compile
//   time from the kind and the geometry; the measurement figures above stay as the record of
//   why). Commit 22ffc5d is
//   the last that has them (git show 22ffc5d:cuda/pool.cu, 22ffc5d:cuda/kernels/pool.cuh).
// SESSION 10 (occupancy, the session-8 suspect): three variants of sep_kernel, the same sums bit
//   for bit (the emulation test ran all four on every sep geometry), selected by TLRT_POOL_SEP:
//   compact (the never-read ring slots 0, 1, 6, 7 mapped to one per-thread sink: 17 floats per
//   thread, 17 KB per block, 78 registers, still 3 blocks per SM), occ4 (compact plus a leaner
//   body: 32-bit row indices, carried codes packed two per register; 64 registers, 4 blocks per
//   SM, no spill in the loop) and occ4a2 (occ4 with prefetch distance 2). PREDICTED (H100,
//   (32, 256, 56, 56), from 0.135 ms): compact ~0.134, occ4 ~0.124 (0.83 of copy bandwidth),
//   occ4a2 ~0.120. MEASURED (H100, 2026-11-27, bench/pool.py, one build, one process each): base
//   0.136 ms, compact 0.136, occ4 0.143, occ4a2 0.147: more warps per SM made it SLOWER, so
//   neither the ring's shared memory nor the occupancy is what holds it at 0.76; all three were
//   removed (branch poolsep, commit 83ab6ac, has them). Then REGISTER DOUBLE-BUFFERING (branch
//   pooldb, commit eb46120): the float4 body loading the next window row's x (float4 + halos) and
//   dy into registers during the current step (the prefetch instruction dropped at distance 1),
//   same bits (emulation test), as db (80 registers, 36 / 188 bytes of spill) and db2 (2 blocks
//   per SM, 100 registers, no spill). PREDICTED db ~0.128 ms, db2 ~0.138. MEASURED (H100,
//   2026-11-27, same build): base 0.137, db 0.146, db2 0.148: slower, removed. Neither fewer
//   warps with more loads each nor more warps moved it: 0.76 of copy bandwidth stays.
// SESSION 15 (no GPU time in that session: written, emulated, not measured). A new suspect for
//   the 0.76, from the figures above rather than a guess at the code: the H200 runs sep_kernel in
//   0.117 ms, 0.62 of ITS copy bandwidth but 0.875 of the H100's, so the SM side allows ~0.875 on
//   an H100; what costs the H100 the rest is on the memory side. The kernels without a halo
//   (the forward, 0.87; the disjoint scatter backward, 0.93) do not lose it, the run kernels do:
//   a run of 8 dx rows reads 10 x rows and 10 dy rows, and the 4 x rows and 2 dy rows it shares
//   with the run above are read by this run at its START and by the run above at its END, ~8
//   window rows later, when ~39 MB have streamed through a 50 MB L2 (8 steps x ~101k resident
//   threads x 48 B). If most of those second reads miss, DRAM moves ~1.15x the nominal bytes:
//   308 MB x 1.15 / (3.0 TB/s x ~0.9) = ~0.131 ms, close to the measured 0.136.
//   HINT form (sep_body<C, VEC, true>, TLRT_POOL_SEP=hint, read per call): the shared rows' first
//   reads take the L2 policy evict_last, every other load and the dx stores evict_first (a policy
//   on an access sets the line's priority, hits included). Same values (a hint): the emulation test
//   runs it on every sep geometry and input. ptxas (sm_90, float4 body): 80 registers, 4 bytes of
//   spill (one reload per window row), ~+8% instructions (the per-step policy select, R2UR).
//   PREDICTED (H100, bench/pool.py k3 s1 p1 backward): 0.136 -> ~0.12 ms (0.85 of copy bandwidth)
//   if the halo misses are the cause; unchanged (or up to 5% slower) if not; H200 ~unchanged
//   (SM-bound there). ncu's dram__bytes_read.sum on the plain form decides it: ~205 MB read means
//   no halo misses and this suspect is wrong; ~240 MB confirms it.
//   BAND form (band_kernel, TLRT_POOL_SEP=band; pool::fast::band_plan / band_stage / band_run):
//   the same sep_core, but one block of 128 threads per band of a plane (the whole plane where x
//   and dy fit in 25 KB: 56 x 56 is one band; else bands of >= 4 rows), whose x and dy rows are
//   first copied into shared memory, all in flight at once (cp.async, 16 bytes), then run as runs
//   of rh rows from there: no halo re-read from L2 / DRAM inside a band, no prefetch, and the
//   loads of a step come from shared memory (~30 cycles, not ~600). 41 KB of shared memory per
//   block (rings included): 5 blocks, 20 warps per SM; ptxas (sm_90): 72 registers (float4), no
//   spill. (sep_core's NaN rescan now stores its code through a static select: a dynamic index
//   had put code[] in local memory in this kernel; sep_kernel 78 -> 80 registers, no spill.)
//   PREDICTED (H100): ~0.12 ms (0.85 of copy bandwidth) if the halo misses are the cause, as the
//   HINT form; H200: better than sep_kernel's 0.117 if its per-step load latency is what holds it
//   there (the staging then overlaps across the 5 blocks of an SM), worse if the 20 warps are too
//   few to overlap staging and compute.
// SESSION 16, MEASURED (H100, 2026-11-27, bench/pool.py k3 s1 p1 (32, 256, 56, 56), one build;
//   bench/results/2026-11-27-h100-s16-pool.md): sep_kernel 0.136 ms (0.76 of copy bandwidth), HINT
//   0.148 (0.70), BAND 0.110 (0.93, 0.25x PyTorch); sep_kernel with 16 / 28 rows per run 0.143 /
//   0.140. ncu (sep_kernel, the plain form): 215 MB read from DRAM for 205 MB nominal (the halo
//   re-reads mostly hit L2: the session-15 suspect, DRAM misses, was wrong), DRAM busy 68% of the
//   kernel, 12.9 cycles between a warp's instructions: sep_kernel waits on its per-step global
//   loads (one window row ahead), which the band kernel replaces by one burst of cp.async per plane
//   (all of it in flight at once) and shared-memory loads. band_kernel is the default where its
//   runs busy at least half of a block's threads (pool::fast::band_takes; the sweep over plane
//   sizes is in its comment: a 7 x 7 plane keeps 14 of 128 threads busy and is 2.7x slower there);
//   sep_kernel takes the rest (small planes, rows over 512 columns). The HINT form and the
//   TLRT_POOL_SEP / TLRT_POOL_ROWS switches are removed (commit e674b71 has them).
// PREDICTED for the revision before (H100, fraction of copy bandwidth, bench/pool.py shapes;
//   from the bytes in flight per SM and the SASS instruction counts above, not measured):
//   forward max k3 s1 p1 0.78 -> ~0.88 (3 rows in flight per thread instead of 1, FMNMX; the
//   average forward on the same geometry, already 3 rows x 1 branch cheaper, is at 0.91); forward
//   stem / k2 s2 / 3-D unchanged within noise (0.90-0.94; stem max now 4 blocks per SM);
//   backward max / avg k3 s1 p1 0.61 / 0.74 -> ~0.70 / ~0.85, stem k3 s2 p1 0.75 / 0.78 ->
//   ~0.82 / ~0.85 (prefetch; max k3 s1 stays the most instructions per byte, ~410 per window
//   row of 4 cells, so it gains least from the prefetch and stays short of 0.80; it also runs
//   4.5 waves of 396 blocks: the last half wave idles half the SMs);
//   scatter paths and smooth unchanged. If prefetch.global.L1 turns out to be dropped, the L2
//   prefetch alone should still give most of it (-Dcuda_args=-DTLRT_POOL_PREFETCH=2 / =1 / =0
//   compares the hints; -DTLRT_POOL_AHEAD=N overrides the distance).
// Measured (H100, 2026-11-24, bench/results/2026-11-24-h100-pool-ovl.md): forward max k3 s1 p1
//   0.78 -> 0.87 (others 0.92-0.94); backward with prefetch / without: max k3 s1 p1 0.68 / 0.62,
//   average 0.71 / 0.69 (was 0.61 / 0.74), stem max 0.69 / 0.76, average 0.73 / 0.77 (was
//   0.75 / 0.78): the prefetch helps stride 1 and hurts the stem, whose rows the next window row
//   reuses anyway, so stride 2 prefetches nothing (stream_ahead). Short of 0.80: the overlapping
//   backward (max s1 issue-bound as predicted; average s1 lost 0.03 against the previous revision,
//   the branch-free divisions the suspect).
// PREDICTED for the previous revision (stream kernel, H100):
//   forward max k3 s1 p1 0.60 -> ~0.80 (fewer selects and NaN tests per output; the others
//   unchanged); backward max / avg: k2 s2 0.86 / 0.55 -> ~0.88 / ~0.85, 3-D k2 s2 0.70 / 0.41 ->
//   ~0.85 / ~0.80 (whole-line stores), stem k3 s2 p1 0.67 / 0.65 -> ~0.80 / ~0.85 and k3 s1 p1
//   0.39 / 0.53 -> ~0.75 / ~0.82 (stream kernel: one pass, no shared-memory round trip, no
//   barrier; max k3 s1 is the most instructions per byte: ~50 per cell); smooth unchanged.
// MEASURED (H100, 2026-11-24, bench/results/2026-11-24-h100-pool-stream.md, copy 2997 GB/s):
//   forward max k3 s1 p1 0.60 -> 0.78 (others unchanged, 0.90-0.94); backward max / avg: k2 s2
//   0.93 / 0.88, 3-D k2 s2 0.84 / 0.90, stem k3 s2 p1 0.75 / 0.78, k3 s1 p1 0.61 / 0.74; every
//   case 0.10-0.75x PyTorch's time; parity bitwise and compute-sanitizer (4 tools) clean. The
//   scatter kernels now meet their prediction; the stream kernel's max k3 s1 (0.61 against ~0.75)
//   is short: ~50 instructions per cell and 3 blocks per SM (77 registers) without prefetch of
//   the next window row: next, load row oh + 1 before computing row oh.
// MEASURED before this revision (H100, 2026-11-24, bench/results/2026-11-24-h100-pool.md):
//   forward max / avg: stem 0.89 / 0.91, k2 s2 0.92 / 0.92, k3 s1 p1 0.60 / 0.91, 3-D 0.91 / 0.93;
//   backward max / avg: stem 0.68 / 0.65, k2 s2 0.85 / 0.55, k3 s1 p1 0.38 / 0.53, 3-D 0.70 / 0.41;
//   every case 0.12-1.00x PyTorch's time. The scatter kernels wrote dx at only 1.2-1.3 TB/s (avg
//   k2 s2: 103 MB in 78 us) where a plain fill writes 3.1-3.25 TB/s on the same H100: each warp
//   store instruction wrote 16 of every 32 bytes (a thread's slab was 2 float4 wide at k2 s2).
// Last measured, the previous one-thread-per-output kernels (H100, 2026-11-22,
// bench/results/2026-11-22-h100-pool.md): forward 0.26 - 0.76, backward 0.12 - 0.27.
//
// Generic kernels. fwd_kernel: one thread per output cell, grid-stride, windows walked with
// pool::window_of / pool::walk. Backward, deterministic WITHOUT atomics in both modes: one thread
// per INPUT cell gathers the windows that contain it (pool::windows_of: per axis the output range
// [ceil((i + p - k + 1) / s), floor((i + p) / s)]), walking them in output order, so every dx cell
// sums its terms in the order the CPU backend's scatter adds them.
// max_arg_kernel + max_gather_kernel (maxpool_bwd): pass 1, one thread per output cell, writes the
//   selected cell (plane offset of the first maximum / first NaN) to stream-ordered scratch (4 or 8
//   bytes per output); pass 2 gathers dy[w] where arg[w] == cell.
// avg_gather_kernel (avgpool_bwd): dy[w] / D_w over the containing windows (D_w recomputed from
//   the window's extent when count_include_pad is false).
// smooth_stats_kernel + smooth_gather_kernel (smooth_maxpool_bwd): pass 1 writes pivot and S per
//   window (8 bytes per output); pass 2 gathers dy[w] * (exp(b (x - pivot_w)) / S_w).
#include "core/backend/memory.hpp"
#include "core/backend/pool.hpp"
#include "core/numerics/pool_ops.hpp"
#include "cuda/common/cp_async.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/kernels/pool.cuh"

namespace tlrt {
namespace cuda {

namespace {

using pool::Dims;
using pool::fast::Kind;
using pool::fast::kThreads;

// ---- forward ------------------------------------------------------------------------------

template <Kind K, int R, class I>
__global__ void __launch_bounds__(kThreads)
    fwd_kernel(const Dims<I> m, const float *__restrict x, float *__restrict y, bool include_pad,
               float beta) {
  const I total = m.nc * m.out_sp;
  for (I t = (I)blockIdx.x * kThreads + threadIdx.x; t < total; t += (I)gridDim.x * kThreads) {
    const I c = t / m.out_sp, o = t - c * m.out_sp;
    const float *xp = x + (uint64_t)c * m.in_sp;
    float v;
    if (K == Kind::Max)
      v = pool::max_value_window<R>(m, xp, o);
    else if (K == Kind::Avg)
      v = pool::avg_window<R>(m, xp, o, include_pad);
    else {
      float pv, s;
      pool::smooth_window<R>(m, xp, o, beta, &pv, &s);
      v = pool::smooth_out(pv, s, beta);
    }
    y[t] = v;
  }
}

// ---- backward: per-output pass 1 ----------------------------------------------------------------

template <int R, class I>
__global__ void __launch_bounds__(kThreads)
    max_arg_kernel(const Dims<I> m, const float *__restrict x, I *__restrict arg) {
  const I total = m.nc * m.out_sp;
  for (I t = (I)blockIdx.x * kThreads + threadIdx.x; t < total; t += (I)gridDim.x * kThreads) {
    const I c = t / m.out_sp, o = t - c * m.out_sp;
    I a;
    pool::max_window<R>(m, x + (uint64_t)c * m.in_sp, o, &a);
    arg[t] = a;
  }
}

template <int R, class I>
__global__ void __launch_bounds__(kThreads)
    smooth_stats_kernel(const Dims<I> m, const float *__restrict x, float beta,
                        float *__restrict pivot, float *__restrict sum) {
  const I total = m.nc * m.out_sp;
  for (I t = (I)blockIdx.x * kThreads + threadIdx.x; t < total; t += (I)gridDim.x * kThreads) {
    const I c = t / m.out_sp, o = t - c * m.out_sp;
    float pv, s;
    pool::smooth_window<R>(m, x + (uint64_t)c * m.in_sp, o, beta, &pv, &s);
    pivot[t] = pv;
    sum[t] = s;
  }
}

// ---- backward: per-input gathers (output order, from +0) ----------------------------------------

template <int R, class I>
__global__ void __launch_bounds__(kThreads)
    max_gather_kernel(const Dims<I> m, const I *__restrict arg, const float *__restrict dy,
                      float *__restrict dx) {
  const I total = m.nc * m.in_sp;
  for (I t = (I)blockIdx.x * kThreads + threadIdx.x; t < total; t += (I)gridDim.x * kThreads) {
    const I c = t / m.in_sp, i = t - c * m.in_sp;
    const I *ap = arg + (uint64_t)c * m.out_sp;
    const float *gp = dy + (uint64_t)c * m.out_sp;
    I olo[pool::kMaxRank], on[pool::kMaxRank], first;
    float acc = 0.0f;
    if (pool::windows_of<R>(m, i, olo, on, &first))
      pool::walk_out<R>(m, first, on, [&](I w) {
        if (ap[w] == i) acc += gp[w];
      });
    dx[t] = acc;
  }
}

template <int R, class I>
__global__ void __launch_bounds__(kThreads)
    avg_gather_kernel(const Dims<I> m, const float *__restrict dy, bool include_pad,
                      float *__restrict dx) {
  const I total = m.nc * m.in_sp;
  for (I t = (I)blockIdx.x * kThreads + threadIdx.x; t < total; t += (I)gridDim.x * kThreads) {
    const I c = t / m.in_sp, i = t - c * m.in_sp;
    const float *gp = dy + (uint64_t)c * m.out_sp;
    I olo[pool::kMaxRank], on[pool::kMaxRank], first;
    float acc = 0.0f;
    if (pool::windows_of<R>(m, i, olo, on, &first))
      pool::walk_out<R>(m, first, on, [&](I w) {
        float d = (float)m.window;
        if (!include_pad) {
          I lo[pool::kMaxRank], n[pool::kMaxRank];
          pool::window_of<R>(m, w, lo, n);
          d = pool::avg_divisor<R>(n, m.rank, m.window, false);
        }
        acc += pool::div_rn(gp[w], d);
      });
    dx[t] = acc;
  }
}

template <int R, class I>
__global__ void __launch_bounds__(kThreads)
    smooth_gather_kernel(const Dims<I> m, const float *__restrict x, const float *__restrict dy,
                         const float *__restrict pivot, const float *__restrict sum, float beta,
                         float *__restrict dx) {
  const I total = m.nc * m.in_sp;
  for (I t = (I)blockIdx.x * kThreads + threadIdx.x; t < total; t += (I)gridDim.x * kThreads) {
    const I c = t / m.in_sp, i = t - c * m.in_sp;
    const uint64_t ob = (uint64_t)c * m.out_sp;
    const float v = x[t];
    I olo[pool::kMaxRank], on[pool::kMaxRank], first;
    float acc = 0.0f;
    if (pool::windows_of<R>(m, i, olo, on, &first))
      pool::walk_out<R>(m, first, on, [&](I w) {
        acc += pool::smooth_grad(dy[ob + w], v, pivot[ob + w], sum[ob + w], beta);
      });
    dx[t] = acc;
  }
}

// ---- fast kernels (bodies: cuda/kernels/pool.cuh) ----------------------------------------------

template <Kind K, class C, int R>
__global__ void __launch_bounds__(kThreads)
    fast_fwd_kernel(const Dims<uint32_t> m, const pool::fast::Plan p, const float *__restrict x,
                    float *__restrict y, bool include_pad, float beta) {
  const uint32_t t = blockIdx.x * kThreads + threadIdx.x;
  if (t < p.total) pool::fast::fwd_thread<K, C, R>(m, p, x, y, t, include_pad, beta);
}

// At least 3 resident blocks per SM (at most 85 registers: rank 3 max would take 102, 2 blocks).
template <Kind K, class C, int R>
__global__ void __launch_bounds__(kThreads, 3)
    scatter_kernel(const Dims<uint32_t> m, const pool::fast::Plan p, const float *__restrict x,
                   const float *__restrict dy, bool include_pad, float beta,
                   float *__restrict dx) {
  const uint32_t t = blockIdx.x * kThreads + threadIdx.x;
  if (t < p.total) pool::fast::scatter_thread<K, C, R>(m, p, x, dy, include_pad, beta, dx, t);
}

// Resident blocks per SM the stream kernel keeps (the register cap that gives): max s2 4 (64
// registers), average s1 5 (48), average s2 6 (40); the prefetch of the next window rows must not
// cost a block. (Max s1, 3 blocks at 80 registers, was the removed max k3 s1 p1 form.)
template <Kind K, class C>
constexpr int stream_blocks() {
  return K == Kind::Max ? 4 : (C::SW == 1 ? 5 : 6);
}

template <Kind K, class C>
__global__ void __launch_bounds__(kThreads, stream_blocks<K, C>())
    stream_kernel(const Dims<uint32_t> m, const pool::fast::Plan p, const float *__restrict x,
                  const float *__restrict dy, bool include_pad, float *__restrict dx) {
  static_assert(!(K == Kind::Max && pool::fast::sep_cfg<C>()), "max k3 s1 p1 is sep_kernel's");
  const uint32_t t = blockIdx.x * kThreads + threadIdx.x;
  if (t < p.stotal) pool::fast::stream_thread<K, C>(m, p, x, dy, include_pad, dx, t);
}

// Max k3 s1 p1 on the stream path, the separable argmax (pool::fast::sep_body; its only
// backward kernel): 3 resident blocks per SM as the removed stream form of max s1 (at most 80
// registers; sm_90: the float4 body 78, no spill, the scalar body, odd widths only, 80 and 40
// bytes spilled), 32 KB of shared memory per block (the threads' accumulator rings); VEC: float4
// rows (one kernel per choice, so that the scalar body costs the float4 one no register).
// Planes band_kernel takes (pool::fast::band_takes) do not come here.
template <class C, bool VEC>
__global__ void __launch_bounds__(kThreads, 3)
    sep_kernel(const Dims<uint32_t> m, const pool::fast::Plan p, const float *__restrict x,
               const float *__restrict dy, float *__restrict dx) {
  __shared__ float ring[pool::fast::kSepSlots * pool::fast::kSepStride];  // 32 KB
  const uint32_t t = blockIdx.x * kThreads + threadIdx.x;
  if (t < p.stotal) pool::fast::sep_body<C, VEC>(m, p, x, dy, dx, t, ring + threadIdx.x);
}

// Max k3 s1 p1 from bands staged in shared memory (pool::fast::band_stage, band_run), where
// pool::fast::band_takes says so. 5 blocks of 128 threads per SM by shared memory (at most 25 KB
// staged + 16 KB of rings).
template <class C, bool VEC>
__global__ void __launch_bounds__(pool::fast::kBandThreads, 5)
    band_kernel(const Dims<uint32_t> m, const pool::fast::BandPlan b, const float *__restrict x,
                const float *__restrict dy, float *__restrict dx) {
  float *sm = async::dynamic_smem();
  const uint32_t plane = pool::fast::fdiv(b.by_bands, blockIdx.x),
                 bi = blockIdx.x - plane * b.bands;
  pool::fast::band_stage<VEC>(
      m, b, plane, bi, x, dy, sm, threadIdx.x,
      [](float *d, const float *g) { async::copy16(d, g, true); },
      [](float *d, const float *g) { async::copy4(d, g, true); });
  async::commit();
  async::wait<0>();
  __syncthreads();
  pool::fast::band_run<C, VEC>(m, b, plane, bi, sm, dx, threadIdx.x);
}

template <Kind K, class C>
__global__ void __launch_bounds__(kThreads)
    tile_kernel(const Dims<uint32_t> m, const pool::fast::Plan p, const float *__restrict x,
                const float *__restrict dy, bool include_pad, float beta, float *__restrict dx) {
  extern __shared__ float sm[];
  const pool::fast::Tile T = pool::fast::tile_of<C>(m, p, blockIdx.x);
  for (uint32_t i = threadIdx.x; i < p.wr * p.wc; i += kThreads)
    pool::fast::tile_window<K, C>(m, p, T, x, dy, include_pad, beta, sm, i);
  __syncthreads();
  pool::fast::tile_cells<K, C>(m, p, T, x, beta, sm, threadIdx.x, dx);
}

// The fast backward of kind K when g has one (launched, true), else false.
template <Kind K>
bool fast_backward(int dev, cudaStream_t st, const ConvGeometry &g, const float *x,
                   const float *dy, bool include_pad, float beta, float *dx) {
  using pool::fast::Plan;
  return pool::fast::bwd_path(
      g, K, x, dy, dx,
      [&](auto c, auto r, uint32_t blocks, const Dims<uint32_t> &m, const Plan &p) {
        scatter_kernel<K, decltype(c), decltype(r)::value>
            <<<blocks, kThreads, 0, st>>>(m, p, x, dy, include_pad, beta, dx);
        check_launch("pool scatter_kernel");
      },
      [&](auto c, uint32_t blocks, const Dims<uint32_t> &m, const Plan &p) {
        tile_kernel<K, decltype(c)><<<blocks, kThreads, pool::fast::tile_smem_bytes<K>(p), st>>>(
            m, p, x, dy, include_pad, beta, dx);
        check_launch("pool tile_kernel");
      },
      [&](auto c, uint32_t blocks, const Dims<uint32_t> &m, const Plan &p) {
        using C = decltype(c);
        if constexpr (K == Kind::Max && pool::fast::sep_cfg<C>()) {
          const bool vec = p.vec_in && p.vec_out;
          pool::fast::BandPlan bp;
          if (pool::fast::band_takes(m, bp)) {
            const size_t smem = bp.floats * sizeof(float);
            auto kern = vec ? band_kernel<C, true> : band_kernel<C, false>;
            // 5 blocks of ~41 KB per SM: the whole unified L1 / shared memory as shared (the
            // default carveout is the driver's choice), once per kernel and device.
            static SmemAllowed carveout[2];
            carveout[vec].ensure(dev, kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 (int)cudaSharedmemCarveoutMaxShared, "pool band_kernel: carveout");
            kern<<<bp.blocks, pool::fast::kBandThreads, smem, st>>>(m, bp, x, dy, dx);
            check_launch("pool band_kernel");
            return;
          }
          if (vec)
            sep_kernel<C, true><<<blocks, kThreads, 0, st>>>(m, p, x, dy, dx);
          else
            sep_kernel<C, false><<<blocks, kThreads, 0, st>>>(m, p, x, dy, dx);
          check_launch("pool sep_kernel");
        } else if constexpr (K != Kind::Smooth && C::SW < C::KW && 4 % C::SW == 0 &&
                             C::SW <= C::KH) {
          stream_kernel<K, decltype(c)><<<blocks, kThreads, 0, st>>>(m, p, x, dy, include_pad, dx);
          check_launch("pool stream_kernel");
        }
      });
}

// ---- dispatch -----------------------------------------------------------------------------

// Calls f(Dims<I>, integral_constant<R>) with the index type and rank instantiation for g.
template <class F>
void dispatch(const ConvGeometry &g, F &&f) {
  auto by_rank = [&](auto m) {
    switch (m.rank) {
      case 1: f(m, std::integral_constant<int, 1>{}); break;
      case 2: f(m, std::integral_constant<int, 2>{}); break;
      case 3: f(m, std::integral_constant<int, 3>{}); break;
      default: f(m, std::integral_constant<int, 0>{}); break;
    }
  };
  if (pool::fits32(g))
    by_rank(pool::make_dims<uint32_t>(g));
  else
    by_rank(pool::make_dims<uint64_t>(g));
}

template <Kind K>
void forward(int dev, const ConvGeometry &g, const float *x, bool include_pad, float beta,
             float *y) {
  cudaStream_t st = stream(dev);
  const bool fast = pool::fast::fwd_path(
      g, x, y,
      [&](auto c, auto r, uint32_t blocks, const Dims<uint32_t> &m, const pool::fast::Plan &p) {
        fast_fwd_kernel<K, decltype(c), decltype(r)::value>
            <<<blocks, kThreads, 0, st>>>(m, p, x, y, include_pad, beta);
      });
  if (!fast)
    dispatch(g, [&](auto m, auto r) {
      using I = decltype(m.nc);
      fwd_kernel<K, decltype(r)::value, I>
          <<<grid_all(g.out_elems, kThreads), kThreads, 0, st>>>(m, x, y, include_pad, beta);
    });
  check_launch("pool fwd_kernel");
}

}  // namespace

void maxpool_fwd(int dev, const ConvGeometry &g, const float *x, float *y) {
  forward<Kind::Max>(dev, g, x, false, 0.0f, y);
}

void avgpool_fwd(int dev, const ConvGeometry &g, const float *x, bool count_include_pad,
                 float *y) {
  forward<Kind::Avg>(dev, g, x, count_include_pad, 0.0f, y);
}

void smooth_maxpool_fwd(int dev, const ConvGeometry &g, const float *x, float beta, float *y) {
  forward<Kind::Smooth>(dev, g, x, false, beta, y);
}

void maxpool_bwd(int dev, const ConvGeometry &g, const float *x, const float *dy, float *dx) {
  cudaStream_t st = stream(dev);
  if (fast_backward<Kind::Max>(dev, st, g, x, dy, false, 0.0f, dx)) return;
  dispatch(g, [&](auto m, auto r) {
    using I = decltype(m.nc);
    constexpr int R = decltype(r)::value;
    Scratch arg(dev, g.out_elems * sizeof(I));
    max_arg_kernel<R, I><<<grid_all(g.out_elems, kThreads), kThreads, 0, st>>>(m, x, arg.as<I>());
    check_launch("pool max_arg_kernel");
    max_gather_kernel<R, I>
        <<<grid_all(g.in_elems, kThreads), kThreads, 0, st>>>(m, arg.as<I>(), dy, dx);
    check_launch("pool max_gather_kernel");
  });
}

void avgpool_bwd(int dev, const ConvGeometry &g, const float *dy, bool count_include_pad,
                 float *dx) {
  cudaStream_t st = stream(dev);
  if (fast_backward<Kind::Avg>(dev, st, g, nullptr, dy, count_include_pad, 0.0f, dx)) return;
  dispatch(g, [&](auto m, auto r) {
    using I = decltype(m.nc);
    avg_gather_kernel<decltype(r)::value, I>
        <<<grid_all(g.in_elems, kThreads), kThreads, 0, st>>>(m, dy, count_include_pad, dx);
  });
  check_launch("pool avg_gather_kernel");
}

void smooth_maxpool_bwd(int dev, const ConvGeometry &g, const float *x, const float *dy,
                        float beta, float *dx) {
  cudaStream_t st = stream(dev);
  if (fast_backward<Kind::Smooth>(dev, st, g, x, dy, false, beta, dx)) return;
  dispatch(g, [&](auto m, auto r) {
    using I = decltype(m.nc);
    constexpr int R = decltype(r)::value;
    Scratch stats(dev, g.out_elems * 2 * sizeof(float));
    float *pv = stats.as<float>(), *sm = pv + g.out_elems;
    smooth_stats_kernel<R, I>
        <<<grid_all(g.out_elems, kThreads), kThreads, 0, st>>>(m, x, beta, pv, sm);
    check_launch("pool smooth_stats_kernel");
    smooth_gather_kernel<R, I>
        <<<grid_all(g.in_elems, kThreads), kThreads, 0, st>>>(m, x, dy, pv, sm, beta, dx);
    check_launch("pool smooth_gather_kernel");
  });
}

}  // namespace cuda
}  // namespace tlrt
