/* libtorchlean_rt: fused scaled dot-product attention (FlashAttention-2 order), forward and
 * backward.
 *
 * SHAPES AND LAYOUT. q, k and v are row-major (bh, n, d) tensors (bh = batch * heads; one
 * independent attention problem per leading index). The optional mask is either (bh, n, n) (one
 * mask per problem) or (n, n) (the same mask broadcast over bh); which one is decided by its
 * element count (bh * n * n or n * n; when bh == 1 the two coincide). Every output is a fresh
 * buffer on the device of the inputs. Limits: 1 <= d <= 256 (the head dimension), n <= 2^31 - 1
 * and bh <= 2^31 - 1 (kernel grid limits); d == 0 or n == 0 or bh == 0 give empty outputs.
 *
 * DEFINITIONS. For problem b, query row i and key j (i, j < n):
 *   blocked(i, j) = (causal && j > i) || (mask != NULL && m[i, j] == 0)
 *     where m is mask[b] or the broadcast (n, n) mask. ONLY +0 and -0 block: any other value,
 *     NaN included, means "allowed" (upstream's hard-mask rule; the mask is a 0/1 selector, not an
 *     additive bias).
 *   dot(i, j) = q[i, 0] k[j, 0] + ... + q[i, d-1] k[j, d-1], evaluated as the fma chain
 *     acc = 0; acc = fma(q[i, t], k[j, t], acc) for t = 0, 1, ..., d - 1
 *   s(i, j)   = dot(i, j) * scale                                      (one rounding)
 *               + mask_fill if blocked(i, j) and mask_fill is finite   (one more rounding)
 *               excluded    if blocked(i, j) and mask_fill == -inf
 *   P(i, j)   = exp(s(i, j) - lse(i)) over the non-excluded j, 0 for excluded j,
 *   lse(i)    = log sum_j exp(s(i, j)) over the non-excluded j,
 *   out[i, :] = sum_j P(i, j) v[j, :].
 * A finite mask_fill is the seeds' additive convention: a blocked score still enters the softmax
 * with mask_fill added (-1000.0 in the seeds; the result then differs from exact exclusion only
 * when every score of a row is blocked, or by e^-1000 = 0 in float32 otherwise). mask_fill = -inf
 * is exact exclusion (upstream's hard mask): a row with every key excluded has out = 0,
 * lse = -inf, and zero gradients. That is the one exception to the host-scalar rule of
 * torchlean_rt.h here: +inf or NaN for mask_fill, or a finite mask_fill that rounds to +-inf in
 * float32, is TLRT_ERR_INVALID_ARGUMENT, as is a scale outside the rule.
 * Backward, with dout the upstream gradient of out:
 *   D(i)     = sum_t dout[i, t] out[i, t]   (fma chain over t = 0..d-1)
 *   dP(i, j) = dout[i, :] . v[j, :]          (fma chain over t)
 *   dS(i, j) = P(i, j) (dP(i, j) - D(i)),   0 for excluded (i, j)
 *   dq[i, :] = scale * sum_j dS(i, j) k[j, :],  dk[j, :] = scale * sum_i dS(i, j) q[i, :],
 *   dv[j, :] = sum_i P(i, j) dout[i, :]
 * (sums over j and i ascending, fma chains, the factor scale applied once at the end). mask_fill,
 * the mask and causal are constants: no gradient flows to them.
 *
 * ORDER OF OPERATIONS (FlashAttention-2, both backends). Keys in tiles of 64 (and, in the dk / dv
 * sums, queries in tiles of 64). Per row and key tile (out-of-range keys have s = excluded):
 * tile max mt = max over the tile's scores (excluded = -inf), taken as 8 lane maxima (lane
 * x < 8 owns keys x, x + 8, ..., x + 56) combined in the butterfly ((0 1)(2 3))((4 5)(6 7));
 * m' = max(m, mt); alpha = exp(m - m') (1 while m' = -inf); p = exp(s - m') (0 for excluded);
 * l = l * alpha + rowsum(p) (rowsum: the same 8 lanes, each summing its 8 keys in order, then the
 * butterfly); acc = acc * alpha, then acc = fma(p, v[j, :], acc) for the tile's keys in order.
 * Finally out = acc / l and lse = m + log(l), except l == 0 (every key excluded): out = 0,
 * lse = -inf. exp and log are the shared float32 functions of
 * tlrt_exp / tlrt_log (<= 0.9 ulp). The backward recomputes P = exp(s - lse) from the saved lse
 * (never an n x n matrix in memory): dk and dv per block of keys looping over query blocks, dq per
 * block of queries looping over key tiles, every sum in ascending index order.
 * With mask_fill == -inf and causal, tiles entirely above the diagonal are skipped: row i (out and
 * dq) visits only the key tiles starting at or before i, and a key j (dk and dv) only the query
 * tiles ending at or after the start of j's key tile. A skipped tile adds nothing (a visited one
 * whose terms are all excluded still adds p = 0 times its values, which matters only for
 * non-finite values or a -0 sum). With a finite mask_fill every tile is computed. How the CUDA
 * kernels group rows into blocks does not enter the order.
 *
 * MODES AND NUMERIC CLASS: library (bound against float64), run-to-run deterministic in every
 * mode (no atomics: the same inputs in the same mode on the same device give the same bits). A
 * call's mode is fixed when it starts, from two process switches:
 *   EXACT, the determinism switch ON (tlrt_set_deterministic, abi/tlrt_runtime.h): both backends
 *     perform the IEEE operations of the ORDER OF OPERATIONS above, so CPU and CUDA agree bit for
 *     bit (the parity suite checks it; NaN payloads unspecified). The CPU backend does so in
 *     every mode.
 *   SPLIT-TF32, the default (switch OFF, allow_tf32 off): CUDA may form the matrix products (the
 *     forward's Q K^T and P V; the backward's S = Q K^T and dP = dout V^T, recomputed in its dk/dv
 *     and its dq pass, dv = P^T dout, dk = dS^T Q, dq = dS K) in split TF32: each product a b as
 *     small(a) big(b) + big(a) small(b) + big(a) big(b), big(x) = x rounded to TF32 (10 mantissa
 *     bits, nearest, ties away), small(x) = big(x - big(x)), accumulated in float32 in an order of
 *     the implementation's, not the ORDER OF OPERATIONS. In the backward P and dS may enter dv,
 *     dk and dq as big(x) and x - big(x) truncated to TF32 (within 2^-21 |x| of x where small(x)
 *     is within 2^-22). The softmax stays float32, with exp(x)
 *     possibly a hardware 2^(x log2 e) of relative error ~2^-22 (plus the rounding of its
 *     argument) whose results below 2^-126 are flushed to zero; lse's log, D, dS's formula and the
 *     factor scale are as in the DEFINITIONS. Float32-grade: within the split-TF32 bound below,
 *     not bit for bit the CPU. Problems or devices without such a kernel (always d > 128) run the
 *     EXACT operations, which are within that bound too.
 *   TF32 (switch OFF, tlrt_set_allow_tf32(true), abi/tlrt_blas.h; CUDA only, opt-in): the same
 *     products may be formed with the operands rounded to TF32, one product big(a) big(b) each,
 *     accumulated in float32 in the implementation's order: ~1e-3 relative, within the TF32 bound
 *     below. The softmax stays float32 (exp as in SPLIT-TF32 or the shared one) and D the exact
 *     fma chain. Problems or devices without such a kernel (always d > 128; a masked backward)
 *     run the EXACT operations.
 * Which problems and devices take which kernel, with their tile and block sizes, is an
 * implementation detail (docs/kernels/attention.md); the bounds below hold whichever runs.
 * ACCURACY against a float64 evaluation of the DEFINITIONS on the same float32 inputs
 * (tests/unit/test_attention.cpp asserts it; u = 2^-24; S = max over the problem's rows i of
 * |scale| max_j sum_t |q[i,t] k[j,t]|, plus |mask_fill| if a score is blocked; A(x) = the same
 * formula for x evaluated in float64 with every term replaced by its absolute value, e.g.
 * A(out[i,t]) = sum_j P(i,j) |v[j,t]|), EXACT mode:
 *   |x - x64| <= u (2 n + 4 d + 8 d S + 64) A(x)   for out, dq, dk and dv,
 *   |lse - lse64| <= u (4 d S + 2 n + 8) (1 + |lse|).
 * (Measured worst error / bound: 0.043 over the unit test's grid of shapes, masks and fills;
 * the unit test prints it.) SPLIT-TF32 mode (the EXACT operations are within it too), for out,
 * dq, dk, dv and lse:
 *   |x - x64| <= u (4 n + 8 d + 16 (d + 2) S + 128) A(x),
 *   |lse - lse64| <= u (8 (d + 2) S + 4 n + 16) (1 + |lse|);
 * TF32 mode: those plus 2^-11 (8 S + 8) A(x), and plus 2^-11 (4 S + 4) (1 + |lse|) for lse.
 * (tests/unit/test_attention_mma_emu.cpp and test_attention_tc_emu.cpp check them on an
 * emulation of the kernels, the parity suite on the GPU; all print the worst error / bound.)
 * These two bounds assume
 * finite inputs whose nonzero magnitudes lie in [2^-100, 2^126]: small(x) of tinier values may
 * be subnormal on the tensor cores, and big(x) of larger ones may round to infinity. S large
 * (scores of magnitude ~100 and beyond) loses digits in exp(s - m) like every float32 softmax.
 *
 * SPECIAL VALUES. A NaN in q, k or v (or an infinite score) makes the affected rows NaN; an
 * infinite mask entry counts as allowed. Inputs are not scanned. In the SPLIT-TF32 and TF32 modes
 * an infinite q, k, v (or dout) element may also make the affected rows NaN (small(inf) is NaN),
 * including, for v, rows whose key tile holds it with p = 0.
 *
 * MEMORY. Nothing of size n x n is ever allocated on either backend: the forward's extra output
 * is lse (bh * n floats); the backward's scratch is D (bh * n floats); the seeds' single-gradient
 * entry points also hold out and lse (bh * n * d + bh * n floats) from their internal forward. In
 * the SPLIT-TF32 and TF32 modes CUDA may add scratch for split operands: the forward at most
 * 4 bh n' d' floats (n' = n rounded up to 64, d' = d rounded up to 32, 64 or 128); the backward
 * at most 14 bh n' d'' floats (d'' = 64 for d <= 64, else 128; at most 28 times the size of q)
 * and, with a mask and mask_fill = -inf, n'^2 / 16 32-bit words of exclusion bits per distinct
 * mask (one for a broadcast mask, else bh: 1/16 of the mask). */
#ifndef TLRT_ATTENTION_H
#define TLRT_ATTENTION_H

#include <stdbool.h>

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Attention forward (DEFINITIONS above): out (bh * n * d) and lse (bh * n), from q, k, v
 * (bh * n * d each) and an optional mask (NULL = none; bh * n * n or n * n elements). scale and
 * mask_fill are doubles rounded once to float32 under the host-scalar rule of torchlean_rt.h
 * (finite, and finite in float32), except that mask_fill may be -inf (scale is usually
 * 1 / sqrt(d)).
 * Empty cases: bh == 0 or n == 0 gives empty outputs; d == 0 (q, k, v empty) gives an empty out
 * and the lse of the DEFINITIONS with every dot product 0 (s = 0, or mask_fill where blocked; so
 * log of the number of non-excluded keys without fill, -inf for a fully excluded row).
 * Errors: TLRT_ERR_NULL_ARGUMENT (q, k, v, out, lse); TLRT_ERR_RELEASED; TLRT_ERR_DEVICE_MISMATCH
 * (q, k, v, mask on different devices); TLRT_ERR_SHAPE (q not bh * n * d, the product taken
 * exactly; k or v a different size than q; mask neither bh * n * n nor n * n elements);
 * TLRT_ERR_INVALID_ARGUMENT (d > 256; n or bh > 2^31 - 1; scale NaN or +-inf, or rounding to
 * +-inf in float32; mask_fill NaN or +inf, or finite but rounding to +-inf);
 * TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. On failure *out and *lse are NULL.
 * Cost (CUDA): q read once, k and v once per block of query rows (from cache), out and lse
 * written once (the tensor-core modes first write K and V once as TF32 operands); 4 n^2 d FLOPs
 * per problem (about half with causal and mask_fill == -inf), as three TF32 products each in the
 * SPLIT-TF32 mode and one in the TF32 mode. */
TLRT_API tlrt_status tlrt_flash_attention_fwd(const tlrt_buffer *q, const tlrt_buffer *k,
                                              const tlrt_buffer *v, const tlrt_buffer *mask,
                                              uint64_t bh, uint64_t n, uint64_t d, double scale,
                                              bool causal, double mask_fill, tlrt_buffer **out,
                                              tlrt_buffer **lse);

/* Fused attention backward (DEFINITIONS above): dq, dk, dv (bh * n * d each) from the forward's
 * inputs, the upstream gradient dout, and the forward's own out and lse (the tape uses this one).
 * out and lse are not checked to be the forward's; P is recomputed from lse, so a foreign lse
 * gives the gradient of a different (unnormalised) map. Arguments as tlrt_flash_attention_fwd.
 * Empty cases: any of bh, n, d zero gives empty outputs (d == 0: nothing to differentiate).
 * Errors: as tlrt_flash_attention_fwd, plus TLRT_ERR_NULL_ARGUMENT (dout, out, lse, dq, dk, dv)
 * and TLRT_ERR_SHAPE (dout or out a different size than q; lse not bh * n elements).
 * On failure *dq, *dk and *dv are NULL.
 * Cost (CUDA): D (reads dout and out once), then a dk/dv pass over blocks of keys and a dq pass
 * over blocks of query rows, each recomputing P from lse: 14 n^2 d FLOPs per problem (the usual
 * count is 10 n^2 d), as tensor-core products in the SPLIT-TF32 and TF32 modes (in SPLIT-TF32
 * after a pass writing the split operands, MEMORY above). No atomics: deterministic, run to run. */
TLRT_API tlrt_status tlrt_flash_attention_bwd(
    const tlrt_buffer *q, const tlrt_buffer *k, const tlrt_buffer *v, const tlrt_buffer *mask,
    const tlrt_buffer *dout, const tlrt_buffer *out, const tlrt_buffer *lse, uint64_t bh,
    uint64_t n, uint64_t d, double scale, bool causal, double mask_fill, tlrt_buffer **dq,
    tlrt_buffer **dk, tlrt_buffer **dv);

/* The seeds' single-gradient entry points (torchlean_cuda_buffer_flash_attention_bwd_{q,k,v}):
 * the one gradient named, from q, k, v, the optional mask and dout; each runs the forward itself
 * (out and lse held as scratch for the call) and then computes only what it needs (dv needs no D
 * and no dS). The result is bit for bit the corresponding output of tlrt_flash_attention_bwd given
 * tlrt_flash_attention_fwd's out and lse (all three called in the same mode: determinism switch
 * and allow_tf32 unchanged). Arguments, empty cases and errors as
 * tlrt_flash_attention_bwd (TLRT_ERR_NULL_ARGUMENT for dout and the one out-parameter). */
TLRT_API tlrt_status tlrt_flash_attention_bwd_q(const tlrt_buffer *q, const tlrt_buffer *k,
                                                const tlrt_buffer *v, const tlrt_buffer *mask,
                                                const tlrt_buffer *dout, uint64_t bh, uint64_t n,
                                                uint64_t d, double scale, bool causal,
                                                double mask_fill, tlrt_buffer **dq);
TLRT_API tlrt_status tlrt_flash_attention_bwd_k(const tlrt_buffer *q, const tlrt_buffer *k,
                                                const tlrt_buffer *v, const tlrt_buffer *mask,
                                                const tlrt_buffer *dout, uint64_t bh, uint64_t n,
                                                uint64_t d, double scale, bool causal,
                                                double mask_fill, tlrt_buffer **dk);
TLRT_API tlrt_status tlrt_flash_attention_bwd_v(const tlrt_buffer *q, const tlrt_buffer *k,
                                                const tlrt_buffer *v, const tlrt_buffer *mask,
                                                const tlrt_buffer *dout, uint64_t bh, uint64_t n,
                                                uint64_t d, double scale, bool causal,
                                                double mask_fill, tlrt_buffer **dv);

/* ---- attention of strided views: separate lengths, grouped heads, fused projections (ABI 1.4)
 *
 * The problem as data: tlrt_attention_geometry describes batch * heads_q attention problems of
 * len_q queries and len_k keys of dimension d, whose q, k and v rows are read IN PLACE from
 * strided views, so that q, k and v may all be regions of ONE buffer (a fused projection's
 * output) and no split or permute copy is needed; out is written token-major, ready for the
 * output projection. Every field is a uint64_t (no padding; 19 fields, 152 bytes in this
 * version):
 *   struct_size   sizeof(tlrt_attention_geometry), with the rules of tlrt_conv_geometry
 *                 (abi/tlrt_conv.h): below 152 or above 4096, or a nonzero byte past the fields
 *                 this library knows, is TLRT_ERR_INVALID_ARGUMENT; a zero-filled struct is
 *                 never valid (heads_kv 0).
 *   batch         B, sequences.
 *   heads_q       Hq >= 1, query heads: a multiple of heads_kv.
 *   heads_kv      Hkv >= 1, key / value heads. Query head h reads key / value head
 *                 h / (Hq / Hkv) (grouped-query attention; Hkv = 1 is multi-query, Hkv = Hq
 *                 ordinary multi-head attention).
 *   len_q         Tq, query tokens per sequence.
 *   len_k         Tk, key / value tokens per sequence (Tk != Tq: cross-attention, a KV cache).
 *   d             the head dimension, <= 256 (0 allowed).
 *   q_offset, q_stride_batch, q_stride_token, q_stride_head   the view of q, in elements of its
 *                 buffer: row (b, i, h) of q is the d contiguous elements starting at
 *                 q_offset + b q_stride_batch + i q_stride_token + h q_stride_head;
 *   k_*, v_*      likewise for k and v, rows (b, j, g) with j < Tk, g < Hkv.
 * The last dimension is contiguous; the strides are arbitrary otherwise (0 repeats a row, views
 * may overlap: inputs are only read). For a fused projection's output of shape (B, T,
 * (Hq + 2 Hkv) d), each token's row holding its Hq query heads, then its Hkv key heads, then its
 * Hkv value heads (Tq = Tk = T), q, k and v are that one buffer with
 *   q_offset = 0, k_offset = Hq d, v_offset = (Hq + Hkv) d, every stride_batch = T (Hq + 2 Hkv) d,
 *   every stride_token = (Hq + 2 Hkv) d, every stride_head = d.
 * C hosts write `tlrt_attention_geometry g = {0}; g.struct_size = sizeof g; ...`.
 *
 * DEFINITIONS. Problem (b, h) is the attention of the DEFINITIONS above with query rows
 * q[i] = row (b, i, h) of q (i < Tq), keys k[j] and values v[j] = rows (b, j, h / (Hq / Hkv)) of
 * k and v (j < Tk), and
 *   blocked(i, j) = (causal && j > i + Tk - Tq) || (mask != NULL && m[i, j] == 0).
 * Causal is ALIGNED BOTTOM-RIGHT (FlashAttention 2's convention, the one of a KV cache: the last
 * query is the newest token and sees every key; with Tq = 1 a decode step sees all Tk keys).
 * For Tq == Tk it is the usual causal mask; for Tq > Tk the first Tq - Tk queries see no key at
 * all (with mask_fill = -inf: out 0, lse -inf, as every fully excluded row). PyTorch's
 * scaled_dot_product_attention(is_causal=True) aligns TOP-LEFT instead (query i sees keys
 * j <= i): the two agree only when Tq == Tk; for top-left with Tq != Tk pass an explicit mask.
 * The mask (optional, NULL = none) is (Tq, Tk) row-major, broadcast over every (b, h), or
 * (B, Hq, Tq, Tk), one per problem; which one is decided by its element count (Tq Tk or
 * B Hq Tq Tk; when B Hq == 1 they coincide); selection, mask_fill and the special values as
 * above. Outputs (fresh buffers on the inputs' device):
 *   out (B, Tq, Hq, d) row-major, token-major: out[b, i, h, :] = out of problem (b, h), row i;
 *     so out is (B * Tq, Hq d), the input of the output projection, with no permute;
 *   lse (B, Hq, Tq): lse[b, h, i] of problem (b, h).
 * Backward: the gradients of the DEFINITIONS, dq of query head h from problem (b, h) alone, and
 * for key / value head g the sum over its query heads h = g G .. g G + G - 1 (G = Hq / Hkv):
 *   dk[b, j, g, :] = scale * (sum over h ascending, then i ascending, of dS_h(i, j) q_h[i, :]),
 *   dv[b, j, g, :] = sum over h ascending, then i ascending, of P_h(i, j) dout_h[i, :],
 * each ONE fma chain running through the heads in that fixed order (the same order on CPU and
 * CUDA, so grouped heads keep the EXACT mode's bit-for-bit agreement), scale applied once.
 *
 * ORDER OF OPERATIONS: per problem the ORDER OF OPERATIONS above, with query rows in tiles of
 * 64 (rows 64 t .. 64 t + 63) and keys in tiles of 64 (keys 64 u .. 64 u + 63); with causal and
 * mask_fill == -inf, query tile t and key tile u are computed together only when
 *   64 u <= 64 t + 63 + Tk - Tq
 * (some pair of them is not causally blocked); a skipped pair adds nothing. For Tq == Tk this is
 * exactly the skipping rule above, and tlrt_flash_attention_fwd / _bwd give the bits of these
 * entry points on the geometry (B = bh, Hq = Hkv = 1, Tq = Tk = n, contiguous views).
 *
 * MODES AND NUMERIC CLASS, ACCURACY: those of the header above, per mode, with n = max(Tk,
 * G Tq) in the bounds (dk and dv sum G Tq terms; out, lse and dq Tk). In the EXACT mode CPU and
 * CUDA agree bit for bit, with grouped heads, strided views and Tq != Tk. The SPLIT-TF32 and
 * TF32 modes run their tensor-core kernels when Tq == Tk (docs/kernels/attention.md says how the
 * views reach them); otherwise the EXACT operations, which are within their bounds too.
 *
 * MEMORY. As above with bh = B Hq and n = max(Tq, Tk): lse, D and the tensor-core modes'
 * scratch; in the SPLIT-TF32 and TF32 modes CUDA may also copy the views to contiguous scratch:
 * at most 4 B Hq n d floats in the forward and 8 B Hq n d in the backward. */

typedef struct tlrt_attention_geometry {
  uint64_t struct_size;  /* sizeof(tlrt_attention_geometry), set by the caller */
  uint64_t batch;        /* B */
  uint64_t heads_q;      /* Hq, a multiple of heads_kv */
  uint64_t heads_kv;     /* Hkv >= 1 */
  uint64_t len_q;        /* Tq */
  uint64_t len_k;        /* Tk */
  uint64_t d;            /* head dimension, <= 256 */
  uint64_t q_offset;     /* element of q's buffer holding q[b = 0, i = 0, h = 0, 0] */
  uint64_t q_stride_batch;
  uint64_t q_stride_token;
  uint64_t q_stride_head;
  uint64_t k_offset;
  uint64_t k_stride_batch;
  uint64_t k_stride_token;
  uint64_t k_stride_head;
  uint64_t v_offset;
  uint64_t v_stride_batch;
  uint64_t v_stride_token;
  uint64_t v_stride_head;
} tlrt_attention_geometry;

/* Attention forward of the views of `geometry` (DEFINITIONS of this section): out
 * (B * Tq * Hq * d, token-major) and lse (B * Hq * Tq). q, k and v may be the same buffer.
 * scale, causal and mask_fill as tlrt_flash_attention_fwd.
 * Empty cases: B or Tq zero: empty outputs. Tk zero: every row has no key: out zeros, lse -inf.
 * d zero: out empty, lse as tlrt_flash_attention_fwd's d == 0 case. A view of an empty problem
 * (B, its length or d zero) is not checked against its buffer (nor read).
 * Errors, checked in this order: TLRT_ERR_NULL_ARGUMENT (out, lse); for q, k, v and the mask in
 * turn TLRT_ERR_NULL_ARGUMENT (not the mask), TLRT_ERR_STALE_HANDLE, TLRT_ERR_RELEASED,
 * TLRT_ERR_DTYPE; TLRT_ERR_DEVICE_MISMATCH (k, v, mask against q); TLRT_ERR_NULL_ARGUMENT
 * (geometry); TLRT_ERR_INVALID_ARGUMENT (struct_size; heads_q not a positive multiple of
 * heads_kv; d > 256; len_q or len_k > 2^31 - 1; B Hq > 2^31 - 1, the product taken exactly);
 * TLRT_ERR_OVERFLOW (out beyond TLRT_MAX_ELEMENTS elements); TLRT_ERR_SHAPE (a view reaching
 * past the end of its buffer: its last element offset + (B - 1) stride_batch + (len - 1)
 * stride_token + (heads - 1) stride_head + d - 1, computed exactly, not below the buffer's size;
 * then the mask neither Tq Tk nor B Hq Tq Tk elements); TLRT_ERR_INVALID_ARGUMENT (scale, then
 * mask_fill, as tlrt_flash_attention_fwd); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA;
 * TLRT_ERR_DEVICE_LOST. On failure *out and *lse are NULL.
 * Cost (CUDA): as tlrt_flash_attention_fwd per problem with n^2 replaced by Tq Tk; k and v of
 * a group are read by each of its G query heads (from cache). */
TLRT_API tlrt_status tlrt_attention_fwd(const tlrt_buffer *q, const tlrt_buffer *k,
                                        const tlrt_buffer *v, const tlrt_buffer *mask,
                                        const tlrt_attention_geometry *geometry, double scale,
                                        bool causal, double mask_fill, tlrt_buffer **out,
                                        tlrt_buffer **lse);

/* Attention backward of the views of `geometry` (DEFINITIONS of this section), written IN PLACE:
 * dq, dk and dv are the caller's buffers, and the views of grad_geometry (its q_*, k_* and v_*
 * fields; its batch, heads and lengths must equal geometry's) say where: row (b, i, h) of dq is
 * written at q_offset + b q_stride_batch + i q_stride_token + h q_stride_head of dq, and so on.
 * Exactly the elements of the three views are written, nothing else of those buffers. They may
 * be regions of ONE buffer (the gradient of a fused projection, read directly by its backward:
 * grad_geometry = geometry for a buffer shaped like the projection's output). dq, dk or dv NULL:
 * that gradient is not computed (dv alone needs no D and no dS). dout (B * Tq * Hq * d,
 * token-major like out), out and lse are the forward's (as tlrt_flash_attention_bwd: not
 * checked to be).
 * DESTINATIONS MUST NOT OVERLAP, and this library must be able to tell, or the call is
 * TLRT_ERR_INVALID_ARGUMENT (nothing written):
 *   - each view is one-to-one: its dimensions of extent > 1 (d with stride 1, heads, tokens,
 *     batch), in ascending order of stride, each have a stride at least the span of those before
 *     it (span: 1 + the sum of stride (extent - 1)); a zero stride of an extent > 1 fails;
 *   - two views in the same buffer are disjoint by their element ranges [first, last], or by
 *     columns: both have the same stride_token s > 0, stride_batch a multiple of s (or B == 1),
 *     a token width w = (heads - 1) stride_head + d <= s, and the ranges offset + [0, w) taken
 *     modulo s do not meet (the fused layout above);
 *   - dq, dk and dv do not share storage with q, k, v, mask, dout, out or lse; two of them that
 *     are different handles do not share storage either (one buffer is passed as the same
 *     handle).
 * Empty cases: nothing is written when B or d is zero, nor to dq when Tq is zero, nor to dk and
 * dv when Tk is zero; Tk == 0 writes dq = 0 * scale, Tq == 0 writes dk = 0 * scale and dv = 0.
 * Errors, checked in this order: for q, k, v, the mask, dout, out and lse in turn
 * TLRT_ERR_NULL_ARGUMENT (not the mask), TLRT_ERR_STALE_HANDLE, TLRT_ERR_RELEASED, TLRT_ERR_DTYPE;
 * TLRT_ERR_DEVICE_MISMATCH (each against q); the geometry, the views of q, k, v, the mask, scale
 * and mask_fill as tlrt_attention_fwd; TLRT_ERR_SHAPE (dout or out not B Tq Hq d elements, lse
 * not B Hq Tq); grad_geometry: TLRT_ERR_NULL_ARGUMENT, TLRT_ERR_INVALID_ARGUMENT (struct_size),
 * TLRT_ERR_SHAPE (its batch, heads, lengths or d not geometry's); for dq, dk, dv in turn (each
 * may be NULL) TLRT_ERR_STALE_HANDLE, TLRT_ERR_RELEASED, TLRT_ERR_DTYPE, TLRT_ERR_DEVICE_MISMATCH
 * (against q); TLRT_ERR_SHAPE (a gradient view past the end of its buffer, as for the inputs);
 * TLRT_ERR_INVALID_ARGUMENT (the overlap rules above); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA;
 * TLRT_ERR_DEVICE_LOST. A failing call writes nothing.
 * Cost (CUDA): as tlrt_flash_attention_bwd per problem with n^2 replaced by Tq Tk. */
TLRT_API tlrt_status tlrt_attention_bwd(const tlrt_buffer *q, const tlrt_buffer *k,
                                        const tlrt_buffer *v, const tlrt_buffer *mask,
                                        const tlrt_buffer *dout, const tlrt_buffer *out,
                                        const tlrt_buffer *lse,
                                        const tlrt_attention_geometry *geometry, double scale,
                                        bool causal, double mask_fill, tlrt_buffer *dq,
                                        tlrt_buffer *dk, tlrt_buffer *dv,
                                        const tlrt_attention_geometry *grad_geometry);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_ATTENTION_H */
