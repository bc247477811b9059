// Device code of the default fast attention FORWARD (cuda/attention.cu dispatches it with the
// determinism switch off on sm_80+ for 1 <= d <= 128; SPLIT = true: float32-grade "3xTF32";
// SPLIT = false: one TF32 product, the allow_tf32 variant): FlashAttention-2 on raw mma.sync
// m16n8k8 TF32 (cuda/common/mma_tf32.cuh) with every operand and accumulator in REGISTER fragments.
// tests/unit/test_attention_mma_emu.cpp runs this very source on the CPU emulator against float64.
//
// fwd_mma_kernel<DP, SPLIT, NW>: one block of NW = kMmaWarps = 8 warps (256 threads) per
// (problem, 128 query rows; was 4 warps and 64 rows, see kMmaWarps); warp w owns rows 16 w ..
// 16 w + 15 end to end. DP = d rounded up to 32, 64 or 128 (the
// padding columns are zeros in Q, K and V); key tiles of KT = 64 keys (32 for DP = 128).
//   Q: each lane loads its A fragments once from global memory (zeros past n and d); DP <= 64
//   keeps them split (big and small TF32 parts: DP / 8 k-steps x 4 x 2 registers), DP = 128 keeps
//   the float32 values (64 registers) and splits each k-step's fragment when it is used.
//   K, V tiles (session 7): a small pre-pass kernel (split_kv_kernel) splits K and V ONCE per call
//   into a global FloatScratch of "fragment-ordered" planes (below; densely per (problem, key
//   tile), zeros past n and d; O(bh n d), (32, 1024, 64): 33.5 MB), and the kernel copies each
//   tile's planes with 16-byte cp.async into a DOUBLE-BUFFERED pair of plane buffers at the padded
//   strides (tile j + 1 in flight while tile j is computed; one barrier per tile). Until session 7
//   each block staged raw tiles and split them in shared memory between two barriers (the "split
//   pass"; git show 9221617:cuda/kernels/attention_mma.cuh); measured slower in all 18 cases
//   below, removed. A lane's B fragment (big and small) is ONE 16-byte shared load and no warp
//   splits what it reads:
//     K planes: row j, float4 c4 = 4 ks + t: {big, small of K[j][8 ks + t], big, small of
//       K[j][8 ks + t + 4]} (row stride DP / 2 + 4 float4s: a quarter warp (g in {2h, 2h + 1},
//       t = 0..3) reads 8 distinct 16-byte bank groups since the stride is 4 mod 8);
//     V planes: key pair p (keys 2p, 2p + 1), column c: {big, small of V[2p][c], big, small of
//       V[2p + 1][c]} (row stride DP + 2 float4s = 2 mod 8: t * 2 + g distinct mod 8), the B
//       operand of P V read with the contraction permutation of mma_tf32.cuh (kc_perm).
//   Without SPLIT (the TF32 variant) the entries hold the big parts only ({big, big}, 8 bytes:
//   LDS.64, conflict-free with the strides of mma_k_stride / mma_v_stride), half the bytes.
//   S = Q K^T: KT / 8 C fragments (16 x 8 each) per warp, DP / 8 k-steps, 3 mma each (1 without
//   SPLIT, the small terms first). Scores, masks (read from global into registers before the
//   products, so their latency hides under them), causal and bounds tests applied per element
//   position (c[e]: row g + 8 (e / 2), key 2t + e % 2 of the n-tile), exactly the header's s(i, j).
//   Online softmax on the C fragments in registers: row maxima over the lane's 2 KT / 8 values and
//   the 4 lanes of a quad (__shfl_xor 1, 2); p = exp(s - m) with the shared tlrt::math exp; the
//   row sum l is kept per lane and combined over the quad once at the end.
//   O += P V: P's C fragments ARE the A fragments (c_as_a: keys permuted 2t <-> t, 2t + 1 <->
//   t + 4, no shuffle), split in registers; O in DP / 8 C fragments (DP / 2 registers).
//   End: l summed over the quad; out = O / l (__fdiv_rn), lse = m + log(l); l == 0 (every key
//   excluded): out = 0, lse = -inf. Rows are written as float2 pairs (vec) or scalars.
// With causal and mask_fill = -inf a block stops at its diagonal tile and a warp leaves out the
// tiles whose first key is past its last row (KT = 32); blocks with the most tiles start first.
// No atomics, no dependence on scheduling: the same bits run to run (the tensor cores' order is
// fixed per instruction).
// Shared memory (bytes): 2 x (K planes KT (DP / 2 + 4) 16 + V planes KT / 2 (DP + 2) 16): DP =
// 32: 74 KB, DP = 64: 138 KB, DP = 128 (KT = 32): 133 KB (without SPLIT 38 / 70 / 67 KB); one
// 8-warp block per SM (registers: ~246 per thread). All fit sm_90's 227 KB and sm_80's 163 KB
// opt-in; on sm_86 / sm_89 (99 KB) DP = 64 and 128 with SPLIT do not, and the plan declines
// (fwd_mma_planes_floats is 0: the exact kernels run, no scratch is taken).
// Work per 64-key tile and warp (DP = 64, SPLIT): S 8 k-steps x 8 n-tiles x 3 = 192 mma, P V 8 x 8
// x 3 = 192 mma; 128 LDS.128 (64 K, 64 V fragments); 32 exp and ~250 other softmax instructions
// per lane; 16 cp.async.16 per thread; one barrier.
// PREDICTION OF THE PRE-SPLIT FORM (session 7; H100, against the measured split-pass form).
//   Issue slots per warp and 64-key tile (DP = 64, SPLIT): before ~1400 (384 mma, 128 LDS.128,
//   ~290 softmax, the split pass ~400: 2 x 16 entries, each 2 LDS.32, 2 x (2 cvt + 1 FADD), 1
//   STS.128, addressing; 2 barriers); after ~1050 (the split pass becomes 16 cp.async.16 with
//   their addresses, ~50; 1 barrier). The split pass is a barrier-sandwiched phase in which no
//   warp of the SM issues an mma: ~1.5-2.5k of the measured ~16.7k cycles per tile and SM
//   ((32, 1024, 64): 2 waves of 16 tiles in 0.305 ms at ~1.75 GHz); the new copies overlap
//   the products. Bytes: the pre-pass reads K, V once (8 bh n d) and writes 16 bh n d (SPLIT; 8
//   without) at ~copy bandwidth: (32, 1024, 64) 50 MB ~16 us, (16, 4096, 64) 100 MB ~35 us,
//   (32, 1024, 128) 100 MB ~35 us; the main kernel reads 2x the K / V bytes from L2 (64 KB per
//   tile and block instead of 32: (32, 1024, 64) 268 MB, ~1 TB/s, far below L2's bandwidth; the
//   (16, 4096, 64) planes, 67 MB, exceed the 50 MB L2, but the 32 blocks of one problem run
//   together and share their 4 MB).
//   Expected (split-pass form measured -> pre-split, pre-pass included): (32, 1024, 64) none
//   0.305 -> ~0.265 ms (~0.46x), causal 0.264 -> ~0.235 (~0.33x), masked 0.392 -> ~0.35 (~0.49x);
//   (16, 4096, 64) none 2.356 -> ~2.07 (~0.50x), causal 1.488 -> ~1.32 (~0.24x), masked 3.024 ->
//   ~2.70 (~0.49x); (32, 1024, 128) none 0.522 -> ~0.47 (~0.63x), causal ~0.41 (~0.46x), masked
//   ~0.53 (~0.60x). TF32 variant: ~15-20% faster.
//   MEASURED (H100, 2026-11-24, bench/attention.py, one process, split-pass -> pre-split, ms and
//   the pre-split time as a fraction of SDPA's fp32 time): 3xTF32 (32, 1024, 64) none 0.313 ->
//   0.286 (0.49x), causal 0.269 -> 0.250 (0.34x), masked 0.392 -> 0.364 (0.50x); (16, 4096, 64)
//   2.380 -> 2.034 (0.49x), 1.504 -> 1.308 (0.24x), 3.030 -> 2.686 (0.48x); (32, 1024, 128) 0.527
//   -> 0.476 (0.64x), 0.460 -> 0.411 (0.45x), 0.602 -> 0.515 (0.58x). TF32 (32, 1024, 64) 0.228 ->
//   0.196, 0.194 -> 0.172, 0.313 -> 0.272; (16, 4096, 64) 1.687 -> 1.348, 1.069 -> 0.862, 2.407
//   -> 2.008; (32, 1024, 128) 0.332 -> 0.264, 0.292 -> 0.229, 0.433 -> 0.341 (13-22% faster).
//   7-15% faster with SPLIT, within ~0.02 ms of the prediction everywhere; the 0.5x target is met
//   at d = 64 (masked (32, 1024, 64) at 0.50x), not at d = 128 (0.64x unmasked).
// DP = 128's Q (not done; predicted): the float32 Q fragments take 64 registers and each tile
// re-splits them (16 k-steps x 4 values x 3 instructions = ~190 issue slots per warp and 32-key
// tile against 384 mma). Pre-split Q in fragment order in shared memory (per lane and k-step
// {big a0..a3}, {small a0..a3}: two LDS.128, a warp reading 512 contiguous bytes, conflict-free)
// takes 16 rows x 128 x 8 B = 16 KB per warp, 128 KB per 8-warp block: with the 133 KB of
// double-buffered planes 261 KB > 227 KB (fits only with single-buffered planes, 194 KB, which
// brings back a second barrier and the exposed copy). Two blocks per SM need <= 128 registers
// per thread (o alone is 64, s 16, the mask 16) and 2 x 133 KB of shared memory: out of reach.
// It would trade ~190 ALU slots for +32 LDS.128 per warp-tile (+25% shared traffic) at one block
// per SM: predicted ~0-5%, not worth the shared memory.
// FIRST PREDICTION (split-pass form; H100 SXM, TF32 off, the benchmark's 4 n^2 d count, causal
// half; SDPA fp32 times of bench/results/2026-11-24-h100-attention-tc.md). Per SM and tile, 8 warps: tensor pipe ~8 x 384
// mma.sync at ~half of the TF32 peak rate (~80 TFLOP/s useful with 3 products), shared memory
// 8 x 128 LDS.128 (~118 TFLOP/s roof), issue ~1400 slots per warp-tile (~180): ~55% of the
// tensor-pipe bound after barriers, split pass and softmax latency:
//   fwd (32,1024,64)  none ~45 TFLOP/s = 0.19 ms (~0.33x SDPA's 0.580), causal ~30 (~0.20x of
//   0.717), masked ~35 (~0.34x of 0.716: the mask loads per element from global memory);
//   fwd (16,4096,64)  none ~48 (~0.34x of 4.166), causal ~38 (~0.17x), masked ~37 (~0.34x);
//   fwd (32,1024,128) none ~40 (~0.58x of 0.738: ABOVE the 0.5x target; KT = 32 and Q re-split
//   per tile), causal ~28 (~0.35x), masked ~33 (~0.59x).
// SPLIT = false (allow_tf32): ~1.6-1.8x those TFLOP/s (one product instead of three; the split
// pass and the softmax then weigh more).
// Measured with 8-warp blocks, split-pass form (H100, 2026-11-24,
// bench/results/2026-11-24-h100-attention-mma.md; the pre-split figures are above):
// (32,1024,64) none / causal / masked 0.305 / 0.264 / 0.392 ms = 0.53x / 0.37x / 0.56x SDPA,
// (16,4096,64) 0.56x / 0.27x / 0.55x, (32,1024,128) 0.70x / 0.51x / 0.66x; TF32 0.39x / 0.27x /
// 0.43x at (32,1024,64), 0.44x at (32,1024,128). With 4-warp blocks (the first run; SDPA fp32 in
// the same process): split fwd (32,1024,64) none / causal / masked 0.324 / 0.265 / 0.400 ms = 26.5 /
// 16.2 / 21.5 TFLOP/s = 0.56x / 0.37x / 0.57x SDPA (exact kernels 0.386 / 0.298 / 0.449);
// (16,4096,64) 0.59x / 0.28x / 0.55x; (32,1024,128) 0.77x / 0.52x / 0.71x (no faster than the
// exact kernels at d = 128). TF32: 34.9 / 22.0 / 27.2 TFLOP/s at (32,1024,64), 46.9 at
// (32,1024,128) none (0.43x-0.50x SDPA). About 0.6x the prediction: 8 warps per SM at 246
// registers leave the tensor pipe idle through the softmax and the split pass (next: a
// producer warp for the split, fewer live registers so 3 blocks fit, or ldmatrix-free 2-stage K).
// ATT8 (session 8, issue 8: d = 128 to <= 0.5x SDPA; the environment switch TLRT_ATTN_D128
// selected the form until session 9 removed it, see REMOVED below). WHAT LIMITS d = 128, from
// ptxas -v and the sm_90 SASS of fwd_mma_kernel<128, true, 8> (CUDA 13.0, nvdisasm; per warp
// and 32-key tile, static counts of the loop's sections; the softmax section is mostly the
// masked / boundary branches, its unmasked in-range path ~450-500 executed):
//   registers 246, no spills: one 8-warp block per SM, 2 warps per scheduler (as before);
//   S = Q K^T: 1025 instructions for 192 HMMA: 340 moves (IMAD.MOV / MOV), ~450 for the
//     per-tile re-split of Q (sm_90 has no cvt.rna.tf32.f32 in SASS: each tf32() is FSETP,
//     IADD 0x1000, SEL, LOP3, so split() is 9 instructions, 64 values per tile), 63 LDS.128;
//   P V: 738 instructions for 192 HMMA: 333 moves, the P split (16 values x 9), 60 LDS.128;
//   top of the tile: ~470, of which ~200 the 16 cp.async copies of load_planes_nt (a bounds
//     test, branch, address split of e and a 64-bit add per copy, plus 3 no-op LDS each) and,
//     masked, ~170 the 16 per-entry mask loads (~10 instructions each).
//   The moves are the plane entry's order: a 16-byte entry {big(a), small(a), big(b), small(b)}
//   lands in R..R+3, but HMMA wants its B operand as a register PAIR {b[0], b[1]}: {big(a),
//   big(b)} and {small(a), small(b)} are rebuilt with 4 moves per entry (64 K + 64 V entries
//   per warp-tile). The TF32 path ({big, big}, LDS.64) has none: 0 moves in its S section.
//   So ~2500 issue slots per warp-tile for 384 HMMA (~2900 masked), ~5000 per scheduler and
//   tile (2 warps), against ~12.0k cycles measured per tile ((32, 1024, 128) none 0.471 ms less
//   ~0.035 of pre-pass, 2 waves x 32 tiles, ~1.75 GHz): IPC ~0.42 with 2 warps per scheduler in
//   lockstep (one barrier per tile). Not tensor-bound: the TF32 path does 1/3 of the HMMA in
//   ~0.56x the time, i.e. the split path's extra ~1600 issue slots and 512 HMMA cost ~5.3k
//   cycles. Smem: 133 KB (2 x 66.5 KB buffers) leaves no room for KT = 64 double-buffered
//   (272 KB) nor for a second block; registers (o 64, q 64) leave none for 12-16 warps.
//   Fewer correction terms: dropping small(P) big(V) or small(Q) big(K) adds ~2^-11 relative
//   error per product, far over the header's u (16 (d + 2) S + ...) term: not allowed.
// THE VARIANT (same bits as the default form: the same operands, products and order):
//   "order" (VAR 1): plane entries {big(a), big(b), small(a), small(b)} (put_pair / get_pair
//     FR; split_kv_kernel<DP, true, true>): the LDS.128 lands as the two B pairs, no moves.
//     SASS: S 1025 -> 685, P V 738 -> 398 (moves 673 -> 3); 255 registers, 28 B of spills
//     (outside the S / P V sections).
//   "frag" (VAR 2) = order plus: Q kept split in registers at DP = 128 too (QPRE, 128
//     registers; ptxas then spills ~12 values per tile: 80 B stores / 124 B loads in all) so
//     the loop has no Q split; P split by mma::split_hw (4 instructions instead of 9; safe for
//     p in [0, 1] or NaN, see mma_tf32.cuh); load_planes_nt FIXED (16 LDGSTS at immediate
//     shared offsets, ~60 instructions instead of ~200); masked tiles wholly in range (n even,
//     mask 8-byte aligned) load the lane's key pairs as float2 from one row pointer (8 LDG.64,
//     ~50 instructions instead of ~170). SASS: top 470 -> ~90 executed unmasked (316 static
//     with both mask paths), S 1025 -> 389 (192 HMMA, 62 LDS.128, ~135 else), P V 738 -> 378.
//   "frag_qtile" (VAR 3) = frag with Q split per tile as the default form (the fallback if the
//     spills cost): S 688 (the Q split back, 120 FSETP), no spills inside the loop (32 B
//     outside), P V 373.
//   Issue slots per warp-tile, unmasked: ~2500 -> ~1850 (order) -> ~1300 (frag), ~1600
//   (frag_qtile); masked ~2900 -> ~1400 (frag).
// PREDICTION (written before any GPU run; H100, bench/attention.py, SDPA fp32 times of
// bench/results/2026-11-24-h100-s7-attention.md): the S and P V sections become HMMA-bound
// (~6-8 cycles per m16n8k8 per scheduler: 384 per tile and scheduler, ~2.3-3.1k cycles per
// section) and the top + softmax (~550 slots per warp, IPC ~0.4: ~2.7k) stay as they are:
// ~7.5-9k cycles per tile against ~12.0k.
//   frag  (32, 1024, 128) none 0.471 -> ~0.36 ms (0.31-0.42; ~0.48x SDPA's 0.750), causal
//         0.409 -> ~0.31 (~0.35x of 0.894), masked 0.523 -> ~0.39 (0.34-0.46; ~0.44x of 0.894);
//   order (32, 1024, 128) none ~0.42, causal ~0.37, masked ~0.48 (moves only);
//   frag_qtile none ~0.38, causal ~0.33, masked ~0.41 (frag wins unless the spills cost more
//   than the ~300 split instructions per warp-tile they save).
//   d = 32 / 64 and the TF32 path: unchanged (the variant is compiled for DP = 128 with SPLIT
//   only; the same changes would apply to DP = 64, whose S / P V carry the same moves).
//   Risks: the spills (local memory, L1-resident, ~12 per tile); the claim that the tensor
//   cores read only the top 19 bits of small = bits(r) + 0x1000 (CUTLASS's
//   round_half_ulp_truncate relies on it; if they rounded instead, the bits would differ from
//   the default form by at most one TF32 ulp of a small part, still inside the header's bound,
//   which the GPU parity suite checks: it was run with TLRT_ATTN_D128=frag).
//   MEASURED (H100, 2026-11-26; cuda/attention.cu has the table): frag_qtile 0.403 / 0.356 /
//   0.494 ms (none / causal / masked; base 0.477 / 0.409 / 0.518), order 0.436 / 0.372 / 0.484,
//   frag 0.563 / 0.501 / 0.694: the spills cost more than the split they save; frag_qtile is
//   the default. Parity (bits) held on the GPU with frag and frag_qtile.
//   REMOVED (session 9): the measured-slower d = 128 forms, base (at DP = 128 with SPLIT),
//   order and frag, with the switch TLRT_ATTN_D128 that chose among them and frag's Q kept
//   split at DP = 128; last in commit 22ffc5d (git show 22ffc5d:cuda/kernels/attention_mma.cuh,
//   22ffc5d:cuda/attention.cu). DP = 128 with SPLIT always runs frag_qtile (fwd_mma_kernel's
//   FQ); the base form stays where it is the only form (DP = 32 / 64, the TF32 path), and
//   tests/unit/test_attention_mma_emu.cpp still compares frag_qtile's bits with it at d = 128
//   (fwd_mma_plan<MmaForm::base>, which the library never launches).
// ATT9 (session 9): FRAG_QTILE AT DP = 64 (measured behind TLRT_ATTN_D64=frag_qtile, then made
// the standard form at DP = 64 with SPLIT and the switch removed, both in session 9): the ATT8
// changes, whose S / P V carry the same moves at DP = 64: FR plane entries
// (split_kv_kernel<64, true, true>), P split by split_hw, load_planes_nt FIXED (8 + 8 rounds
// of 256 copies: KROW 32 and VROW 64 divide 256), paired mask loads (tiles of 64 keys wholly in
// range). Q is kept split at DP = 64 in both forms, so frag and frag_qtile are one form here.
// The same bits as the base form (the emulation test runs both on every case with 32 < d <= 64
// and split, and compares bit for bit).
//   ptxas -v (sm_90, CUDA 13.0): fwd_mma_kernel<64, true, 8> 246 registers, no spills ->
//   252 registers, no spills (0-byte stack frame; still one 8-warp block per SM).
//   SASS (nvdisasm -gi; static counts per warp and 64-key tile, each instruction assigned by
//   the kernel line it is inlined at), default -> variant:
//     top of the tile (wait, barrier, next tile's 16 copies): 242 -> 110 (16 LDGSTS);
//     mask loads: the per-entry path 346 (32 LDG), kept for edge tiles (345); wholly in-range
//       tiles take the paired path instead: 72 (16 LDG.64);
//     S = Q K^T: 595 -> 263 (192 HMMA, 64 LDS.128; moves 332 -> 0);
//     P V: 811 -> 390 (192 HMMA, 64 LDS.128; moves 334 -> 2; the P split's 64 FSETP gone);
//     softmax: 2832 -> 2655 static (mostly the masked / boundary branches); its unmasked
//       in-range path, ~1100 executed (34 exp_f of ~24 instructions), is the same code.
//   Issue slots per warp-tile, unmasked, executed: ~2750 -> ~1860 (-32%; d = 128 had -36%);
//   masked, also ~270 fewer in the mask loads.
// PREDICTION (written before any GPU run; H100, bench/attention.py --shapes
// 32x1024x64,16x4096x64, TLRT_ATTN_D64=frag_qtile against the same run without it).
// Calibration, att8's d = 128 measurement: base -> frag_qtile removed ~900 issue slots per
// warp-tile (~1800 per scheduler: 2 warps) and ~2.0k of ~12.1k cycles per tile and SM (0.442 ->
// 0.368 ms without the ~0.035 ms pre-pass, 2 waves x 32 tiles, ~1.75 GHz): ~1.1 cycles per
// slot removed; masked gained less (-5%: 0.518 -> 0.494; order alone 0.484), causal ~0.85 of
// the unmasked share. DP = 64 now: (32, 1024, 64) none 0.286 ms less ~0.016 of pre-pass, 2
// waves x 16 tiles: ~14.8k cycles per tile (~5500 slots per scheduler, IPC ~0.37, ~19 cycles
// per HMMA); ~1780 slots per scheduler removed: ~-2.0k cycles, ~-13% of the kernel time.
//   (32, 1024, 64) none 0.286 -> ~0.25 ms (0.24-0.26), causal 0.250 -> ~0.225 (0.21-0.235),
//   masked 0.364 -> ~0.345 (0.33-0.36);
//   (16, 4096, 64) none 2.034 -> ~1.77 (1.72-1.88), causal 1.308 -> ~1.17 (1.12-1.23), masked
//   2.686 -> ~2.55 (2.45-2.62).
//   The softmax (~1100 slots, ~60% of the variant's unmasked slots) is what remains; 6 more
//   registers, no spills. Faster in all six: make it the standard form at DP = 64 (base kept
//   for the emulation test, as at d = 128); slower masked only: keep it off. On the GPU, run
//   test_parity_attention with TLRT_ATTN_D64=frag_qtile too.
//   MEASURED (H100, 2026-11-27, bench/attention.py, the same build, fast forward, ms, base ->
//   frag_qtile; bench/results/2026-11-27-h100-s9-attention-d64.md): (32, 1024, 64) none 0.277 ->
//   0.240 (0.48x -> 0.42x SDPA), causal 0.241 -> 0.221, masked 0.357 -> 0.312 (0.51x -> 0.44x);
//   (16, 4096, 64) none 2.016 -> 1.719 (0.48x -> 0.41x), causal 1.292 -> 1.166, masked 2.657 ->
//   2.254 (0.48x -> 0.41x). Unmasked -13% / -15% as predicted; masked -13% / -15%, well past the
//   predicted -5%. test_parity_attention passed with it (12982 checks). Now the standard form.
#pragma once

#include "cuda/kernels/attention.cuh"
#include "cuda/common/mma_tf32.cuh"

namespace tlrt {
namespace cuda {
namespace attn_kernels {

// Warps per block: 8 (256 threads, 128 query rows, one block per SM: the K / V tiles and their
// split are shared by twice the rows of the 4-warp variant, which ran two blocks per SM; the
// barriers now stop every warp of the SM, but the H100 measured 8 faster in every case,
// 2026-11-24: (32, 1024, 64) 0.325 -> 0.305 ms, masked 0.406 -> 0.392, (16, 4096, 64) 2.489 ->
// 2.356, (32, 1024, 128) 0.557 -> 0.522, masked 0.646 -> 0.585; TF32 0.248 -> 0.222 at
// (32, 1024, 64)). The kernel takes NW as a template parameter (4 still compiles and is
// emulated the same way).
constexpr unsigned kMmaWarps = 8;

// The forms of the fast forward (fwd_mma_plan's template argument; the same bits in all):
// standard: what the library runs: "frag_qtile" at DP = 64 and 128 with SPLIT (the ATT8 and ATT9
//   comments), the base form elsewhere (DP = 32, the TF32 path);
// base: the base form everywhere; at DP = 64 / 128 with SPLIT that is the form session 9 replaced
//   (slower on the H100), kept instantiable for tests/unit/test_attention_mma_emu.cpp, which
//   compares frag_qtile's bits with it; the library never launches it.
enum class MmaForm : unsigned { standard, base };

// Whether fwd_mma_kernel / split_kv_kernel run the frag_qtile form (their FQ / FR argument).
template <unsigned DP, bool SPLIT, MmaForm F>
__host__ __device__ constexpr bool mma_frag_qtile() {
  return SPLIT && (DP == 64 || DP == 128) && F != MmaForm::base;
}

// Keys per tile: 64, or 32 for DP = 128 (two blocks per SM in shared memory and registers).
template <unsigned DP>
__host__ __device__ constexpr unsigned mma_kt() {
  return DP == 128 ? 32 : 64;
}

// Plane entries: {big, small, big, small} (4 floats) with SPLIT, {big, big} (2 floats) without.
// Row strides: K planes (entries per key), V planes (entries per key pair).
// Conflict-free fragment reads: 16-byte entries are served per quarter warp (8 lanes: g in
// {2h, 2h + 1}, t = 0..3), 8-byte ones per half warp (g in 4h .. 4h + 3): K at g * SK + t needs
// SK = 4 mod 8 (16 bytes) or mod 16 (8 bytes); V at t * SV + g needs SV = 2 mod 8 (16 bytes) or
// 4 mod 16 (8 bytes).
template <bool SPLIT>
__host__ __device__ constexpr unsigned mma_pw() {
  return SPLIT ? 4 : 2;
}
template <unsigned DP>
__host__ __device__ constexpr unsigned mma_k_stride() {
  return DP / 2 + 4;
}
template <unsigned DP, bool SPLIT>
__host__ __device__ constexpr unsigned mma_v_stride() {
  return SPLIT ? DP + 2 : DP + 4;
}

// One buffer of K and V planes at the padded strides; the kernel holds two (tile j + 1 lands
// while tile j is computed).
template <unsigned DP, bool SPLIT>
__host__ __device__ constexpr unsigned mma_plane_buf_floats() {
  return mma_pw<SPLIT>() * (mma_kt<DP>() * mma_k_stride<DP>() +
                            (mma_kt<DP>() / 2) * mma_v_stride<DP, SPLIT>());
}
template <unsigned DP, bool SPLIT>
__host__ __device__ constexpr unsigned fwd_mma_smem_floats() {
  return 2 * mma_plane_buf_floats<DP, SPLIT>();
}

// The pre-split planes in global memory: per (problem, key tile), densely (no stride padding),
// the K planes (KT rows of DP / 2 entries) then the V planes (KT / 2 key pairs of DP entries):
// PW KT DP floats per tile, ceil(n / KT) tiles per problem; entries as in the shared plane
// buffers (put_pair; zeros past n and d), which load_planes_nt copies them into.
template <unsigned DP, bool SPLIT>
__host__ __device__ constexpr unsigned mma_tile_plane_floats() {
  return mma_pw<SPLIT>() * mma_kt<DP>() * DP;
}

// Blocks per SM the kernel is compiled for (register budget 65536 / (128 x blocks)): 2 (at most
// 255 registers). ptxas (sm_90, CUDA 13.0): 246-247 registers for DP = 64 and 128 with SPLIT, 196
// / 231 without, no spills; DP = 32 spills at 3 blocks (168 registers), so it stays at 2 too.
template <unsigned DP>
__host__ __device__ constexpr unsigned fwd_mma_min_blocks() {
  return 2;
}

// ---- helpers shareable with the backward -------------------------------------------------------

// Stores the plane entry of a and b: {big(a), small(a), big(b), small(b)} with SPLIT, else
// {big(a), big(b)} (TF32 bit patterns as floats). FR (the att8 "register order", SPLIT only):
// {big(a), big(b), small(a), small(b)}, so that the 16-byte load lands as the big B fragment in
// two consecutive registers and the small one in the next two (HMMA takes its B operand as a
// register pair: the old order costs 4 moves per entry, see fwd_mma_kernel's FR comment).
template <bool SPLIT, bool FR = false>
__device__ __forceinline__ void put_pair(float *dst, float a, float b) {
  if (SPLIT) {
    uint32_t ab, as, bb, bs;
    mma::split(a, ab, as);
    mma::split(b, bb, bs);
    if (FR)
      st4(dst, make_float4(__uint_as_float(ab), __uint_as_float(bb), __uint_as_float(as),
                           __uint_as_float(bs)));
    else
      st4(dst, make_float4(__uint_as_float(ab), __uint_as_float(as), __uint_as_float(bb),
                           __uint_as_float(bs)));
  } else {
    const float ab = __uint_as_float(mma::tf32(a)), bb = __uint_as_float(mma::tf32(b));
#ifdef TLRT_CUDA_EMULATION
    emu::check_aligned(dst, 8);
    dst[0] = ab;
    dst[1] = bb;
#else
    *reinterpret_cast<float2 *>(dst) = make_float2(ab, bb);
#endif
  }
}

// The B fragment of one plane entry (one 16- or 8-byte shared load): b[0] from a, b[1] from b.
template <bool SPLIT, bool FR = false>
__device__ __forceinline__ mma::SplitB get_pair(const float *src) {
  mma::SplitB b;
  if (SPLIT && FR) {
    const float4 f = ld4(src);
    b.big[0] = __float_as_uint(f.x);
    b.big[1] = __float_as_uint(f.y);
    b.small[0] = __float_as_uint(f.z);
    b.small[1] = __float_as_uint(f.w);
  } else if (SPLIT) {
    const float4 f = ld4(src);
    b.big[0] = __float_as_uint(f.x);
    b.small[0] = __float_as_uint(f.y);
    b.big[1] = __float_as_uint(f.z);
    b.small[1] = __float_as_uint(f.w);
  } else {
#ifdef TLRT_CUDA_EMULATION
    emu::check_aligned(src, 8);
    b.big[0] = __float_as_uint(src[0]);
    b.big[1] = __float_as_uint(src[1]);
#else
    const float2 f = *reinterpret_cast<const float2 *>(src);
    b.big[0] = __float_as_uint(f.x);
    b.big[1] = __float_as_uint(f.y);
#endif
    b.small[0] = b.small[1] = 0;  // not read by the one-product form
  }
  return b;
}

// The pre-pass: every key tile of every problem split once into its dense global planes.
// Thread per plane entry (grid-stride along x over one problem's ceil(n / KT) KT DP entries;
// problems along y): K entry (row r, c4) = the pair K[r][8 (c4 / 4) + c4 % 4], K[r][... + 4] (K as
// a B operand over its columns: S = Q K^T contracts along a row), V entry (pair pr, column c) =
// V[2 pr][c], V[2 pr + 1][c] (V as a B operand over its rows with the permuted contraction index
// of c_as_a: O = P V); values past n or d are zeros.
// Bytes: reads K and V once (8 bh n d), writes PW / 2 times that (SPLIT: 16 bh n d).
template <unsigned DP, bool SPLIT, bool FR = false>
__global__ void __launch_bounds__(256)
    split_kv_kernel(KP p, const float *__restrict k, const float *__restrict v,
                    float *__restrict planes) {
  constexpr unsigned KT = mma_kt<DP>(), PW = mma_pw<SPLIT>(), C4 = DP / 2, KE = KT * C4,
                     TE = KT * DP;  // entries per tile: KE of K, then KE of V
  const uint64_t tiles = (p.n + KT - 1) / KT, per = tiles * TE;
  for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
    const uint64_t base = b * p.n * p.d;
    float *dst = planes + b * per * PW;
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < per;
         e += (uint64_t)gridDim.x * blockDim.x) {
      const uint64_t j0 = (e / TE) * KT;
      const unsigned r = (unsigned)(e % TE);
      float x0, x1;
      if (r < KE) {
        const uint64_t j = j0 + r / C4;
        const unsigned c4 = r % C4, col = 8 * (c4 / 4) + c4 % 4;
        const bool in = j < p.n;
        x0 = (in && col < p.d) ? k[base + j * p.d + col] : 0.0f;
        x1 = (in && col + 4 < p.d) ? k[base + j * p.d + col + 4] : 0.0f;
      } else {
        const unsigned rv = r - KE, c = rv % DP;
        const uint64_t j = j0 + 2 * (rv / DP);
        x0 = (j < p.n && c < p.d) ? v[base + j * p.d + c] : 0.0f;
        x1 = (j + 1 < p.n && c < p.d) ? v[base + (j + 1) * p.d + c] : 0.0f;
      }
      put_pair<SPLIT, FR>(dst + PW * e, x0, x1);
    }
  }
}

// One tile's dense planes (src) into a plane buffer at the padded strides (kpl: K planes, row
// stride SK entries; vpl: V planes, row stride SV entries) by 16-byte cp.async copies (an entry
// is 16 bytes with SPLIT, two entries without; the strides keep every row 16-byte aligned).
// FIXED (att8 "frag"): the same copies in fixed rounds r = 0 .. CH / NT - 1 of chunk
// threadIdx.x + r NT, so that with NT a multiple of the row's chunks every round's shared and
// global addresses are the first round's plus constants (immediate offsets). The loop over
// e = threadIdx.x .. CH compiles (sm_90, DP = 128) to ~13 instructions per copy (a bounds test
// and branch, the row / column split of e, a 64-bit address, the LDGSTS and its 3 ordering
// no-ops): ~200 issue slots per warp and tile for 16 copies; FIXED: ~4 + 16 x 4.
template <unsigned DP, bool SPLIT, unsigned NT, bool FIXED = false>
__device__ __forceinline__ void load_planes_nt(float *kpl, float *vpl, const float *src) {
  constexpr unsigned KT = mma_kt<DP>(), PW = mma_pw<SPLIT>(), SK = mma_k_stride<DP>(),
                     SV = mma_v_stride<DP, SPLIT>();
  constexpr unsigned KROW = DP / 2 * PW / 4, KCH = KT * KROW;  // 16-byte chunks: K row, K tile
  constexpr unsigned VROW = DP * PW / 4, VCH = KT / 2 * VROW;  // V pair row, V tile
  static_assert((PW * SK) % 4 == 0 && (PW * SV) % 4 == 0, "plane rows 16-byte aligned");
  static_assert(KCH % NT == 0 && VCH % NT == 0, "whole rounds of copies");
  if constexpr (FIXED && NT % KROW == 0 && NT % VROW == 0) {
    const unsigned tx = threadIdx.x;
    float *kd = kpl + (tx / KROW) * (PW * SK) + 4 * (tx % KROW);
    float *vd = vpl + (tx / VROW) * (PW * SV) + 4 * (tx % VROW);
    const float *ks = src + 4 * tx, *vs = src + 4 * KCH + 4 * tx;
#pragma unroll
    for (unsigned r = 0; r < KCH / NT; ++r)
      async::copy16(kd + r * (NT / KROW) * (PW * SK), ks + 4 * r * NT, true);
#pragma unroll
    for (unsigned r = 0; r < VCH / NT; ++r)
      async::copy16(vd + r * (NT / VROW) * (PW * SV), vs + 4 * r * NT, true);
  } else {
#pragma unroll
    for (unsigned e = threadIdx.x; e < KCH; e += NT)
      async::copy16(kpl + (e / KROW) * (PW * SK) + 4 * (e % KROW), src + 4 * e, true);
    src += 4 * KCH;
#pragma unroll
    for (unsigned e = threadIdx.x; e < VCH; e += NT)
      async::copy16(vpl + (e / VROW) * (PW * SV) + 4 * (e % VROW), src + 4 * e, true);
  }
}

// A C fragment's element e: row offset 8 (e / 2) from g, column 2t + e % 2 of its n-tile.
__device__ __forceinline__ unsigned c_row(unsigned g, unsigned e) { return g + 8 * (e / 2); }
__device__ __forceinline__ unsigned c_col(unsigned t, unsigned e) { return 2 * t + e % 2; }

// Maximum and sum over the 4 lanes of a quad (the lanes holding one C-fragment row).
__device__ __forceinline__ float quad_max(float v) {
  v = attn::amax(v, __shfl_xor_sync(kFull, v, 1));
  return attn::amax(v, __shfl_xor_sync(kFull, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v = v + __shfl_xor_sync(kFull, v, 1);
  return v + __shfl_xor_sync(kFull, v, 2);
}

// ---- forward -----------------------------------------------------------------------------------

// The tiles' planes come pre-split from `planes` (split_kv_kernel) by cp.async, double-buffered,
// one barrier per tile.
// The softmax's exponentials (P and the rescale factor alpha) by exp_ex2 (ex2.approx; since
// session 16, measured faster than the shared math::exp_f: cuda/attention.cu's EX2 paragraph);
// lse's log stays math::log_f.
template <unsigned DP, bool SPLIT, unsigned NW, bool FQ = false>
__global__ void __launch_bounds__(32 * NW, NW == 4 ? fwd_mma_min_blocks<DP>() : 1)
    fwd_mma_kernel(KP p, const float *__restrict q, const float *__restrict planes,
                   float *__restrict out, float *__restrict lse) {
#if defined(TLRT_CUDA_EMULATION) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  constexpr unsigned KT = mma_kt<DP>(), SK = mma_k_stride<DP>(), SV = mma_v_stride<DP, SPLIT>(),
                     PW = mma_pw<SPLIT>();
  constexpr unsigned KS = DP / 8;   // k-steps of S = Q K^T; n-tiles of O
  constexpr unsigned NS = KT / 8;   // n-tiles of S; k-steps of P V
  // FQ: the att8 "frag_qtile" form (SPLIT only; see the ATT8 comment above): FR plane entries
  // in register order (split_kv_kernel<DP, true, true>); HW: P split by split_hw, fixed copy
  // rounds, paired mask loads. Q stays as at DP <= 64 (kept split) and DP = 128 (split per tile).
  constexpr bool FR = SPLIT && FQ, HW = SPLIT && FQ;
  constexpr bool QPRE = DP <= 64;  // Q fragments kept split
  constexpr unsigned kMmaThreads = 32 * NW, kMmaRows = 16 * NW;
  constexpr unsigned BUF = mma_plane_buf_floats<DP, SPLIT>(),
                     TP = mma_tile_plane_floats<DP, SPLIT>();
  float *sm = async::dynamic_smem();
  // Buffer 0 (K planes, V planes), buffer 1.
  const float *kpl = sm, *vpl = kpl + PW * KT * SK;
  const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const unsigned i0 = (p.skip ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * kMmaRows;
  const unsigned iw = i0 + 16 * w;  // the warp's first row
  const unsigned jend = p.skip ? min(p.n, i0 + kMmaRows) : p.n;
  for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
    const uint64_t base = b * p.n * p.d;
    const float *mb = p.mask ? p.mask + b * p.mask_stride : nullptr;
    // This problem's tile planes (tile jt at pb + jt TP).
    const float *pb = planes + b * (uint64_t)((p.n + KT - 1) / KT) * TP;
    __syncthreads();  // the previous problem's readers done
    load_planes_nt<DP, SPLIT, kMmaThreads, HW>(sm, sm + PW * KT * SK, pb);
    async::commit();
    // This lane's Q fragments (rows iw + g, iw + g + 8; columns 8 ks + t, 8 ks + t + 4).
    float qf[KS][4];
#pragma unroll
    for (unsigned ks = 0; ks < KS; ++ks)
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) {
        const unsigned i = iw + g + 8 * (e % 2), c = 8 * ks + t + 4 * (e / 2);
        qf[ks][e] = (i < p.n && c < p.d) ? q[base + (uint64_t)i * p.d + c] : 0.0f;
      }
    mma::SplitA qa[QPRE ? KS : 1];
    if (QPRE)
#pragma unroll
      for (unsigned ks = 0; ks < KS; ++ks) mma::split(qf[ks], qa[QPRE ? ks : 0]);
    float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f}, o[KS][4];
#pragma unroll
    for (unsigned nt = 0; nt < KS; ++nt)
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) o[nt][e] = 0.0f;
    for (unsigned j0 = 0, jt = 0; j0 < jend; j0 += KT, ++jt) {
      const bool more = j0 + KT < jend;
      async::wait<0>();
      __syncthreads();  // tile jt's planes visible; the other buffer's readers (tile jt - 1) done
      kpl = sm + (jt % 2) * BUF;
      vpl = kpl + PW * KT * SK;
      if (more) {
        float *nk = sm + ((jt + 1) % 2) * BUF;
        load_planes_nt<DP, SPLIT, kMmaThreads, HW>(nk, nk + PW * KT * SK,
                                                   pb + (uint64_t)(jt + 1) * TP);
        async::commit();
      }
      // The warp visits the tile unless its rows are past n or (skipping) all before j0.
      const bool active = iw < p.n && !(p.skip && j0 > iw + 15);
      if (active) {
        // Mask entries first (global loads in flight during the products); 1 = allowed.
        float mk[NS][4];
        // HW (att8 "frag"): where the tile's keys are all in range, n is even and the mask
        // 8-byte aligned, a lane's two keys 2t, 2t + 1 of an n-tile are one float2 (NS
        // 8-byte loads per row from one row pointer, no per-entry bounds: the same values; the
        // per-entry form costs ~10 instructions per entry, 160 per warp and tile, in the SASS).
        const bool mpairs = HW && mb != nullptr && j0 + KT <= p.n && p.n % 2 == 0 &&
                            (reinterpret_cast<uintptr_t>(mb) & 7) == 0;
        if (mpairs) {
#pragma unroll
          for (unsigned r = 0; r < 2; ++r) {
            const unsigned i = iw + g + 8 * r;
            const float *mrow = mb + (uint64_t)(i < p.n ? i : 0) * p.n + j0 + 2 * t;
#pragma unroll
            for (unsigned nt = 0; nt < NS; ++nt) {
              float f0 = 1.0f, f1 = 1.0f;
              if (i < p.n) {
#ifdef TLRT_CUDA_EMULATION
                emu::check_aligned(mrow + 8 * nt, 8);
                f0 = mrow[8 * nt];
                f1 = mrow[8 * nt + 1];
#else
                const float2 f = *reinterpret_cast<const float2 *>(mrow + 8 * nt);
                f0 = f.x;
                f1 = f.y;
#endif
              }
              mk[nt][2 * r] = f0;
              mk[nt][2 * r + 1] = f1;
            }
          }
        } else if (mb) {
#pragma unroll
          for (unsigned nt = 0; nt < NS; ++nt)
#pragma unroll
            for (unsigned e = 0; e < 4; ++e) {
              const unsigned i = iw + c_row(g, e), j = j0 + 8 * nt + c_col(t, e);
              mk[nt][e] = (i < p.n && j < p.n) ? mb[(uint64_t)i * p.n + j] : 1.0f;
            }
        }
        float s[NS][4];
#pragma unroll
        for (unsigned nt = 0; nt < NS; ++nt)
#pragma unroll
          for (unsigned e = 0; e < 4; ++e) s[nt][e] = 0.0f;
#pragma unroll
        for (unsigned ks = 0; ks < KS; ++ks) {
          mma::SplitA a;
          if (QPRE) {
            a = qa[QPRE ? ks : 0];
          } else if (SPLIT) {
            mma::split(qf[ks], a);
          } else {
#pragma unroll
            for (unsigned e = 0; e < 4; ++e) a.big[e] = mma::tf32(qf[ks][e]);
          }
#pragma unroll
          for (unsigned nt = 0; nt < NS; ++nt)
            mma::product<SPLIT>(s[nt], a,
                                get_pair<SPLIT, FR>(kpl + PW * ((8 * nt + g) * SK + 4 * ks + t)));
        }
        // Scores by element position (out-of-range rows and keys: excluded).
        const bool plain = !mb && iw + 16 <= p.n && j0 + KT <= p.n &&
                           !(p.causal && j0 + KT - 1 > iw);
#pragma unroll
        for (unsigned nt = 0; nt < NS; ++nt)
#pragma unroll
          for (unsigned e = 0; e < 4; ++e) {
            if (plain) {
              s[nt][e] = s[nt][e] * p.scale;
            } else {
              const unsigned i = iw + c_row(g, e), j = j0 + 8 * nt + c_col(t, e);
              const bool blocked = (p.causal && j > i) || (mb != nullptr && mk[nt][e] == 0.0f);
              s[nt][e] = (i < p.n && j < p.n) ? attn::score(s[nt][e], blocked, p.scale, p.fill)
                                              : kNegInf;
            }
          }
        // Online softmax of rows g (r = 0) and g + 8 (r = 1).
        float mn[2], alpha[2], rs[2] = {0.0f, 0.0f};
#pragma unroll
        for (unsigned r = 0; r < 2; ++r) {
          float mt = s[0][2 * r];
#pragma unroll
          for (unsigned nt = 0; nt < NS; ++nt)
#pragma unroll
            for (unsigned h = 0; h < 2; ++h) mt = attn::amax(mt, s[nt][2 * r + h]);
          mn[r] = attn::amax(m[r], quad_max(mt));
          alpha[r] = mn[r] == kNegInf ? 1.0f : attn::exp_ex2(m[r] - mn[r]);
        }
#pragma unroll
        for (unsigned nt = 0; nt < NS; ++nt)
#pragma unroll
          for (unsigned e = 0; e < 4; ++e) {
            const float pr =
                s[nt][e] == kNegInf ? 0.0f : attn::exp_ex2(s[nt][e] - mn[e / 2]);
            rs[e / 2] = rs[e / 2] + pr;
            s[nt][e] = pr;
          }
#pragma unroll
        for (unsigned r = 0; r < 2; ++r) {
          l[r] = l[r] * alpha[r] + rs[r];  // this lane's part of the row sum
          m[r] = mn[r];
        }
#pragma unroll
        for (unsigned nt = 0; nt < KS; ++nt)
#pragma unroll
          for (unsigned e = 0; e < 4; ++e) o[nt][e] = o[nt][e] * alpha[e / 2];
        // O += P V: P's C fragments as A fragments (keys 2t, 2t + 1 as A-columns t, t + 4).
#pragma unroll
        for (unsigned kk = 0; kk < NS; ++kk) {
          float af[4];
          mma::c_as_a(s[kk], af);
          mma::SplitA a;
          if (HW) {
            mma::split_hw(af, a);
          } else if (SPLIT) {
            mma::split(af, a);
          } else {
#pragma unroll
            for (unsigned e = 0; e < 4; ++e) a.big[e] = mma::tf32(af[e]);
          }
#pragma unroll
          for (unsigned nt = 0; nt < KS; ++nt)
            mma::product<SPLIT>(o[nt], a,
                                get_pair<SPLIT, FR>(vpl + PW * ((4 * kk + t) * SV + 8 * nt + g)));
        }
      }
    }
    // out = O / l, lse = m + log(l) (l summed over the quad); l == 0: out 0, lse -inf.
    if (iw < p.n) {
#pragma unroll
      for (unsigned r = 0; r < 2; ++r) l[r] = quad_sum(l[r]);
#pragma unroll
      for (unsigned r = 0; r < 2; ++r) {
        const unsigned i = iw + g + 8 * r;
        if (i >= p.n) continue;
        const bool none = l[r] == 0.0f;
        if (t == 0) lse[b * p.n + i] = none ? kNegInf : m[r] + math::log_f(l[r]);
        float *row = out + base + (uint64_t)i * p.d;
#pragma unroll
        for (unsigned nt = 0; nt < KS; ++nt) {
          const unsigned c = 8 * nt + 2 * t;
          const float x0 = none ? 0.0f : __fdiv_rn(o[nt][2 * r], l[r]),
                      x1 = none ? 0.0f : __fdiv_rn(o[nt][2 * r + 1], l[r]);
          if (p.vec && c < p.d) {  // d % 4 == 0 and out 16-byte aligned: c + 1 < d, 8-byte aligned
#ifdef TLRT_CUDA_EMULATION
            emu::check_aligned(row + c, 8);
            row[c] = x0;
            row[c + 1] = x1;
#else
            *reinterpret_cast<float2 *>(row + c) = make_float2(x0, x1);
#endif
          } else {
            if (c < p.d) row[c] = x0;
            if (c + 1 < p.d) row[c + 1] = x1;
          }
        }
      }
    }
  }
#endif
}

// Floats of the pre-split planes (the FloatScratch the caller passes to fwd_mma_plan): PW KT DP
// per key tile, ceil(n / KT) tiles per problem ((32, 1024, 64) SPLIT: 33.5 MB); 0 where the plan
// declines (d == 0, d > 128, n == 0 or bh == 0, or the kernel's shared memory over
// launch.smem_limit(): sm_86 / sm_89's 99 KB at d > 32), so that no scratch is taken then.
template <class L>
uint64_t fwd_mma_planes_floats(const L &launch, const Problem &p, bool split) {
  if (p.d == 0 || p.d > 128 || p.n == 0 || p.bh == 0) return 0;
  return with_tc_dp(p.d, [&](auto dpc) -> uint64_t {
    constexpr unsigned DP = decltype(dpc)::value, KT = mma_kt<DP>();
    const size_t bytes = (split ? fwd_mma_smem_floats<DP, true>()
                                : fwd_mma_smem_floats<DP, false>()) * sizeof(float);
    if (bytes > launch.smem_limit()) return 0;
    return p.bh * ((p.n + KT - 1) / KT) * KT * DP * (split ? 4 : 2);
  });
}

// The fast forward's launch (split_kv_kernel, then fwd_mma_kernel), or false (nothing launched)
// where it does not apply: where fwd_mma_planes_floats(launch, p, split) is 0, or planes is null
// (the caller runs the exact kernels then). planes: that many floats, 16-byte aligned.
// F (MmaForm): the form; the library launches the standard one. The planes' size is the same in
// every form, and so are the bits.
template <MmaForm F = MmaForm::standard, class L>
bool fwd_mma_plan(L &launch, const Problem &p, bool split, const float *q, const float *k,
                  const float *v, float *out, float *lse, float *planes) {
  if (planes == nullptr || fwd_mma_planes_floats(launch, p, split) == 0) return false;
  const KP kp = kernel_view(p, aligned16(q) && aligned16(k) && aligned16(v) && aligned16(out));
  const dim3 grid = grid_of(launch, (kp.n + 16 * kMmaWarps - 1) / (16 * kMmaWarps), kp.bh);
  return with_tc_dp(p.d, [&](auto dpc) {
    return with_flag(split, [&](auto splitc) {
      constexpr unsigned DP = decltype(dpc)::value, KT = mma_kt<DP>();
      constexpr bool SPLIT = decltype(splitc)::value, FQ = mma_frag_qtile<DP, SPLIT, F>();
      const uint64_t bx = ((uint64_t)((kp.n + KT - 1) / KT) * KT * DP + 255) / 256;
      const dim3 sgrid((unsigned)(bx < 0x7FFFFFFFull ? bx : 0x7FFFFFFFull), grid.y, 1);
      const size_t smem = fwd_mma_smem_floats<DP, SPLIT>() * sizeof(float);
      launch("attention split_kv_kernel", split_kv_kernel<DP, SPLIT, FQ>, sgrid, 256u, (size_t)0,
             kp, k, v, planes);
      launch("attention fwd_mma_kernel", fwd_mma_kernel<DP, SPLIT, kMmaWarps, FQ>, grid,
             32 * kMmaWarps, smem, kp, q, (const float *)planes, out, lse);
      return true;
    });
  });
}

}  // namespace attn_kernels
}  // namespace cuda
}  // namespace tlrt
