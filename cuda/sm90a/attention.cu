// CUDA backend, fused attention: the FAST BACKWARD on Hopper (sm_90a wgmma, split TF32), for
// 32 < d <= 128, every mask kind (64 < d <= 128: Geo<128> below, 32-row steps). Compiled for
// sm_90a only (meson.build builds this file apart, when gpu_arch names 90); cuda/attention.cu
// dispatches to it with the determinism switch off and allow_tf32 off on compute capability 9.0
// devices. Class: library, the header's split-TF32
// bound (the products in the tensor cores' order, not the ORDER OF OPERATIONS), run-to-run
// deterministic (no atomics; every sum has a fixed order). It is a part of the attention family
// (cuda/attention.cu, whose CPU twin stub/attention.cpp computes the same backward), kept in
// cuda/sm90a/ because it is compiled for that one architecture, not as a mirrored family unit.
//
// Why wgmma: the mma.sync backward (session 7, measured 1.22 ms against the exact kernels' 1.06
// at (32, 1024, 64)) spent its issue slots on shared-memory fragment loads and operand splits;
// wgmma reads both operands of a product from shared memory with no instruction per value, runs
// asynchronously beside the softmax arithmetic, and measured 478 TFLOP/s of raw TF32 on the H100
// (scripts/wgmma_check.cu; mma.sync 322).
//
// Operands: TF32 wgmma reads only K-major operands (the contraction index contiguous), and every
// input takes part in products over two different indices (Q: over d in S = Q K^T, over queries
// in dK = dS^T Q), so a pre-pass (planes_kernel) writes, once per call, for each 64-row tile of
// each problem, the shared-memory images (cuda/common/wgmma_tf32.cuh's layout, 4096 floats, 16 KB) of
//   Qr, Dr, Kr, Vr: q, dout, k, v tiles as 64 rows x 64 columns (d zero-padded), K-major over d;
//   Qt, Dt, Kt:     the transposes (64 rows = d, K-major over the tile's 64 positions) with the
//                   rows of each group of 8 at positions in the order 0 2 4 6 1 3 5 7 (inv_perm),
//                   the order in which a C fragment serves as an A fragment (cuda/common/mma_tf32.cuh)
// each as big and small TF32 parts (mma::split): 14 images per tile, 14 bh n d floats in all
// ((32, 1024, 64): 117 MB written, 34 MB read). At 64 < d <= 128 (Geo<128>) the same images
// are 64 x 128 (row) and 128 x 64 (transposed): 32 KB each, 14 bh n 128 floats.
// dkdv_kernel: one block of two warpgroups per (problem, 64 keys), looping over the query tiles
// (from the diagonal tile when skipping); dq_kernel: the same per (problem, 64 queries) over the
// key tiles (up to the diagonal). In each, a "P group" computes S (S^T in dkdv) with 3 x 8
// m64n64k8 from shared memory and P = exp(s - lse) on the accumulators, and hands P to a "dS
// group" through shared memory; the dS group computes dP (dP^T) the same way, dS = P (dP - D), and
// the products with P or dS as the register A operand (split in registers): in dkdv dK += dS^T Q
// (Qt images), in dq dQ += dS K (Kt). dV += P^T dout (Dt) is the P group's at d <= 64 (Geo::kDV;
// 48 + the softmax against the dS group's 48 + dS); at d > 64, where the P group has registers
// for half of it, each group computes half of dV's columns from its own half of the Dt rows.
// Each group reads only its own images (dkdv: P group Kr resident, Qr, Dt (its half at d > 64);
// dS group Vr resident, Dr, Qt (and its half of Dt at d > 64). dq: P group Qr resident, Kr; dS
// group Dr resident, Vr, Kt) and refills them by cp.async as soon as its last product over them has
// completed, behind its own named barrier; the hand-over is one buffer with a "full" and an
// "empty" barrier (bar.arrive by one side, bar.sync by the other), so the P group may run one tile
// ahead. Shared memory: dkdv 209 KB (12 images, lse / D, the hand-over), dq 177 KB (10 images, the
// hand-over), + 17 KB with a mask tile; one block (8 warps) per SM.
// 64 < d <= 128 (Geo<128>): the images are twice the size, so the streamed side moves in steps of
// 32 rows (half a tile: its rows of a row image, copied as a 32-row image, or its 4 k steps of a
// transposed one) and the P group keeps its resident operand (K in dkdv, Q in dq) in registers
// as the A operand of its products (64 x 128, big and small, 128 registers a thread, read from the
// plane images once per problem): dkdv 205 KB (V resident, the Q, dout, Q^T, dout^T steps), dq
// 169 KB (dout resident, the K, V, K^T steps), + 17 KB with a mask tile; 255 registers, no spill.
// In dq the dS group also holds dout's BIG fragments in registers (64 a thread; its small image
// stays in shared memory, as does the big one, now unread), so that two of each k step's three
// dP products read only V's step image from shared memory (prod_rows_big_reg; session 17).
// Per 64 x 32 step: S (S^T) 48 m64n32k8 with A in registers, dP (dP^T) 48 m64n32k8 (dkdv: from
// shared memory; dq: 32 of them with A in registers), dV and dK (dQ) 12 m64n128k8 each with A in
// registers.
// Scores exactly as the header's s(i, j) on the products (the mask tile staged in shared memory
// by cp.async; causal and bounds tests skipped for tiles wholly in range, unmasked and below the
// diagonal); P, dS with attn::prob as the exact kernels. dk and dq take the factor scale at the
// end.
//
// PREDICTION (written before the first run; H100, ~1.75 GHz under load): per 64 x 64 tile pair
// dkdv issues 96 m64n64k8 and dq 72, at the measured 478 TFLOP/s ~36 cycles each per SM: ~6.0k
// cycles of tensor time, plus the softmax / split phases that do not overlap (~1.0k): (32,
// 1024, 64) 8192 tile pairs / 132 SMs x ~7k cycles = ~0.25 ms, + pre-pass ~0.06 + D: ~0.32 ms
// unmasked (SDPA 0.73: ~0.45x; the exact kernels 1.06); causal ~0.18; masked ~0.40 (the
// per-element mask loads). (16, 4096, 64): ~2.3 ms unmasked (SDPA 5.47).
// MEASURED (H100, 2026-11-27, session 11; bench/attention.py, exact = the exact kernels in the
// same run; kernel times by bench/attention_kernels.py, (32, 1024, 64) unmasked):
//   1. P by the shared exp_f, mask read per element from global memory: (32, 1024, 64) none
//      0.81 ms (exact 1.06; SDPA 0.73), causal 0.59 (0.82), masked 1.88 (1.15);
//   2. the mask tile staged in shared memory: masked 1.16 (exact 1.17); none 0.91, causal 0.65
//      in that run; kernels dkdv 485 us, dq 353, planes 55, D 10. dkdv takes ~13.6k cycles per
//      64 x 64 tile pair against ~3.1k of tensor time (96 products at the measured rate) and
//      ~3.3k of shared-memory traffic: the one warpgroup per SM runs its phases one after the
//      other (products; then the softmax, ~1500 instructions per thread with one warp per
//      scheduler; then the next products). Splitting all of P^T / dS^T before one batch of
//      products (one warpgroup.arrive instead of one per step) measured the same (482 / 357 us).
//   3. P by ex2.approx (prob<true>; the softmax's instructions per element ~35 -> ~15), the
//      default: dkdv 485 -> 373 us, dq 353 -> 279 (planes 55, D 10). (32, 1024, 64) none 0.729
//      ms (1.01x SDPA; exact 1.046), causal 0.525 (0.72x; 0.815), masked 0.946 (1.28x; 1.159);
//      (16, 4096, 64) none 4.97 (0.91x; 8.00), causal 2.90 (0.52x; 4.98), masked 6.67 (1.20x;
//      8.86). The 0.7x target is met at (16, 4096, 64) causal only.
//   4. (session 12) ncu on (32, 1024, 64) unmasked: one warp per scheduler issuing every 4.8
//      cycles, tensor pipe 28% busy, and of ~2100 instructions per warp per tile pair 27% were
//      descriptor arithmetic (ptxas rebuilt each descriptor, ~5 uniform instructions per
//      operand) and 27% operand splits (mma::split, 9 instructions). One descriptor base per
//      block with a 32-bit add per operand (Smem, dsc), P / dS split in 3 (split_a), lse / D
//      staged in shared memory with the mask tile, P computed while dP is still in the tensor
//      cores and the score tests skipped on plain tiles: H200, dkdv 375 -> 223 us, dq 279 ->
//      158 (causal 261 / 194 -> 160 / 119; masked 499 / 374 -> 376 / 313).
//   5. Masked in-range tiles with mask_fill = -inf from the mask tile without the general score
//      (kMasked): masked 376 / 313 -> 266 / 198 us; then from exclusion words built once per call
//      by bits_kernel (no mask tile, no shared loads, ~5 us for a 1024^2 mask): 231 / 172.
//      Waiting for lse / D and the mask tile at the top of the loop instead of under the S / dP
//      products (ncu had put 10% of the stall samples at that barrier) measured 270 / 208: kept
//      where it is. D computed in planes_kernel (no d_kernel launch) made the pre-pass 43 ->
//      66 us (the 64 fma chains of a tile hold the block), against d_kernel's 9: not kept.
//   6. (session 13) ncu on the one-warpgroup kernels, (32, 1024, 64) unmasked, H200: L2 28.7%
//      of peak (dkdv; dq 22.7%), so not bound by the streamed images; issue slots 19% busy, no
//      eligible warp 80% of the cycles (one warp per scheduler), the "shared" pipe (tensor)
//      48%. PREDICTED for the two-warpgroup split (each group's arithmetic under the other's
//      products; per tile pair ~3.1k / ~2.3k cycles of tensor time): dkdv 222 -> ~150 us, dq
//      159 -> ~115. MEASURED (H200, same process A/B against the one-warpgroup kernels): dkdv
//      224 -> 214 us, dq 160 -> 135 (causal 160 / 120 -> 155 / 98; masked 231 / 171 -> 200 /
//      139); the backward (32, 1024, 64) 0.444 -> 0.411 ms none (0.64x SDPA), 0.340 -> 0.313
//      causal (0.48x), 0.468 -> 0.407 masked (0.63x); (16, 4096, 64) 2.646 / 1.564 / 2.587 ms
//      (0.54x / 0.32x / 0.53x). dkdv gained least: there the P group also ran dV += P^T dout
//      (48 products and the exp per tile against the dS group's 48 and cheaper arithmetic), so
//      the dS group waited for each P. dV moved to the dS group, as dq's split (24 + exp against
//      72 products; dq's 4.3k cycles per pair against 2.3k of tensor time, the same ratio
//      predicting dkdv ~180 us): MEASURED dkdv 214 -> 190 us (causal 155 -> 140, masked 200 ->
//      191); the backward (32, 1024, 64) 0.385 / 0.300 / 0.397 ms (0.60x / 0.47x / 0.61x SDPA),
//      (16, 4096, 64) 2.491 / 1.447 / 2.461 (0.51x / 0.30x / 0.50x).
//   A PIPELINED FORM, measured and removed (git show 04a2c74:cuda/attention_wgmma.cu): steps
//   of 32 queries (keys in dq), double-buffered images, the next step's S / dP products issued
//   before the current step's softmax so that they overlap: dkdv 777 us, dq 598 (slower: ptxas
//   serialised its products, C7511 "insufficient register resources" in dkdv (255 registers,
//   spills) and C7514 in dq, and m64n32 products with both operands in shared memory are
//   shared-memory bound, ~24 cycles for 16 of tensor time).
//   7. (session 14) 64 < d <= 128 on wgmma (Geo<128> above; before, the exact kernels: (32, 1024,
//      128) 2.099 / 1.423 / 2.289 ms). PREDICTED (H200, from the d = 64 kernels' cycles per
//      tile pair, ~6.1k for dkdv and ~4.3k for dq at the same tensor time per 64 x 32 step, and
//      ~1.3x for the m64n32 products from shared memory): dkdv ~440 us, dq ~310, planes ~86
//      (twice the bytes), D ~15: ~0.85 ms (~0.88x SDPA). MEASURED (H200): dkdv 408 us, dq 272,
//      planes 86.5, D 15.5; the backward 0.792 / 0.599 / 0.784 ms (0.82x / 0.62x / 0.81x SDPA).
//      Then, same session, A/B on the H200 (us): (a) dV in the P group, predicted to balance
//      the groups' tensor time (768 + 768 against 768 + 1536 cycles per step): at d = 128 it
//      spills (648 bytes; 414 against 408) and is not used; at d = 64 (166 registers) dkdv 190
//      -> 182 (causal 140 -> 135, masked 191 -> 183): kept there (Geo::kDV). (b) dkdv at d = 128
//      issuing dV's and dK's products as two groups and refilling the dout^T step under dK's:
//      408 -> 397 (causal 292 -> 283): kept. (c) the K^T steps of dq double-buffered at d = 128
//      (40 KB free): 274 -> 279 (causal 197 -> 200, masked 279 -> 290): slower, removed: the
//      refill latency is not what holds dq. (d) the pre-pass with one block per operand (was one
//      per tile, its four operands in turn): 86.5 -> 83.5, 42.6 -> 41.6. (e) d_kernel with its
//      row loads unrolled by 8: 15.5 -> 15.4, not kept. A run-time branch between (b) and the
//      old order in one kernel made ptxas serialise its wgmma (C7512, "insufficient register
//      resources": dkdv 408 -> 605 us): each form is its own instantiation. (f) dV split
//      between the groups at d = 128 (each group 32 accumulators and its half of the dout^T rows,
//      copied by itself, so no barrier between the groups; tensor time per step 1152 / 1920
//      cycles instead of 768 / 2304; 8 bytes of spill): 391 -> 374 (causal 280 -> 269, masked
//      380 -> 356): kept (Geo::kDV = 2). (g) dQ split the same way in dq at d = 128 (dS handed
//      back to the P group through a second buffer and barrier pair): 271 -> 326 (causal 196 ->
//      238, masked 277 -> 348): slower (the P group then waits for dS every step), removed.
//      Parity held with (f) and (g) on the H200.
//      Final (bench/results/2026-11-27-h200-s14-attention.md): (32, 1024, 128) 0.756 / 0.571 /
//      0.748 ms (0.78x / 0.59x / 0.77x SDPA: the 0.7x target is met causal only); (32, 1024,
//      64) 0.373 / 0.288 / 0.385 (0.58x / 0.45x / 0.59x); (16, 4096, 64) 0.48x / 0.29x / 0.50x.
// WHAT WOULD HELP NEXT (after session 14, H200 at ~1.98 GHz: at d = 64 dkdv ~5.8k cycles per
// tile pair against ~3.1k of tensor time, dq ~4.3k against ~2.3k; at d = 128 per 64 x 32 step
// dkdv ~6.0k against ~3.1k, dq ~4.4k against ~2.3k):
//   - not shared-memory bandwidth: an m64n64k8 product with both operands in shared memory reads
//     4 KB in its ~32 cycles, the 128 bytes per cycle the SM's shared memory delivers, but with
//     the resident operand read once per problem into registers as the A operand (K in dkdv's P
//     group, Q and dout in dq; 64 registers a thread, no spills) the kernels measured the same
//     (H200, session 13: dkdv 190 -> 192 us, dq 134 -> 137): not kept. Nor the refill latency of
//     dq's K^T steps (session 14, (c) above). What is left is latency inside each group: it waits
//     for its products before its arithmetic. The next step is FA3's: issue the next step's S /
//     dP products before the current step's softmax / dS (a second accumulator of 16 registers
//     at d = 128, a second buffer of the step's row images: dq has the 40 KB), checking ptxas for
//     C7512 (serialised wgmma) at every change;
//   - the streamed images, big and small, cost L2 traffic: dkdv at d = 128 reads 128 KB per
//     64 x 32 step (~20 bytes per cycle per SM, ~5 TB/s over the chip);
//   - exclusion words for every mask (any mask_fill: only "mask entry == 0" enters s(i, j)), with
//     causal and bounds tests on the general tiles only: no mask tile in shared memory at all;
//   - the pre-pass (42 / 83 us at (32, 1024, 64 / 128), 151 / 302 MB moved, ~3.6 TB/s on the
//     H200) and D (9 / 15 us) are ~13% of the unmasked backward.
//   8. (session 16) PROGRAMMATIC DEPENDENT LAUNCH (cuda/common/pdl.cuh): d_kernel (128 blocks of one
//      thread per row, a serial fma chain each: 15 us for 34 MB at (32, 1024, 128), most SMs
//      idle) and bits_kernel let planes_kernel begin at once (it reads neither D nor the bits),
//      and dkdv_kernel lets dq_kernel take the SMs its last wave leaves idle (512 blocks, one per
//      SM: 3.9 waves). Each dependent kernel waits at its end, so its completion implies the
//      earlier one's. Kernel times before (H200, scripts/kernel_times.py, (32, 1024, 128)
//      masked, us): d 14.8, bits 4.5, planes 84, dkdv 349, dq 275, ~1.5 between launches.
//      PREDICTED (H100): ~15 us from planes over D, ~12 from dq over dkdv's last wave: 0.77 ->
//      ~0.745 ms. MEASURED (H100, 2026-11-27, the same build with and without, two rounds):
//      (32, 1024, 128) none 0.778 / 0.779 -> 0.767 / 0.765 ms (0.72x SDPA), causal 0.603 / 0.599
//      -> 0.563 / 0.563 (0.53x), masked 0.791 / 0.779 -> 0.763 / 0.762 (0.73x); (32, 1024, 64)
//      0.386 / 0.304 / 0.400 -> 0.374 / 0.281 / 0.386. Less than predicted unmasked (~12 us, not
//      ~25): the overlapped kernels share the memory system. The 0.7x target at d = 128
//      (<= ~0.735 ms unmasked) is still ~4% away.
//   9. (session 17) THE PRE-PASS AT THE COPY BANDWIDTH, AND FEWER GAPS. H100 kernel times
//      (scripts/kernel_times.py, (32, 1024, 128) masked): planes 109.6 us for 302 MB (2.76 TB/s,
//      0.92 of the H100's ~3.0 TB/s copy), d_kernel 18.7, bits 5.5, then dkdv / dq. Changes:
//      (a) planes_kernel writes each image by 16-byte stores (4 consecutive floats a thread),
//      reads the row image's 4 values as one conflict-free 16-byte shared load (row stride DP +
//      4) and loads the tile by 16-byte loads where d % 4 == 0; (b) dkdv_kernel is launched
//      dependent on planes_kernel (waits at its start, then triggers dq_kernel: dq reads the
//      images too, so it may begin only after dkdv's wait), hiding the launch gap and dkdv's ramp
//      behind planes' last wave; (c) bits_kernel is launched dependent on d_kernel (it reads only
//      the mask), so d, bits and planes overlap in the masked case too. PREDICTED: planes ~110 ->
//      ~102 us (copy bandwidth), ~2 us from (b), ~15 us masked from (c). MEASURED (H100,
//      2026-11-27; the same tree with the old file as a second library, three rounds, ms): planes
//      109.6 -> 104.2 us (2.9 TB/s, 0.96 of copy); (32, 1024, 128) none 0.764 / 0.768 / 0.766 ->
//      0.747 / 0.741 / 0.753 (0.70-0.71x SDPA), masked 0.760 / 0.770 / 0.773 -> 0.748 / 0.748 /
//      0.758 (0.71-0.73x), causal 0.559 / 0.565 / 0.560 -> 0.557 / 0.557 / 0.550; (32, 1024, 64)
//      none 0.374-0.378 -> 0.367-0.370. The 0.7x target at d = 128 was then met only in some
//      runs (10 below meets it): SDPA's time varies 1.02-1.06 ms between runs, ours 0.741-0.758.
//      What is left: dkdv + dq
//      are ~640 us of the ~745 (1024 blocks of ~94 / ~70 us on 132 SMs, the tail included), the
//      pre-pass ~105 at the copy bandwidth (only fewer bytes would shorten it: big = RN(x) fixes
//      two images per operand and orientation). Tried after it, the same day: D inside
//      planes_kernel (its dout blocks, warps 0-1 one row a thread, the same fma chain, beside
//      the other warps' images; no d_kernel launch, 16 MB fewer bytes): PREDICTED ~5 us;
//      MEASURED (H100, three rounds against the form above) none 0.743 / 0.741 / 0.736 against
//      0.741 / 0.746 / 0.742 ms, masked 0.753 / 0.746 / 0.753 against 0.747 / 0.749 / 0.759:
//      within the noise (planes_kernel 104 -> 120 us, the chains holding its dout blocks), not
//      kept. Parity and memcheck were clean with it.
//  10. (session 17) THE dS GROUP'S dP PRODUCTS AT d = 128 WITH A IN REGISTERS. Per 64 x 32 step
//      the dS group's 48 m64n32k8 of dP read both operands from shared memory, which the notes
//      above measured at ~24 cycles each against ~16 of tensor time, and that group is the
//      longer one (dP, then dS, then dQ's or dK's 12 m64n128k8). With the resident operand's
//      big part in registers (dout in dq, V in dkdv; 64 registers a thread; the small part
//      stays an image, so the same products in the same order: the same bits), 32 of the 48
//      read only the step image. (Session 13's version of this, at d = 64 where the products are
//      m64n64 and not bound by shared memory, measured nothing.) PREDICTED: the dS group's
//      tensor time ~1920 -> ~1660 cycles a step, dq ~276 -> ~255 us, the backward ~-15 us.
//      ptxas: dq 255 registers, no spill; dkdv 96 bytes of spill (its dS group also holds dK and
//      half of dV). MEASURED (H100, 2026-11-27, three libraries in one session, three rounds,
//      (32, 1024, 128), ms): none 0.749 / 0.749 / 0.747 -> dq form 0.736 / 0.733 / 0.733
//      (0.69x SDPA in every round), both kernels 0.751 / 0.744 / 0.753; masked 0.763 / 0.746 /
//      0.750 -> 0.742 / 0.741 / 0.741 (0.69-0.70x), both 0.767 / 0.779 / 0.769; causal 0.553 /
//      0.552 / 0.550 -> 0.546 / 0.543 / 0.542 (0.51-0.52x), both 0.562-0.564. So dq keeps it
//      and dkdv does not (its spills cost more than the products gain). Parity (bit for bit
//      against the old form's products by construction; parity_attention on the H100) and
//      memcheck clean.
#include <cstdint>
#include <cstdlib>

#include "core/backend/attention.hpp"
#include "core/numerics/shared_math.hpp"
#include "cuda/sm90a/attention.cuh"
#include "cuda/common/cp_async.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/mma_tf32.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/common/wgmma_tf32.cuh"

namespace tlrt {
namespace cuda {
namespace attn_wgmma {

namespace {

namespace wg = wgmma;
using attn::kNegInf;

constexpr unsigned kT = 64;  // rows per block (keys in dkdv, queries in dq) and per plane tile
enum Plane : unsigned { kQr, kDr, kKr, kVr, kQt, kDt, kKt, kPlanes };

constexpr unsigned kMS = kT + 4;  // row stride (floats) of a staged mask tile

// The geometry of a head-dimension class: DP = 64 (32 < d <= 64) or DP = 128 (64 < d <= 128),
// d zero-padded to DP. A block owns 64 rows (keys in dkdv, queries in dq) and loops over the
// other side in steps of kS rows. At DP = 64 every operand is a 64 x 64 image in shared memory
// and a step is a whole tile. At DP = 128 the images are twice the size, so a step is half a
// tile (32 rows) and the P group holds its resident operand (K in dkdv, Q in dq) in registers
// as the A operand of its products (64 x 128, big and small: 128 registers a thread), which
// leaves the dS group's resident image (V in dkdv, dout in dq) and single-buffered step images
// in shared memory (dkdv 205 KB, dq 169 KB, + 17 KB with a mask tile).
template <unsigned DP>
struct Geo {
  static_assert(DP == 64 || DP == 128, "the two head-dimension classes");
  static constexpr unsigned kS = DP == 64 ? 64 : 32;  // rows of the streamed side per step
  static constexpr bool kRegA = DP > 64;              // the P group's A operand in registers
  static constexpr unsigned kDV = DP == 64 ? 1 : 2;  // dkdv_kernel's DV (which group has dV)
  static constexpr unsigned kImg = kT * DP;           // floats of a plane image (64-row tile)
  static constexpr unsigned kStr = kS * DP;           // floats of a step's image in shared memory
  static constexpr unsigned kNV = kT * kS / 128;      // a thread's share of a 64 x kS product
  static constexpr unsigned kNA = DP / 2;             // a thread's share of a 64 x DP product
  static constexpr unsigned kXs = kNV * 128 + 128;    // the hand-over buffer (floats)
  static constexpr unsigned kResA = kRegA ? 0 : 2 * kImg;  // the P group's resident images
  // dkdv: [K][Q step][V][dout step][Q^T step][dout^T step][lse][D][hand-over]
  static constexpr unsigned kDkdvFloats = kResA + 2 * kStr + 2 * kImg + 6 * kStr + 2 * kS + kXs;
  // dq: [Q][K step][dout][V step][K^T step][hand-over]
  static constexpr unsigned kDqFloats = kResA + 2 * kStr + 2 * kImg + 4 * kStr + kXs;
};

struct WP {
  unsigned n, d, bh, ntiles;
  const float *mask;
  uint64_t mask_stride;
  float scale, fill;
  bool causal, skip;
  bool mask_vec;  // mask tiles by 16-byte copies (n % 4 == 0, mask 16-byte aligned)
  // The exclusion words of the mask (bits_kernel; nullptr unless masked with mask_fill = -inf),
  // and the words between two problems' (0 for a broadcast mask).
  const uint32_t *bits;
  uint64_t bits_stride;
};

// Words of exclusion bits per 64 x 64 tile: 128 in the dkdv kernel's fragment order, then 128
// in the dq kernel's (bit e of word T: the entry thread T holds as its C fragment element e).
constexpr unsigned kBitsPerTile = 2 * 128;

// The tile row at position pos of a transposed image: within each group of 8, positions
// 0 1 2 3 4 5 6 7 hold rows 0 2 4 6 1 3 5 7 (the C -> A fragment order of cuda/common/mma_tf32.cuh).
__device__ __forceinline__ unsigned inv_perm(unsigned pos) {
  const unsigned k = pos & 7u;
  return (pos & ~7u) | (k < 4 ? 2 * k : 2 * (k - 4) + 1);
}

// Offset (floats) of image (plane, part) of tile `tile` of problem b.
template <unsigned DP>
__device__ __forceinline__ uint64_t img_off(const WP &p, unsigned plane, unsigned part,
                                            uint64_t b, unsigned tile) {
  return (((uint64_t)(plane * 2 + part) * p.bh + b) * p.ntiles + tile) * Geo<DP>::kImg;
}

// ---- pre-pass ---------------------------------------------------------------------------------

// Block (tile, problem, operand x: q, dout, k, v): stages the operand's 64 x DP tile in shared
// memory, then writes its row image (64 rows x DP, K-major over d) and (q, dout, k) its
// transposed image (DP rows x 64 positions, K-major over the positions, permuted by inv_perm),
// big and small parts. (One operand per block: four times the blocks of one block per tile,
// whose four operands' loads each waited for the previous operand's stores.) Each thread writes
// 4 consecutive floats of an image (k4 = 0..3) with one 16-byte store; the tile's row stride DP +
// 4 keeps its rows 16-byte aligned, so the row image's 4 values are one conflict-free 16-byte
// shared load (a quarter warp's 8 rows start 4 banks apart); the transposed image's 4 values come
// from 4 rows (2-way conflicts). The tile is loaded by 16-byte loads where d % 4 == 0.
template <unsigned DP>
__global__ void __launch_bounds__(256)
    planes_kernel(WP p, const float *__restrict q, const float *__restrict dout,
                  const float *__restrict k, const float *__restrict v, float *__restrict planes) {
  pdl_trigger();  // dkdv_kernel, launched after it, waits for its completion before any read
  constexpr unsigned kImg = Geo<DP>::kImg;
  constexpr unsigned kS = DP + 4;
  __shared__ __align__(16) float s[kT * kS];
  const unsigned tile = blockIdx.x, x = blockIdx.z;
  const bool vec = p.d % 4 == 0;
  auto split4 = [](float4 a, float4 &big, float4 &small) {
    uint32_t b, m;
    mma::split(a.x, b, m), big.x = __uint_as_float(b), small.x = __uint_as_float(m);
    mma::split(a.y, b, m), big.y = __uint_as_float(b), small.y = __uint_as_float(m);
    mma::split(a.z, b, m), big.z = __uint_as_float(b), small.z = __uint_as_float(m);
    mma::split(a.w, b, m), big.w = __uint_as_float(b), small.w = __uint_as_float(m);
  };
  for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
    const float *X = (x == 0 ? q : x == 1 ? dout : x == 2 ? k : v) + b * p.n * p.d;
    __syncthreads();  // the previous problem's readers are done
    if (vec && reinterpret_cast<uintptr_t>(X) % 16 == 0) {
      for (unsigned e = threadIdx.x; e < kImg / 4; e += 256) {
        const unsigned r = e / (DP / 4), c = 4 * (e % (DP / 4)), row = tile * kT + r;
        *reinterpret_cast<float4 *>(&s[r * kS + c]) =
            (row < p.n && c < p.d)
                ? *reinterpret_cast<const float4 *>(X + (uint64_t)row * p.d + c)
                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    } else {
      for (unsigned e = threadIdx.x; e < kImg; e += 256) {
        const unsigned r = e / DP, c = e % DP, row = tile * kT + r;
        s[r * kS + c] = (row < p.n && c < p.d) ? X[(uint64_t)row * p.d + c] : 0.0f;
      }
    }
    __syncthreads();
    const unsigned rowp = x, tp = x == 0 ? kQt : x == 1 ? kDt : x == 2 ? kKt : kPlanes;
    float4 *rb = reinterpret_cast<float4 *>(planes + img_off<DP>(p, rowp, 0, b, tile));
    float4 *rs = reinterpret_cast<float4 *>(planes + img_off<DP>(p, rowp, 1, b, tile));
    for (unsigned o4 = threadIdx.x; o4 < kImg / 4; o4 += 256) {
      // o = 4 o4 + k4 = ((ks * 8 + rg) * 2 + kc) * 32 + r8 * 4 + k4 (wgmma::kmajor_off, R = 64)
      const unsigned r8 = o4 & 7, kc = (o4 >> 3) & 1, rg = (o4 >> 4) & 7, ks = o4 >> 7;
      float4 big, small;
      split4(*reinterpret_cast<const float4 *>(&s[(rg * 8 + r8) * kS + ks * 8 + kc * 4]), big,
             small);
      rb[o4] = big;
      rs[o4] = small;
    }
    if (tp == kPlanes) continue;  // v: no transposed image
    float4 *tb = reinterpret_cast<float4 *>(planes + img_off<DP>(p, tp, 0, b, tile));
    float4 *ts = reinterpret_cast<float4 *>(planes + img_off<DP>(p, tp, 1, b, tile));
    for (unsigned o4 = threadIdx.x; o4 < kImg / 4; o4 += 256) {
      // o = 4 o4 + k4 = ((ks * DP / 8 + rg) * 2 + kc) * 32 + r8 * 4 + k4 (kmajor_off, R = DP)
      const unsigned r8 = o4 & 7, kc = (o4 >> 3) & 1, rg = (o4 >> 4) % (DP / 8),
                     ks = (o4 >> 4) / (DP / 8);
      const unsigned col = rg * 8 + r8, r0 = ks * 8 + kc * 4;
      const float4 a = make_float4(s[inv_perm(r0 + 0) * kS + col], s[inv_perm(r0 + 1) * kS + col],
                                   s[inv_perm(r0 + 2) * kS + col], s[inv_perm(r0 + 3) * kS + col]);
      float4 big, small;
      split4(a, big, small);
      tb[o4] = big;
      ts[o4] = small;
    }
  }
  pdl_wait();  // launched dependent on d_kernel / bits_kernel (whose results it does not read)
}

// Block (key tile, query tile, mask problem): the exclusion bits (mask entry == 0) of a 64 x 64
// tile of the mask, one 32-bit word per thread of each kernel holding its 32 scores' bits, so that
// a masked tile costs the kernels one load a thread instead of a 16 KB mask tile and 32 shared
// loads (used for kMasked tiles only: in range, mask_fill = -inf).
__global__ void __launch_bounds__(128)
    bits_kernel(WP p, unsigned mproblems, uint32_t *__restrict bits) {
  pdl_trigger();  // planes_kernel, launched after it, does not read the bits
  __shared__ float s[kT][kT + 1];
  const unsigned jt = blockIdx.x, it = blockIdx.y;
  const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (uint64_t mp = blockIdx.z; mp < mproblems; mp += gridDim.z) {
    const float *mb = p.mask + mp * p.mask_stride;
    __syncthreads();
    if (p.mask_vec && it * kT + kT <= p.n && jt * kT + kT <= p.n) {
      float4 m4[8];  // all 8 loads in flight before the stores
#pragma unroll
      for (unsigned u = 0; u < 8; ++u) {
        const unsigned e = threadIdx.x + 128 * u, r = e / (kT / 4), c = 4 * (e % (kT / 4));
        m4[u] = *reinterpret_cast<const float4 *>(mb + (uint64_t)(it * kT + r) * p.n + jt * kT + c);
      }
#pragma unroll
      for (unsigned u = 0; u < 8; ++u) {
        const unsigned e = threadIdx.x + 128 * u, r = e / (kT / 4), c = 4 * (e % (kT / 4));
        s[r][c] = m4[u].x, s[r][c + 1] = m4[u].y, s[r][c + 2] = m4[u].z, s[r][c + 3] = m4[u].w;
      }
    } else {
      for (unsigned e = threadIdx.x; e < kT * kT; e += 128) {
        const unsigned r = e / kT, c = e % kT, i = it * kT + r, j = jt * kT + c;
        s[r][c] = (i < p.n && j < p.n) ? mb[(uint64_t)i * p.n + j] : 1.0f;
      }
    }
    __syncthreads();
    uint32_t kv = 0, qv = 0;
#pragma unroll
    for (unsigned c = 0; c < 8; ++c)
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) {
        // dkdv: rows = keys 16 w + g (+8), columns = queries 8 c + 2 t (+1); dq: the transpose.
        const unsigned a = 16 * w + g + 8 * (e >> 1), z = 8 * c + 2 * t + (e & 1);
        kv |= (uint32_t)(s[z][a] == 0.0f) << (4 * c + e);
        qv |= (uint32_t)(s[a][z] == 0.0f) << (4 * c + e);
      }
    uint32_t *o = bits + mp * p.bits_stride + ((uint64_t)it * p.ntiles + jt) * kBitsPerTile;
    o[threadIdx.x] = kv;
    o[128 + threadIdx.x] = qv;
  }
  pdl_wait();  // launched dependent on d_kernel (whose result it does not read)
}

// The exclusion word of this thread for tile (it, jt) of problem b; order 0: dkdv, 1: dq.
__device__ __forceinline__ uint32_t bits_at(const WP &p, uint64_t b, unsigned it, unsigned jt,
                                            unsigned order, unsigned tid) {
  return p.bits[b * p.bits_stride + ((uint64_t)it * p.ntiles + jt) * kBitsPerTile + order * 128 +
                tid];
}

// The same for a step: the tile's word at DP = 64; at DP = 128 the half that the step's 16
// fragment elements hold (step h of the tile: the word's bits 16 h .. 16 h + 15, shifted down).
template <unsigned DP>
__device__ __forceinline__ uint32_t step_bits(const WP &p, uint64_t b, unsigned it, unsigned jt,
                                              unsigned h, unsigned order, unsigned tid) {
  const uint32_t word = bits_at(p, b, it, jt, order, tid);
  if (Geo<DP>::kS == kT) return word;
  return (word >> (16 * h)) & 0xFFFFu;
}

// ---- shared pieces of the two kernels -----------------------------------------------------------

// FLOATS floats (a multiple of 512) global -> shared by the warpgroup's 128 threads (tid: the
// thread's index in its warpgroup), 16 bytes per copy.
template <unsigned FLOATS>
__device__ __forceinline__ void copy_n(float *dst, const float *src, unsigned tid) {
  static_assert(FLOATS % 512 == 0, "whole rounds of 128 x 16 bytes");
#pragma unroll
  for (unsigned i = 0; i < FLOATS / 512; ++i) {
    const unsigned o = (tid + 128 * i) * 4;
    async::copy16(dst + o, src + o, true);
  }
}

// The big and small images of the resident (plane, problem b, tile) into dst and dst + kImg.
template <unsigned DP>
__device__ __forceinline__ void copy_plane(float *dst, const WP &p, const float *planes,
                                           unsigned plane, uint64_t b, unsigned tile,
                                           unsigned tid) {
  constexpr unsigned kImg = Geo<DP>::kImg;
  copy_n<kImg>(dst, planes + img_off<DP>(p, plane, 0, b, tile), tid);
  copy_n<kImg>(dst + kImg, planes + img_off<DP>(p, plane, 1, b, tile), tid);
}

// The big and small images of step `step` (kS rows of the streamed side) into dst and dst + kStr.
// A whole tile at DP = 64. At DP = 128 half h of tile step / 2: of a row image the rows 32 h ..
// 32 h + 31 of every k step (256 of its 512 floats), stored as a 32-row image (kmajor_off with
// R = 32); of a transposed image its k steps 4 h .. 4 h + 3 (positions 32 h ..), contiguous.
template <unsigned DP>
__device__ __forceinline__ void copy_step(float *dst, const WP &p, const float *planes,
                                          unsigned plane, uint64_t b, unsigned step, unsigned tid) {
  using G = Geo<DP>;
  constexpr unsigned kHalves = kT / G::kS, kU = 2 * G::kS;  // kU: 16-byte units per k step
  const unsigned tile = step / kHalves, h = step % kHalves;
#pragma unroll
  for (unsigned part = 0; part < 2; ++part) {
    const float *img = planes + img_off<DP>(p, plane, part, b, tile);
    float *to = dst + part * G::kStr;
    if (plane >= kQt || kHalves == 1) {
      copy_n<G::kStr>(to, img + h * G::kStr, tid);
    } else {
#pragma unroll
      for (unsigned i = 0; i < G::kStr / 512; ++i) {
        const unsigned u = tid + 128 * i, j = u / kU, x = u % kU;
        async::copy16(to + j * 8 * G::kS + 4 * x, img + j * 8 * kT + h * 8 * G::kS + 4 * x, true);
      }
    }
  }
}

// The dout^T step image rows that one group's dV products read: all of them (HALF < 0) or half
// HALF (d rows HALF DP / 2 .. of every k step: 4 DP of its 8 DP floats), by that group alone.
template <unsigned DP, int HALF>
__device__ __forceinline__ void copy_step_t(float *dst, const WP &p, const float *planes,
                                            unsigned plane, uint64_t b, unsigned step,
                                            unsigned tid) {
  using G = Geo<DP>;
  if constexpr (HALF < 0) {
    copy_step<DP>(dst, p, planes, plane, b, step, tid);
  } else {
    constexpr unsigned kHalves = kT / G::kS;
    const unsigned tile = step / kHalves, h = step % kHalves;
#pragma unroll
    for (unsigned part = 0; part < 2; ++part) {
      const float *img = planes + img_off<DP>(p, plane, part, b, tile) + h * G::kStr;
      float *to = dst + part * G::kStr;
#pragma unroll
      for (unsigned i = 0; i < G::kStr / 1024; ++i) {
        const unsigned u = tid + 128 * i, c = u / DP, x = u % DP;  // DP units per half k step
        const unsigned o = c * 8 * DP + HALF * 4 * DP + 4 * x;
        async::copy16(to + o, img + o, true);
      }
    }
  }
}

// Descriptors of the block's images: one base (desc_lo of the dynamic shared memory) and one
// 32-bit add per operand (wgmma_tf32.cuh desc_at); the offsets fold to constants after inlining.
struct Smem {
  const float *base;
  uint32_t lo;
};

__device__ __forceinline__ Smem smem_of(const float *sm) {
  return Smem{sm, wg::desc_lo((uint32_t)__cvta_generic_to_shared(sm), 128)};
}

// The operand at k step `step` of an image of R rows (K-major: 8 R floats per k step).
template <unsigned R>
__device__ __forceinline__ uint64_t dsc(const Smem &m, const float *img, unsigned step) {
  return wg::desc_at(m.lo, (uint32_t)(img - m.base + step * 8 * R) * 4u, 256);
}

// acc = A B^T over the head dimension, split TF32, the small terms first. A: a resident 64-row
// image (ab / as, big / small); B: a step's kS-row image (bb / bs).
template <unsigned DP, unsigned NV>
__device__ __forceinline__ void prod_rows(const Smem &m, float (&acc)[NV], const float *ab,
                                          const float *as, const float *bb, const float *bs) {
  constexpr unsigned kS = Geo<DP>::kS;
#pragma unroll
  for (unsigned j = 0; j < DP / 8; ++j) {
    wg::ss(acc, dsc<kT>(m, as, j), dsc<kS>(m, bb, j), j > 0);
    wg::ss(acc, dsc<kT>(m, ab, j), dsc<kS>(m, bs, j), 1);
    wg::ss(acc, dsc<kT>(m, ab, j), dsc<kS>(m, bb, j), 1);
  }
}

// The same with A in registers (a[j]: the A fragment of k step j; Geo::kRegA).
template <unsigned DP, unsigned NV>
__device__ __forceinline__ void prod_rows_reg(const Smem &m, float (&acc)[NV],
                                              const uint32_t (&ab)[DP / 8][4],
                                              const uint32_t (&as)[DP / 8][4], const float *bb,
                                              const float *bs) {
  constexpr unsigned kS = Geo<DP>::kS;
#pragma unroll
  for (unsigned j = 0; j < DP / 8; ++j) {
    wg::rs(acc, as[j], dsc<kS>(m, bb, j), j > 0);
    wg::rs(acc, ab[j], dsc<kS>(m, bs, j), 1);
    wg::rs(acc, ab[j], dsc<kS>(m, bb, j), 1);
  }
}

// acc = A B^T as prod_rows (the same products in the same order: the same bits) with A's big
// part in registers (ab[j]: the A fragment of k step j) and its small part an image (as): two of
// each k step's three products read one operand from shared memory, not two.
template <unsigned DP, unsigned NV>
__device__ __forceinline__ void prod_rows_big_reg(const Smem &m, float (&acc)[NV],
                                                  const uint32_t (&ab)[DP / 8][4],
                                                  const float *as, const float *bb,
                                                  const float *bs) {
  constexpr unsigned kS = Geo<DP>::kS;
#pragma unroll
  for (unsigned j = 0; j < DP / 8; ++j) {
    wg::ss(acc, dsc<kT>(m, as, j), dsc<kS>(m, bb, j), j > 0);
    wg::rs(acc, ab[j], dsc<kS>(m, bs, j), 1);
    wg::rs(acc, ab[j], dsc<kS>(m, bb, j), 1);
  }
}

// The A fragments (big, small) of the 64-row resident tile `tile` of plane for this thread
// (warp w, lane 4 g + t): rows 16 w + g (+8), columns 8 j + t (+4), read from the plane images
// in global memory once per problem (the same split values as an image in shared memory).
// SMALL = false: the big fragments only (as is not written).
template <unsigned DP, bool SMALL = true, unsigned NS = DP / 8>
__device__ __forceinline__ void load_a(uint32_t (&ab)[DP / 8][4], uint32_t (&as)[NS][4],
                                       const WP &p, const float *planes, unsigned plane,
                                       uint64_t b, unsigned tile, unsigned w, unsigned g,
                                       unsigned t) {
  const float *ib = planes + img_off<DP>(p, plane, 0, b, tile);
  const float *is = planes + img_off<DP>(p, plane, 1, b, tile);
#pragma unroll
  for (unsigned j = 0; j < DP / 8; ++j)
#pragma unroll
    for (unsigned e = 0; e < 4; ++e) {
      const uint32_t o = wg::kmajor_off(16 * w + g + 8 * (e & 1), 8 * j + t + 4 * (e >> 1), kT);
      ab[j][e] = __float_as_uint(__ldg(ib + o));
      if constexpr (SMALL) as[j][e] = __float_as_uint(__ldg(is + o));
    }
}

// The split of a register operand (P, dS) in 3 instructions (mma::split takes 9): big = x
// rounded to TF32 (bits + 0x1000, the low 13 bits cleared: nearest, ties away, for finite x, as
// mma::split_hw), small = x - big (exact) passed whole, which the tensor cores read as its top
// 19 bits: small TRUNCATED to TF32, within 2^-21 |x| of x - big where split() rounds it (2^-22).
// A NaN x keeps a NaN small (x - big, whatever big became), so NaN still reaches the products;
// an infinite x gives big = x and a NaN small, as split().
__device__ __forceinline__ void split_a(float x, uint32_t &big, uint32_t &small) {
  big = (__float_as_uint(x) + 0x1000u) & ~0x1fffu;
  small = __float_as_uint(x - __uint_as_float(big));
}

// acc (64 x DP) += X B where X (64 x kS) is held as C fragments in x (row 16 w + g (+8), column
// 8 c + 2t (+1)) and B's transposed step images tb / ts (DP rows): each 8-column step of x is an
// A fragment in the permuted order, split in registers.
template <unsigned DP, unsigned NA, unsigned NV>
__device__ __forceinline__ void prod_frag(const Smem &m, float (&acc)[NA], const float (&x)[NV],
                                          const float *tb, const float *ts) {
#pragma unroll
  for (unsigned c = 0; c < NV / 4; ++c) {
    uint32_t big[4], small[4];
    split_a(x[4 * c], big[0], small[0]);
    split_a(x[4 * c + 2], big[1], small[1]);
    split_a(x[4 * c + 1], big[2], small[2]);
    split_a(x[4 * c + 3], big[3], small[3]);
    wg::rs(acc, small, dsc<DP>(m, tb, c), 1);
    wg::rs(acc, big, dsc<DP>(m, ts, c), 1);
    wg::rs(acc, big, dsc<DP>(m, tb, c), 1);
  }
}

// The mask tile of queries i0 .. i0 + NI - 1 (rows) and keys j0 .. j0 + NJ - 1 (columns) into mt
// (row stride kMS) by cp.async, zeros past n (those entries are out of range, never read as a
// mask).
template <unsigned NI, unsigned NJ>
__device__ __forceinline__ void copy_mask(float *mt, const WP &p, const float *mb, unsigned i0,
                                          unsigned j0, unsigned tid) {
  static_assert(NI <= kT && NJ <= kT, "a staged mask tile holds at most 64 x 64");
  if (p.mask_vec) {
#pragma unroll
    for (unsigned u = tid; u < NI * NJ / 4; u += 128) {
      const unsigned r = u / (NJ / 4), c = 4 * (u % (NJ / 4)), i = i0 + r, j = j0 + c;
      const bool ok = i < p.n && j < p.n;
      async::copy16(mt + r * kMS + c, ok ? mb + (uint64_t)i * p.n + j : mb, ok);
    }
  } else {
    for (unsigned u = tid; u < NI * NJ; u += 128) {
      const unsigned r = u / NJ, c = u % NJ, i = i0 + r, j = j0 + c;
      const bool ok = i < p.n && j < p.n;
      async::copy4(mt + r * kMS + c, ok ? mb + (uint64_t)i * p.n + j : mb, ok);
    }
  }
}

// The header's s(i, j) from the product; m: the mask entry (1 without a mask), for a kGeneral
// tile (tile_kind below).
__device__ __forceinline__ float score_at(const WP &p, unsigned i, unsigned j, float dot,
                                          float m) {
  if (i >= p.n || j >= p.n) return kNegInf;
  return attn::score(dot, (p.causal && j > i) || m == 0.0f, p.scale, p.fill);
}

// P = exp(s - lse) for a non-excluded score, 0 for an excluded one (attn::prob), the exp by
// ex2.approx (EX2: attn::exp_ex2, 2^((s - lse) log2 e), ~2^-22 relative plus the argument's
// rounding, 3 instructions; results below 2^-126 flush to 0) or by the shared exp_f (~22).
// PLAIN: a score that cannot be excluded (a kPlain tile, an allowed entry of a kMasked one; its
// row's lse is then finite): no test.
template <bool EX2, bool PLAIN = false>
__device__ __forceinline__ float prob(float s, float ref) {
  if (!EX2) return attn::prob(s, ref);
  if (!PLAIN && s == kNegInf) return 0.0f;
  return attn::exp_ex2(s - ref);
}

// How a tile of queries i0 .. i0 + ni - 1 and keys j0 .. j0 + nj - 1 computes its scores.
// kPlain: wholly in range, unmasked, below the diagonal: s = dot * scale, never excluded.
// kMasked: the same but masked, with mask_fill = -inf: excluded where the exclusion bit
// (bits_kernel) is set, else s = dot * scale (no mask tile, bounds, causal or fill arithmetic).
// kGeneral: the header's s(i, j) in full (score_at), the mask from a staged mask tile.
enum Kind { kPlain, kMasked, kGeneral };
__device__ __forceinline__ Kind tile_kind(const WP &p, unsigned i0, unsigned ni, unsigned j0,
                                          unsigned nj) {
  if (i0 + ni > p.n || j0 + nj > p.n || (p.causal && j0 + nj - 1 > i0)) return kGeneral;
  if (p.mask == nullptr) return kPlain;
  return p.bits != nullptr ? kMasked : kGeneral;
}

// The thread's query of C fragment element e, as an index into its per-query values (lse, D):
// 2 (e / 4) + (e & 1) of NV / 2 when the queries are the fragment's columns (dkdv), (e & 3) >> 1
// of 2 when they are its rows (dq).
template <bool QCOLS>
__device__ __forceinline__ constexpr unsigned qidx(unsigned e) {
  return QCOLS ? 2 * (e / 4) + (e & 1) : (e & 3) >> 1;
}

// P = exp(s scale - lse) in place of s over a kPlain tile, or a kMasked one (MASKED: 0 where bit
// e of the exclusion word exw is set).
template <bool EX2, bool QCOLS, bool MASKED, unsigned NR, unsigned NV>
__device__ __forceinline__ void probs(float (&s)[NV], const float (&L)[NR], float scale,
                                      uint32_t exw) {
  static_assert(NR == (QCOLS ? NV / 2 : 2), "one lse per query of the thread");
#pragma unroll
  for (unsigned e = 0; e < NV; ++e) {
    const float pr = prob<EX2, true>(s[e] * scale, L[qidx<QCOLS>(e)]);
    s[e] = MASKED && ((exw >> e) & 1u) ? 0.0f : pr;
  }
}

// dS = P (dP - D) over a tile in place of dp (P in pr); zero where bit e of ex is set (an
// excluded score; ex == 0 on every kPlain tile).
template <bool QCOLS, unsigned NR, unsigned NV>
__device__ __forceinline__ void dscores(float (&dp)[NV], const float (&pr)[NV],
                                        const float (&Dq)[NR], uint32_t ex) {
  static_assert(NR == (QCOLS ? NV / 2 : 2), "one D per query of the thread");
  if (ex == 0) {
#pragma unroll
    for (unsigned e = 0; e < NV; ++e) dp[e] = pr[e] * (dp[e] - Dq[qidx<QCOLS>(e)]);
  } else {
#pragma unroll
    for (unsigned e = 0; e < NV; ++e) {
      const float v = pr[e] * (dp[e] - Dq[qidx<QCOLS>(e)]);
      dp[e] = (ex >> e) & 1u ? 0.0f : v;
    }
  }
}

// Stores a thread's share of a 64-row accumulator of problem b into dst (n x d, row-major; none
// if NULLABLE and dst is NULL): rows r0 + 16 w + g (+8), columns c0 + 8 c + 2 t (+1), those
// inside n x d, times scale if SCALE. (The kernels' three epilogues: dq, dk, dV or its halves.)
template <bool SCALE, bool NULLABLE, unsigned NA>
__device__ __forceinline__ void store_acc(float *dst, const WP &p, uint64_t b, unsigned r0,
                                          unsigned c0, const float (&acc)[NA], unsigned w,
                                          unsigned g, unsigned t) {
#pragma unroll
  for (unsigned c = 0; c < NA / 4; ++c)
#pragma unroll
    for (unsigned e = 0; e < 4; ++e) {
      const unsigned r = r0 + 16 * w + g + 8 * (e >> 1), col = c0 + 8 * c + 2 * t + (e & 1);
      if ((!NULLABLE || dst) && r < p.n && col < p.d)
        dst[(b * p.n + r) * p.d + col] = SCALE ? acc[4 * c + e] * p.scale : acc[4 * c + e];
    }
}

// ---- the kernels ---------------------------------------------------------------------------------
//
// Two warpgroups with disjoint operands (the top comment): each group's softmax or dS arithmetic
// runs while the other group's products keep the tensor cores busy; with one warpgroup per SM
// (session 12's kernels) those phases ran one after the other. The hand-over of P: the P group
// waits on "empty", stores P and its exclusion word, arrives at "full"; the dS group waits on
// "full", loads them, arrives at "empty" (the buffer starts empty: one arrival before the first
// tile; none after the block's last). A bar.arrive orders the arriving thread's earlier shared
// accesses before the completion of the barrier that the other side's bar.sync waits for (the
// PTX memory model), which compute-sanitizer racecheck does not model: it reports the hand-over's
// loads and stores as hazards, as it does for the same protocol alone in
// scripts/racecheck_arrive.cu (and none when both sides bar.sync there).

// Named barriers (0 is __syncthreads): 1 + group within a group, and the hand-over pair.
enum Bar : unsigned { kBarP = 1, kBarDS = 2, kBarFull = 3, kBarEmpty = 4 };

__device__ __forceinline__ void bar_sync(unsigned id, unsigned threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void bar_arrive(unsigned id, unsigned threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// This group's cp.async groups but the newest N have landed and are visible to its products.
template <unsigned N>
__device__ __forceinline__ void group_landed(unsigned bar) {
  async::wait<N>();
  wg::fence_proxy_async();
  bar_sync(bar, 128);
}

// N per-query values (lse or D) of queries i0 .. i0 + N - 1 into dst by cp.async, by the group's
// threads tid < N (zeros past n and where src is NULL).
template <unsigned N>
__device__ __forceinline__ void copy_rows(float *dst, const WP &p, const float *src, uint64_t b,
                                          unsigned i0, unsigned tid) {
  if (tid >= N) return;
  const bool ok = src != nullptr && i0 + tid < p.n;
  async::copy4(dst + tid, ok ? src + b * p.n + i0 + tid : dst /* unread */, ok);
}

// The staged per-query values (lse or D) of this thread's NQ queries 8 c + 2 t + h of a dkdv
// step (the fragment's columns), entry 2 c + h.
template <unsigned NQ>
__device__ __forceinline__ void query_values(float (&v)[NQ], const float *src, unsigned t) {
#pragma unroll
  for (unsigned c = 0; c < NQ / 2; ++c) {
    const float2 x = *reinterpret_cast<const float2 *>(src + 8 * c + 2 * t);
    v[2 * c] = x.x, v[2 * c + 1] = x.y;
  }
}

// The hand-over buffer (Geo::kXs floats): fragment element e of thread T at xs[512 (e / 4) + 4 T
// + e % 4] (16-byte stores and loads, conflict-free), its exclusion word at xs[128 NV + T].
template <unsigned NV>
__device__ __forceinline__ void put_p(float *xs, const float (&s)[NV], uint32_t ex, unsigned tid) {
#pragma unroll
  for (unsigned c = 0; c < NV / 4; ++c)
    *reinterpret_cast<float4 *>(xs + 512 * c + 4 * tid) =
        make_float4(s[4 * c], s[4 * c + 1], s[4 * c + 2], s[4 * c + 3]);
  reinterpret_cast<uint32_t *>(xs)[128 * NV + tid] = ex;
}
template <unsigned NV>
__device__ __forceinline__ uint32_t get_p(const float *xs, float (&s)[NV], unsigned tid) {
#pragma unroll
  for (unsigned c = 0; c < NV / 4; ++c) {
    const float4 v = *reinterpret_cast<const float4 *>(xs + 512 * c + 4 * tid);
    s[4 * c] = v.x, s[4 * c + 1] = v.y, s[4 * c + 2] = v.z, s[4 * c + 3] = v.w;
  }
  return reinterpret_cast<const uint32_t *>(xs)[128 * NV + tid];
}

// The P group's side of the hand-over: waits until the dS group has taken the previous P, stores
// this one, signals it.
template <unsigned NV>
__device__ __forceinline__ void give_p(float *xs, const float (&s)[NV], uint32_t ex,
                                       unsigned tid) {
  bar_sync(kBarEmpty, 256);
  put_p(xs, s, ex, tid);
  bar_arrive(kBarFull, 256);
}

// The dS group's side: waits for P, loads it and its exclusion word, frees the buffer unless
// this was the block's last tile (release false: no arrival is left pending at exit).
template <unsigned NV>
__device__ __forceinline__ uint32_t take_p(const float *xs, float (&s)[NV], unsigned tid,
                                           bool release) {
  bar_sync(kBarFull, 256);
  const uint32_t ex = get_p(xs, s, tid);
  if (release) bar_arrive(kBarEmpty, 256);
  return ex;
}

// P over a kGeneral tile of queries i0.. and keys j0.. in place of the products s (QCOLS: the
// queries are the fragment's columns, dkdv; else its rows, dq), the mask entries from the staged
// tile mt (none without a mask); returns the exclusion word.
template <bool EX2, bool QCOLS, unsigned NR, unsigned NV>
__device__ __forceinline__ uint32_t general_probs(const WP &p, float (&s)[NV], const float (&L)[NR],
                                                  unsigned i0, unsigned j0, const float *mt,
                                                  bool masked, unsigned w, unsigned g, unsigned t) {
  uint32_t ex = 0;
#pragma unroll
  for (unsigned c = 0; c < NV / 4; ++c)
#pragma unroll
    for (unsigned e = 0; e < 4; ++e) {
      const unsigned a = 16 * w + g + 8 * (e >> 1), z = 8 * c + 2 * t + (e & 1);
      const unsigned ir = QCOLS ? z : a, jr = QCOLS ? a : z;
      const float sc = score_at(p, i0 + ir, j0 + jr, s[4 * c + e],
                                masked ? mt[ir * kMS + jr] : 1.0f);
      s[4 * c + e] = prob<EX2>(sc, L[qidx<QCOLS>(4 * c + e)]);
      ex |= (uint32_t)(sc == kNegInf) << (4 * c + e);
    }
  return ex;
}

// P (in place of the products s) of tile (queries i0.., keys j0..) by its kind; returns the
// exclusion word.
template <bool EX2, bool QCOLS, unsigned NR, unsigned NV>
__device__ __forceinline__ uint32_t tile_probs(const WP &p, Kind kind, float (&s)[NV],
                                               const float (&L)[NR], uint32_t exw, unsigned i0,
                                               unsigned j0, const float *mt, bool masked,
                                               unsigned w, unsigned g, unsigned t) {
  if (kind == kPlain) {
    probs<EX2, QCOLS, false>(s, L, p.scale, 0u);
    return 0u;
  }
  if (kind == kMasked) {
    probs<EX2, QCOLS, true>(s, L, p.scale, exw);
    return exw;
  }
  return general_probs<EX2, QCOLS>(p, s, L, i0, j0, mt, masked, w, g, t);
}

constexpr size_t kMaskBytes = kT * kMS * sizeof(float);
static_assert(Geo<64>::kDkdvFloats * 4 + kMaskBytes <= 227 * 1024, "sm_90's shared memory");
static_assert(Geo<128>::kDkdvFloats * 4 + kMaskBytes <= 227 * 1024, "sm_90's shared memory");

// dkdv_kernel: block (key tile jt, problem), loops over the query steps (Geo, kS queries each).
// Shared memory (Geo::kDkdvFloats): the P group's K images (none at DP = 128: K in registers)
// and Q step images, the dS group's V images and dout, Q^T, dout^T step images, lse and D of the
// step, the hand-over buffer, then the mask tile (kS queries x 64 keys) when masked.
template <unsigned DP, bool EX2, unsigned DV>
__global__ void __launch_bounds__(256, 1)
    dkdv_kernel(WP p, const float *__restrict planes, const float *__restrict lse,
                const float *__restrict D, float *__restrict dk, float *__restrict dv) {
  // Launched dependent on planes_kernel: its images (and, through its own wait, D and the bits)
  // are complete and visible once pdl_wait returns. Only then may dq_kernel (launched dependent
  // on this kernel; it reads nothing this kernel writes, but reads the images) begin.
  pdl_wait();
  pdl_trigger();
  using G = Geo<DP>;
  // Which group computes dV += P^T dout (DV: 0 the dS group, 1 the P group, 2 the P group its
  // first DP / 2 columns and the dS group the rest, each from its half of the dout^T images).
  // Geo::kDV picks 1 or 2; 0 (measured slower at both sizes, session 14) stays expressible for
  // measurements.
  static_assert(DV <= 2, "dV by the dS group, the P group, or split");
  constexpr bool PV = DV != 0, SV = DV != 1;
  constexpr unsigned kNAP = DV == 1 ? G::kNA : DV == 2 ? G::kNA / 2 : 1;
  constexpr unsigned kNAS = DV == 0 ? G::kNA : DV == 2 ? G::kNA / 2 : 1;
  constexpr int kHalfP = DV == 2 ? 0 : -1, kHalfS = DV == 2 ? 1 : -1;
  constexpr unsigned kOffS = DV == 2 ? 4 * DP : 0;  // floats into each k step of dout^T
  constexpr unsigned kS = G::kS, kNV = G::kNV, kHalves = kT / kS;
  float *sm = async::dynamic_smem();
  const Smem m = smem_of(sm);
  float *kb = sm, *qb = kb + G::kResA, *vb = qb + 2 * G::kStr, *ob = vb + 2 * G::kImg;
  float *qtb = ob + 2 * G::kStr, *otb = qtb + 2 * G::kStr, *ls = otb + 2 * G::kStr, *ds = ls + kS;
  float *xs = ds + kS, *mt = xs + G::kXs;
  const unsigned tid = threadIdx.x % 128, w = tid / 32, lane = threadIdx.x % 32, g = lane / 4,
                 t = lane % 4;
  const unsigned jt = blockIdx.x, jb = jt * kT;
  const unsigned nsteps = (p.n + kS - 1) / kS;
  const unsigned first = p.skip ? jb / kS : 0;
  if (threadIdx.x < 128) {
    // P group: S^T = K Q^T, P^T.
    uint32_t ka[G::kRegA ? DP / 8 : 1][4], ksm[G::kRegA ? DP / 8 : 1][4];
    for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
      const float *mb = p.mask ? p.mask + b * p.mask_stride : nullptr;
      bar_sync(kBarP, 128);  // the previous problem's products are done
      if constexpr (!G::kRegA) copy_plane<DP>(kb, p, planes, kKr, b, jt, tid);
      copy_step<DP>(qb, p, planes, kQr, b, first, tid);
      async::commit();
      copy_rows<kS>(ls, p, lse, b, first * kS, tid);
      if (mb && tile_kind(p, first * kS, kS, jb, kT) == kGeneral)
        copy_mask<kS, kT>(mt, p, mb, first * kS, jb, tid);
      async::commit();
      if constexpr (PV) {
        copy_step_t<DP, kHalfP>(otb, p, planes, kDt, b, first, tid);
        async::commit();
      }
      if constexpr (G::kRegA) load_a<DP>(ka, ksm, p, planes, kKr, b, jt, w, g, t);
      float gv[kNAP];
#pragma unroll
      for (unsigned e = 0; e < kNAP; ++e) gv[e] = 0.0f;
      // Loop invariant at the top: two groups in flight for step it, oldest first: the Q row
      // images (with K on entry), lse and the mask tile (PV: and a third, the dout^T images).
      for (unsigned it = first; it < nsteps; ++it) {
        const unsigned i0 = it * kS;
        const bool more = it + 1 < nsteps;
        group_landed<PV ? 2 : 1>(kBarP);
        const Kind kind = tile_kind(p, i0, kS, jb, kT);
        const uint32_t exw =
            kind == kMasked ? step_bits<DP>(p, b, it / kHalves, jt, it % kHalves, 0, tid) : 0u;
        float s[kNV];
        wg::fence();
        if constexpr (G::kRegA)
          prod_rows_reg<DP>(m, s, ka, ksm, qb, qb + G::kStr);
        else
          prod_rows<DP>(m, s, kb, kb + G::kImg, qb, qb + G::kStr);
        wg::commit();
        group_landed<PV ? 1 : 0>(kBarP);  // lse and the mask tile, under the products
        float L[kNV / 2];
        query_values(L, ls, t);
        wg::wait<0>();
        wg::reg_fence(s);
        bar_sync(kBarP, 128);  // every warp's products have read the Q images
        if (more) copy_step<DP>(qb, p, planes, kQr, b, it + 1, tid);
        async::commit();
        const uint32_t ex = tile_probs<EX2, true>(p, kind, s, L, exw, i0, jb, mt, mb != nullptr,
                                                  w, g, t);
        bar_sync(kBarP, 128);  // every thread is past its reads of ls and mt
        if (more) {
          copy_rows<kS>(ls, p, lse, b, i0 + kS, tid);
          if (mb && tile_kind(p, i0 + kS, kS, jb, kT) == kGeneral)
            copy_mask<kS, kT>(mt, p, mb, i0 + kS, jb, tid);
        }
        async::commit();
        give_p(xs, s, ex, tid);
        if constexpr (PV) {
          group_landed<2>(kBarP);  // the dout^T images
          wg::fence();
          prod_frag<DP>(m, gv, s, otb, otb + G::kStr);
          wg::commit();
          wg::wait<0>();
          bar_sync(kBarP, 128);  // every warp's products have read the dout^T images
          if (more) copy_step_t<DP, kHalfP>(otb, p, planes, kDt, b, it + 1, tid);
          async::commit();
        }
      }
      async::wait<0>();
      if constexpr (PV) {
        wg::reg_fence(gv);
        store_acc<false, true>(dv, p, b, jb, 0, gv, w, g, t);
      }
    }
  } else {
    // dS group: dP^T = V dout^T, dS^T = P^T (dP^T - D), dV += P^T dout, dK += dS^T Q.
    bar_arrive(kBarEmpty, 256);  // the hand-over buffer starts empty
    for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
      const bool last_problem = b + gridDim.y >= p.bh;
      bar_sync(kBarDS, 128);
      copy_plane<DP>(vb, p, planes, kVr, b, jt, tid);
      copy_step<DP>(ob, p, planes, kDr, b, first, tid);
      async::commit();
      copy_rows<kS>(ds, p, D, b, first * kS, tid);
      async::commit();
      copy_step<DP>(qtb, p, planes, kQt, b, first, tid);
      if constexpr (SV) copy_step_t<DP, kHalfS>(otb, p, planes, kDt, b, first, tid);
      async::commit();
      float gk[G::kNA], gv[kNAS];
#pragma unroll
      for (unsigned e = 0; e < G::kNA; ++e) gk[e] = 0.0f;
#pragma unroll
      for (unsigned e = 0; e < kNAS; ++e) gv[e] = 0.0f;
      // Loop invariant at the top: three groups in flight for step it, oldest first: the dout
      // row images (with V on entry), D, the Q^T and dout^T images.
      for (unsigned it = first; it < nsteps; ++it) {
        const unsigned i0 = it * kS;
        const bool more = it + 1 < nsteps;
        group_landed<2>(kBarDS);
        float dp[kNV];
        wg::fence();
        prod_rows<DP>(m, dp, vb, vb + G::kImg, ob, ob + G::kStr);
        wg::commit();
        group_landed<1>(kBarDS);  // D, under the products
        float Dq[kNV / 2];
        query_values(Dq, ds, t);
        wg::wait<0>();
        wg::reg_fence(dp);
        bar_sync(kBarDS, 128);  // every warp's products have read the dout images
        if (more) copy_step<DP>(ob, p, planes, kDr, b, it + 1, tid);
        async::commit();
        float pr[kNV];
        const uint32_t ex = take_p(xs, pr, tid, more || !last_problem);
        dscores<true>(dp, pr, Dq, ex);  // dS^T
        group_landed<1>(kBarDS);  // the Q^T, dout^T images; every thread is past its reads of ds
        if (more) copy_rows<kS>(ds, p, D, b, i0 + kS, tid);
        async::commit();
        wg::fence();
        if constexpr (SV) {
          // dV's products first, in their own group: the dout^T images are refilled as soon
          // as those are done, under dK's products.
          prod_frag<DP>(m, gv, pr, otb + kOffS, otb + G::kStr + kOffS);
          wg::commit();
          prod_frag<DP>(m, gk, dp, qtb, qtb + G::kStr);
          wg::commit();
          wg::wait<1>();
          bar_sync(kBarDS, 128);  // every warp's dV products have read the dout^T images
          if (more) copy_step_t<DP, kHalfS>(otb, p, planes, kDt, b, it + 1, tid);
        } else {
          prod_frag<DP>(m, gk, dp, qtb, qtb + G::kStr);
          wg::commit();
        }
        wg::wait<0>();
        bar_sync(kBarDS, 128);  // every warp's products have read the Q^T images
        if (more) copy_step<DP>(qtb, p, planes, kQt, b, it + 1, tid);
        async::commit();
      }
      async::wait<0>();
      wg::reg_fence(gk);
      wg::reg_fence(gv);
      store_acc<true, true>(dk, p, b, jb, 0, gk, w, g, t);
      if constexpr (SV) store_acc<false, true>(dv, p, b, jb, DV == 2 ? DP / 2 : 0, gv, w, g, t);
    }
  }
}

// dq_kernel: block (query tile it, problem), loops over the key steps (kS keys each) up to the
// diagonal when skipping. Shared memory (Geo::kDqFloats): the P group's Q images (none at DP =
// 128: Q in registers) and K step images, the dS group's dout images and V, K^T step images, the
// hand-over buffer, then the mask tile (64 queries x kS keys) when masked.
template <unsigned DP, bool EX2>
__global__ void __launch_bounds__(256, 1)
    dq_kernel(WP p, const float *__restrict planes, const float *__restrict lse,
              const float *__restrict D, float *__restrict dq) {
  using G = Geo<DP>;
  constexpr unsigned kS = G::kS, kNV = G::kNV, kHalves = kT / kS;
  float *sm = async::dynamic_smem();
  const Smem m = smem_of(sm);
  float *qb = sm, *kb = qb + G::kResA, *ob = kb + 2 * G::kStr, *vb = ob + 2 * G::kImg;
  float *ktb = vb + 2 * G::kStr, *xs = ktb + 2 * G::kStr, *mt = xs + G::kXs;
  const unsigned tid = threadIdx.x % 128, w = tid / 32, lane = threadIdx.x % 32, g = lane / 4,
                 t = lane % 4;
  const unsigned it = blockIdx.x, i0 = it * kT;
  const unsigned nsteps = (p.n + kS - 1) / kS;
  const unsigned diag = (i0 + kT - 1) / kS;  // the step holding key i0 + 63
  const unsigned last = p.skip && diag < nsteps ? diag : nsteps - 1;
  if (threadIdx.x < 128) {
    // P group: S = Q K^T, P.
    uint32_t qa[G::kRegA ? DP / 8 : 1][4], qsm[G::kRegA ? DP / 8 : 1][4];
    for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
      const float *mb = p.mask ? p.mask + b * p.mask_stride : nullptr;
      bar_sync(kBarP, 128);
      if constexpr (!G::kRegA) copy_plane<DP>(qb, p, planes, kQr, b, it, tid);
      copy_step<DP>(kb, p, planes, kKr, b, 0, tid);
      async::commit();
      if (mb && tile_kind(p, i0, kT, 0, kS) == kGeneral) copy_mask<kT, kS>(mt, p, mb, i0, 0, tid);
      async::commit();
      // lse of this thread's rows i0 + 16 w + g + 8 h.
      float L[2];
#pragma unroll
      for (unsigned h = 0; h < 2; ++h) {
        const unsigned i = i0 + 16 * w + g + 8 * h;
        L[h] = i < p.n ? lse[b * p.n + i] : 0.0f;
      }
      if constexpr (G::kRegA) load_a<DP>(qa, qsm, p, planes, kQr, b, it, w, g, t);
      // Loop invariant at the top: two groups in flight for step jt, oldest first: the K row
      // images (with Q on entry), the mask tile (an empty group unless needed).
      for (unsigned jt = 0; jt <= last; ++jt) {
        const unsigned j0 = jt * kS;
        const bool more = jt + 1 <= last;
        group_landed<1>(kBarP);
        const Kind kind = tile_kind(p, i0, kT, j0, kS);
        const uint32_t exw =
            kind == kMasked ? step_bits<DP>(p, b, it, jt / kHalves, jt % kHalves, 1, tid) : 0u;
        float s[kNV];
        wg::fence();
        if constexpr (G::kRegA)
          prod_rows_reg<DP>(m, s, qa, qsm, kb, kb + G::kStr);
        else
          prod_rows<DP>(m, s, qb, qb + G::kImg, kb, kb + G::kStr);
        wg::commit();
        if (kind == kGeneral && mb) group_landed<0>(kBarP);  // the mask tile, under the products
        wg::wait<0>();
        wg::reg_fence(s);
        bar_sync(kBarP, 128);  // every warp's products have read the K images
        if (more) copy_step<DP>(kb, p, planes, kKr, b, jt + 1, tid);
        async::commit();
        const uint32_t ex = tile_probs<EX2, false>(p, kind, s, L, exw, i0, j0, mt, mb != nullptr,
                                                   w, g, t);
        bar_sync(kBarP, 128);  // every thread is past its reads of mt
        if (more && mb && tile_kind(p, i0, kT, j0 + kS, kS) == kGeneral)
          copy_mask<kT, kS>(mt, p, mb, i0, j0 + kS, tid);
        async::commit();
        give_p(xs, s, ex, tid);
      }
      async::wait<0>();
    }
  } else {
    // dS group: dP = dout V^T, dS = P (dP - D), dQ += dS K.
    bar_arrive(kBarEmpty, 256);
    for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
      const bool last_problem = b + gridDim.y >= p.bh;
      bar_sync(kBarDS, 128);
      copy_plane<DP>(ob, p, planes, kDr, b, it, tid);
      copy_step<DP>(vb, p, planes, kVr, b, 0, tid);
      async::commit();
      copy_step<DP>(ktb, p, planes, kKt, b, 0, tid);
      async::commit();
      float Dq[2];
#pragma unroll
      for (unsigned h = 0; h < 2; ++h) {
        const unsigned i = i0 + 16 * w + g + 8 * h;
        Dq[h] = (D != nullptr && i < p.n) ? D[b * p.n + i] : 0.0f;
      }
      float gq[G::kNA];
#pragma unroll
      for (unsigned e = 0; e < G::kNA; ++e) gq[e] = 0.0f;
      // At DP = 128 dout's big fragments in registers (Geo::kRegA; its small image stays).
      uint32_t oa[G::kRegA ? DP / 8 : 1][4], unused[1][4];
      if constexpr (G::kRegA) load_a<DP, false, 1>(oa, unused, p, planes, kDr, b, it, w, g, t);
      // Loop invariant at the top: two groups in flight for step jt: the V row images (with dout
      // on entry), the K^T images.
      for (unsigned jt = 0; jt <= last; ++jt) {
        const bool more = jt + 1 <= last;
        group_landed<1>(kBarDS);
        float dp[kNV];
        wg::fence();
        if constexpr (G::kRegA)
          prod_rows_big_reg<DP>(m, dp, oa, ob + G::kImg, vb, vb + G::kStr);
        else
          prod_rows<DP>(m, dp, ob, ob + G::kImg, vb, vb + G::kStr);
        wg::commit();
        wg::wait<0>();
        wg::reg_fence(dp);
        bar_sync(kBarDS, 128);  // every warp's products have read the V images
        if (more) copy_step<DP>(vb, p, planes, kVr, b, jt + 1, tid);
        async::commit();
        float pr[kNV];
        const uint32_t ex = take_p(xs, pr, tid, more || !last_problem);
        dscores<false>(dp, pr, Dq, ex);  // dS
        group_landed<1>(kBarDS);  // the K^T images
        wg::fence();
        prod_frag<DP>(m, gq, dp, ktb, ktb + G::kStr);
        wg::commit();
        wg::wait<0>();
        bar_sync(kBarDS, 128);  // every warp's products have read the K^T images
        if (more) copy_step<DP>(ktb, p, planes, kKt, b, jt + 1, tid);
        async::commit();
      }
      async::wait<0>();
      wg::reg_fence(gq);
      store_acc<true, false>(dq, p, b, i0, 0, gq, w, g, t);  // launched only for dq
    }
  }
  pdl_wait();  // launched dependent on dkdv_kernel: done only when it is
}

template <class K>
void set_smem(K kernel, size_t bytes) {
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes),
        "attention (wgmma): cudaFuncSetAttribute");
}

// 64 columns of the plane images at 32 < d <= 64, 128 at 64 < d <= 128.
unsigned padded_d(const attn::Problem &p) { return p.d <= 64 ? 64 : 128; }

uint64_t image_floats(const attn::Problem &p) {
  return 2ull * kPlanes * p.bh * ((p.n + kT - 1) / kT) * kT * padded_d(p);
}

// Mask problems with exclusion words (0: none): a mask with mask_fill = -inf, one per problem or
// one broadcast. None past 65535 tiles a side (n > 4194240, bits_kernel's grid y; such a mask
// would hold 2^44 floats): the general score path reads the mask tiles instead.
uint64_t bits_problems(const attn::Problem &p) {
  if (p.mask == nullptr || p.fill != kNegInf || (p.n + kT - 1) / kT > 65535) return 0;
  return p.mask_stride == 0 ? 1 : p.bh;
}

// The launches of one head-dimension class.
// after_ours: the kernel launched just before on st is d_kernel or bits_kernel (both call
// pdl_trigger), so planes_kernel may overlap it (it reads q, k, v and dout, not D or the bits);
// otherwise the caller's last kernel may have written those inputs, and it waits. dq_kernel
// overlaps dkdv_kernel's last wave where dkdv_kernel runs (they read the same planes, write
// different outputs).
template <unsigned DP>
void run(int dev, cudaStream_t st, const WP &wp, const dim3 &grid, bool ex2, bool masked,
         bool after_ours, const float *q, const float *k, const float *v, const float *dout,
         const float *lse, const float *D, float *planes, float *dq, float *dk, float *dv) {
  const dim3 pgrid(grid.x, grid.y, 4);
  if (after_ours)
    launch_dependent(dev, "attention (wgmma) planes_kernel", planes_kernel<DP>, pgrid, 256, 0, st,
                     wp, q, dout, k, v, planes);
  else
    launch("attention (wgmma) planes_kernel", planes_kernel<DP>, pgrid, 256, 0, st, wp, q, dout,
           k, v, planes);
  const size_t mask_bytes = masked ? kMaskBytes : 0;
  if (dk || dv) {
    constexpr unsigned kDv = Geo<DP>::kDV;
    auto kernel = ex2 ? dkdv_kernel<DP, true, kDv> : dkdv_kernel<DP, false, kDv>;
    const size_t bytes = Geo<DP>::kDkdvFloats * sizeof(float);
    set_smem(kernel, bytes + kMaskBytes);
    launch_dependent(dev, "attention (wgmma) dkdv_kernel", kernel, grid, 256, bytes + mask_bytes,
                     st, wp, planes, lse, D, dk, dv);
  }
  if (dq) {
    auto kernel = ex2 ? dq_kernel<DP, true> : dq_kernel<DP, false>;
    const size_t bytes = Geo<DP>::kDqFloats * sizeof(float);
    set_smem(kernel, bytes + kMaskBytes);
    if (dk || dv)
      launch_dependent(dev, "attention (wgmma) dq_kernel", kernel, grid, 256, bytes + mask_bytes,
                       st, wp, planes, lse, D, dq);
    else
      launch("attention (wgmma) dq_kernel", kernel, grid, 256, bytes + mask_bytes, st, wp, planes,
             lse, D, dq);
  }
}

}  // namespace

// 32 < d: the operand planes take 14 x DP / d floats per element of q (d is padded to DP), at
// most 28 at d = 33; smaller d would multiply that (896 at d = 1) for products the exact kernels
// do cheaply (their work is proportional to d).
bool bwd_applies(const attn::Problem &p) { return p.d > 32 && p.d <= 128; }

uint64_t bwd_planes_floats(const attn::Problem &p) {
  const uint64_t nt = (p.n + kT - 1) / kT;
  return image_floats(p) + bits_problems(p) * nt * nt * kBitsPerTile;
}

void bwd(int dev, const attn::Problem &p, const float *q, const float *k, const float *v,
         const float *dout, const float *lse, const float *D, float *planes, float *dq,
         float *dk, float *dv) {
  cudaStream_t st = stream(dev);
  const unsigned ntiles = (unsigned)((p.n + kT - 1) / kT);
  WP wp{(unsigned)p.n, (unsigned)p.d, (unsigned)p.bh, ntiles, p.mask, p.mask_stride,
              p.scale, p.fill, p.causal, p.causal && p.fill == kNegInf,
              p.mask != nullptr && (uintptr_t)p.mask % 16 == 0 && p.n % 4 == 0, nullptr, 0};
  const dim3 grid(ntiles, (unsigned)(p.bh < 65535 ? p.bh : 65535));
  const uint64_t mproblems = bits_problems(p);
  // TLRT_ATTN_EXP=shared in the environment (read per call; a measurement hook): P with the
  // shared exp (tlrt::math::exp_f) instead of ex2.approx.
  const char *e = std::getenv("TLRT_ATTN_EXP");
  const bool ex2 = !(e != nullptr && e[0] == 's');
  if (mproblems != 0) {
    uint32_t *bits = reinterpret_cast<uint32_t *>(planes + image_floats(p));
    wp.bits = bits;
    wp.bits_stride = p.mask_stride == 0 ? 0 : (uint64_t)ntiles * ntiles * kBitsPerTile;
    // D != nullptr: d_kernel was launched just before (it calls pdl_trigger), so the bits may
    // overlap it (a 1024^2 mask: ~6 us beside d_kernel's ~18).
    const dim3 bgrid(ntiles, ntiles, (unsigned)(mproblems < 65535 ? mproblems : 65535));
    if (D != nullptr)
      launch_dependent(dev, "attention (wgmma) bits_kernel", bits_kernel, bgrid, 128, 0, st, wp,
                       (unsigned)mproblems, bits);
    else
      launch("attention (wgmma) bits_kernel", bits_kernel, bgrid, 128, 0, st, wp,
             (unsigned)mproblems, bits);
  }
  // D != nullptr: the caller launched d_kernel just before (cuda/attention.cu).
  const bool after_ours = mproblems != 0 || D != nullptr;
  if (p.d <= 64)
    run<64>(dev, st, wp, grid, ex2, p.mask != nullptr, after_ours, q, k, v, dout, lse, D, planes,
            dq, dk, dv);
  else
    run<128>(dev, st, wp, grid, ex2, p.mask != nullptr, after_ours, q, k, v, dout, lse, D, planes,
             dq, dk, dv);
}

}  // namespace attn_wgmma
}  // namespace cuda
}  // namespace tlrt
