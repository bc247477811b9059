/* examples/lm/mamba.c: the Mamba-style language model of mamba.py in plain C over the public
 * headers (C99), trained through the tape on the Python 3.11 documentation's text, with
 * checkpoints.
 *
 *   build/examples/mamba --quick                      # CPU: what CI runs
 *   build/examples/mamba --cuda                       # the small configuration on the first GPU
 *   build/examples/mamba --quick --save mamba.safetensors --save-every 50
 *   build/examples/mamba --resume mamba.safetensors   # continues where the checkpoint stopped
 *
 * The model is mamba.py's, call for call: byte-level tokens (vocabulary 256), a learned token
 * embedding, L residual blocks (pre-RMSNorm, tlrt_tape_rms_norm) of
 *   xz = in_proj(h)                      (d -> 2 di: the branch x and the gate z)
 *   u  = silu(x)
 *   delta = softplus(dt_proj(u)), B_t = b_proj(u), C_t = c_proj(u)      (di -> di, di -> N)
 *   h_t = exp(delta_t[c] A[c, n]) h_{t-1} + (delta_t[c] B_t[n]) u_t[c],   A = -exp(A_log)
 *        (tlrt_tape_selective_scan_diag_var over time, the state (T, batch di N) time-major)
 *   y  = sum_n C_t[n] h_t[c, n] + D[c] u_t[c];   out = out_proj(y * silu(z))
 * a final RMSNorm and an LM head tied to the embedding. The scan's operands are built time-major
 * from the (rows, di) and (rows, N) projections by reshape / permute / broadcast_to nodes, in
 * mamba.py's order, so that on the CPU mamba.c and mamba.py print the same losses bit for bit.
 *
 * Training, data, options and checkpoints are examples/lm/lm_common.h's, as gpt.c's (its top
 * comment lists the options): AdamW (tlrt_adam_step_multi, weight decay on the normal-initialised
 * matrices only), a cosine schedule with linear warm-up, clipping by global norm; --save /
 * --resume / --stop-after with the checkpoint layout of lm.py (metadata "model" "mamba" and the
 * keys d, layers, di, state, ctx, batch, steps, lr, warmup, seed, dropout, weight_decay, clip,
 * val_init). Dropout is accepted and stored but unused (mamba.py has none). The sample is
 * lm.py's without a decoder: each byte from one forward over the last ctx bytes.
 *
 * Every library call is checked: a failure prints the call, the status and tlrt_last_error(),
 * frees everything and exits 1. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, opendir under -std=c99 */

#define PROG "mamba"
#include "lm_common.h"

enum { PER_LAYER = 9 }; /* norm.g in_proj.w dt_proj.w dt_proj.b b_proj.w c_proj.w A_log D
                           out_proj.w */

/* Parameters in mamba.py's order (the order of the leaves, gradients, clipping and AdamW). */
static tlrt_status model_init(Model *m) {
  tlrt_status st = TLRT_OK;
  const Config *cfg = &m->cfg;
  const uint64_t d = cfg->d, L = cfg->layers, di = cfg->di, N = cfg->state, V = cfg->vocab;
  const double dt_bias = log(expm1(0.01)); /* softplus^-1(0.01): delta ~ 0.01 at start */
  uint64_t i, c, n;
  float *a_log = (float *)malloc(di * N * sizeof *a_log);
  char name[NAME_MAX_LEN];
  TRY(model_alloc(m, 2 + PER_LAYER * L));
  if (!a_log) FAIL("out of host memory");
  /* A = -exp(A_log) = -(1 .. N) per channel (S4D-real), rounded to float as mamba.py's list */
  for (c = 0; c < di; ++c)
    for (n = 0; n < N; ++n) a_log[c * N + n] = (float)log((double)(n + 1));
  TRY(normal(m, "wte", V, d, 0.02));
  for (i = 0; i < L; ++i) {
#define NAME(s) (snprintf(name, sizeof name, "b%llu.%s", (unsigned long long)i, s), name)
    TRY(constant(m, NAME("norm.g"), d, 1.0));
    TRY(normal(m, NAME("in_proj.w"), 2 * di, d, 0.02));
    TRY(normal(m, NAME("dt_proj.w"), di, di, 0.02));
    TRY(constant(m, NAME("dt_proj.b"), di, dt_bias));
    TRY(normal(m, NAME("b_proj.w"), N, di, 0.02));
    TRY(normal(m, NAME("c_proj.w"), N, di, 0.02));
    TRY(tlrt_buffer_from_f32(m->dev, a_log, di * N,
                             &new_param(m, NAME("A_log"), di, N, 0)->w));
    TRY(constant(m, NAME("D"), di, 1.0));
    TRY(normal(m, NAME("out_proj.w"), d, di, 0.02 / sqrt((double)(2 * L))));
#undef NAME
  }
  TRY(constant(m, "normf.g", d, 1.0));
  TRY(model_zero_moments(m));
done:
  free(a_log);
  return st;
}

/* (a * b, width) rows in (a, b) order -> rows in (b, a) order: reshape (a, b, width), permute
 * (1, 0, 2), reshape (a b, width). mamba.py's time_major is (batch, n), batch_major (n, batch).
 * x stays; the inner nodes are released. */
static tlrt_status swap_major(tlrt_tape *t, uint64_t x, uint64_t a, uint64_t b, uint64_t width,
                              uint64_t *out) {
  tlrt_status st = TLRT_OK;
  const uint64_t d3[3] = {a, b, width}, d2[2] = {a * b, width};
  const uint32_t perm[3] = {1, 0, 2};
  uint64_t r, p;
  TRY(tlrt_tape_reshape(t, x, d3, 3, &r));
  TRY(tlrt_tape_permute(t, r, perm, &p));
  TRY(tlrt_tape_release(t, r));
  TRY(tlrt_tape_reshape(t, p, d2, 2, out));
  TRY(tlrt_tape_release(t, p));
done:
  return st;
}

/* mamba.py's forward: every parameter a leaf (with gradients when train), the zero initial state
 * h0 (batch di N), then the network on tokens (batch * n int32 bytes); *logits = the node of the
 * (batch * n, vocab) logits. dropout and key are unused (mamba.py has no dropout). Each node is
 * released right after its last use, as Python releases mamba.py's when their names are rebound
 * or their expressions end (abi/tlrt_tape.h, MEMORY); the parameter leaves stay. */
static tlrt_status forward(Model *m, tlrt_tape *t, const tlrt_buffer *tokens, uint64_t batch,
                           uint64_t n, int train, double dropout, uint64_t key,
                           uint64_t *logits) {
  tlrt_status st = TLRT_OK;
  const uint64_t di = m->cfg.di, N = m->cfg.state, rows = batch * n, S = batch * di * N;
  const uint64_t full[3] = {rows, di, N}, seq[2] = {n, S}, rd[2] = {rows, di};
  const uint64_t xz3d[3] = {rows, 2, di};
  const uint32_t perm[3] = {1, 0, 2};
  const uint32_t over_n[3] = {1, 2, 0}, over_c[3] = {1, 0, 2}, as_is[3] = {0, 1, 2};
  const uint32_t rows_map[2] = {0, 1};
  uint64_t i, *P = m->ids, h0, x, h, xz, xz3, tmp, tmp2, xb, z, u, delta, Bt, Ct, u_t, delta_t,
      delta3, A, e, dA, dB, u3, rA, rB, rU, hs, y, sz, o;
  tlrt_buffer *zeros = NULL;
  (void)dropout;
  (void)key;
  for (i = 0; i < m->np; ++i)
    TRY(tlrt_tape_leaf(t, m->p[i].w, m->p[i].dims, m->p[i].rank, train != 0, &P[i]));
  TRY(tlrt_buffer_zeros(m->dev, S, &zeros));
  TRY(tlrt_tape_leaf(t, zeros, &S, 1, false, &h0));
  tlrt_buffer_free(zeros); /* the tape holds its reference */
  zeros = NULL;
  /* the node `node` released once `call` has recorded its successor */
#define THEN_RELEASE(call, node)     \
  do {                               \
    TRY(call);                       \
    TRY(tlrt_tape_release(t, node)); \
  } while (0)
  TRY(tlrt_tape_gather_rows_ibuf(t, P[0], tokens, &x)); /* (rows, d) */
  for (i = 0; i < m->cfg.layers; ++i) {
    const uint64_t *q = P + 1 + PER_LAYER * i; /* norm.g in_proj.w dt_proj.w dt_proj.b b_proj.w
                                                   c_proj.w A_log D out_proj.w */
    TRY(tlrt_tape_rms_norm(t, x, q[0], 1e-5, &h));
    THEN_RELEASE(tlrt_tape_linear(t, h, q[1], TLRT_TAPE_NONE, &xz), h); /* (rows, 2 di) */
    THEN_RELEASE(tlrt_tape_reshape(t, xz, xz3d, 3, &xz3), xz);
    /* the branch x and the gate z: halves of the permuted (2, rows, di) */
    TRY(tlrt_tape_permute(t, xz3, perm, &tmp));
    THEN_RELEASE(tlrt_tape_slice_axis0(t, tmp, 0, 1, &tmp2), tmp);
    THEN_RELEASE(tlrt_tape_reshape(t, tmp2, rd, 2, &xb), tmp2);
    TRY(tlrt_tape_permute(t, xz3, perm, &tmp));
    TRY(tlrt_tape_release(t, xz3));
    THEN_RELEASE(tlrt_tape_slice_axis0(t, tmp, 1, 1, &tmp2), tmp);
    THEN_RELEASE(tlrt_tape_reshape(t, tmp2, rd, 2, &z), tmp2);
    THEN_RELEASE(tlrt_tape_silu(t, xb, &u), xb);
    TRY(tlrt_tape_linear(t, u, q[2], q[3], &tmp));
    THEN_RELEASE(tlrt_tape_softplus(t, tmp, &delta), tmp);
    TRY(tlrt_tape_linear(t, u, q[4], TLRT_TAPE_NONE, &Bt)); /* (rows, N) */
    TRY(tlrt_tape_linear(t, u, q[5], TLRT_TAPE_NONE, &Ct)); /* (rows, N) */
    /* the scan's operands time-major (row t batch + b) from the projections */
    TRY(swap_major(t, u, batch, n, di, &u_t));
    TRY(swap_major(t, delta, batch, n, di, &delta_t));
    TRY(tlrt_tape_release(t, delta));
    THEN_RELEASE(tlrt_tape_broadcast_to(t, delta_t, full, 3, over_n, &delta3), delta_t);
    TRY(tlrt_tape_exp(t, q[6], &tmp));
    THEN_RELEASE(tlrt_tape_neg(t, tmp, &A), tmp); /* (di, N) */
    THEN_RELEASE(tlrt_tape_broadcast_to(t, A, full, 3, as_is, &e), A);
    TRY(tlrt_tape_mul(t, delta3, e, &tmp));
    TRY(tlrt_tape_release(t, e));
    THEN_RELEASE(tlrt_tape_exp(t, tmp, &dA), tmp);
    TRY(swap_major(t, Bt, batch, n, N, &tmp));
    TRY(tlrt_tape_release(t, Bt));
    THEN_RELEASE(tlrt_tape_broadcast_to(t, tmp, full, 3, over_c, &e), tmp); /* B[r, n] */
    TRY(tlrt_tape_mul(t, delta3, e, &dB));
    TRY(tlrt_tape_release(t, delta3));
    TRY(tlrt_tape_release(t, e));
    THEN_RELEASE(tlrt_tape_broadcast_to(t, u_t, full, 3, over_n, &u3), u_t);
    THEN_RELEASE(tlrt_tape_reshape(t, dA, seq, 2, &rA), dA);
    THEN_RELEASE(tlrt_tape_reshape(t, dB, seq, 2, &rB), dB);
    THEN_RELEASE(tlrt_tape_reshape(t, u3, seq, 2, &rU), u3);
    TRY(tlrt_tape_selective_scan_diag_var(t, rA, rB, rU, h0, &hs)); /* (n, batch di N) */
    TRY(tlrt_tape_release(t, rA));
    TRY(tlrt_tape_release(t, rB));
    TRY(tlrt_tape_release(t, rU));
    THEN_RELEASE(tlrt_tape_reshape(t, hs, full, 3, &tmp), hs);
    TRY(swap_major(t, Ct, batch, n, N, &tmp2));
    TRY(tlrt_tape_release(t, Ct));
    THEN_RELEASE(tlrt_tape_broadcast_to(t, tmp2, full, 3, over_c, &e), tmp2);
    TRY(tlrt_tape_mul(t, tmp, e, &tmp2));
    TRY(tlrt_tape_release(t, tmp));
    TRY(tlrt_tape_release(t, e));
    THEN_RELEASE(tlrt_tape_reduce_sum_axis(t, tmp2, 2, &y), tmp2); /* (rows, di) time-major */
    TRY(swap_major(t, y, n, batch, di, &tmp));                     /* batch-major */
    TRY(tlrt_tape_release(t, y));
    y = tmp;
    TRY(tlrt_tape_broadcast_to(t, q[7], rd, 2, rows_map, &e)); /* D over the rows */
    TRY(tlrt_tape_mul(t, u, e, &tmp));
    TRY(tlrt_tape_release(t, u));
    TRY(tlrt_tape_release(t, e));
    TRY(tlrt_tape_add(t, y, tmp, &tmp2));
    TRY(tlrt_tape_release(t, y));
    TRY(tlrt_tape_release(t, tmp));
    y = tmp2;
    THEN_RELEASE(tlrt_tape_silu(t, z, &sz), z);
    TRY(tlrt_tape_mul(t, y, sz, &tmp));
    TRY(tlrt_tape_release(t, y));
    TRY(tlrt_tape_release(t, sz));
    THEN_RELEASE(tlrt_tape_linear(t, tmp, q[8], TLRT_TAPE_NONE, &o), tmp);
    TRY(tlrt_tape_add(t, x, o, &tmp));
    TRY(tlrt_tape_release(t, x));
    TRY(tlrt_tape_release(t, o));
    x = tmp;
  }
#undef THEN_RELEASE
  TRY(tlrt_tape_release(t, h0));
  TRY(tlrt_tape_rms_norm(t, x, P[m->np - 1], 1e-5, &h));
  TRY(tlrt_tape_release(t, x));
  TRY(tlrt_tape_matmul(t, h, P[0], false, true, logits)); /* the tied LM head: h wte^T */
  TRY(tlrt_tape_release(t, h));
done:
  tlrt_buffer_free(zeros);
  return st;
}

/* ---- sampling: lm.py's sample without a decoder --------------------------------------------- */

typedef struct {
  Model *m;
  tlrt_tape *t;
  int32_t *window; /* ctx int32 tokens */
} Sampler;

static tlrt_status sampler_new(Model *m, tlrt_tape *t, void **state) {
  Sampler *s = (Sampler *)calloc(1, sizeof *s);
  *state = s;
  if (s) s->window = (int32_t *)malloc(m->cfg.ctx * sizeof *s->window);
  if (!s || !s->window) {
    fprintf(stderr, PROG ": out of host memory\n");
    return TLRT_ERR_OUT_OF_MEMORY;
  }
  s->m = m;
  s->t = t;
  return TLRT_OK;
}

/* z = the last row of the logits of one forward (batch 1) over the last ctx bytes of out. */
static tlrt_status sampler_next(void *state, const unsigned char *out, uint64_t n, float *z) {
  tlrt_status st = TLRT_OK;
  Sampler *s = (Sampler *)state;
  tlrt_tape *t = s->t;
  const uint64_t len = n < s->m->cfg.ctx ? n : s->m->cfg.ctx, V = s->m->cfg.vocab;
  uint64_t i, logits;
  tlrt_buffer *tokens = NULL, *value = NULL, *last = NULL;
  for (i = 0; i < len; ++i) s->window[i] = out[n - len + i];
  TRY(tlrt_buffer_from_i32(s->m->dev, s->window, len, &tokens));
  TRY(forward(s->m, t, tokens, 1, len, 0, 0.0, 0, &logits));
  TRY(tlrt_tape_value(t, logits, &value));
  TRY(tlrt_slice_axis0(value, len, V, len - 1, 1, &last));
  TRY(tlrt_buffer_to_f32(last, z, V));
  TRY(tlrt_tape_reset(t));
done:
  if (st != TLRT_OK) tlrt_tape_reset(t);
  tlrt_buffer_free(tokens);
  tlrt_buffer_free(value);
  tlrt_buffer_free(last);
  return st;
}

static void sampler_free(void *state) {
  Sampler *s = (Sampler *)state;
  if (s) free(s->window);
  free(s);
}

/* ---- main ---------------------------------------------------------------------------------- */

/* mamba.py's parameter line: the configuration's keys but steps, lr and warmup (no vocab). */
static void describe(const Config *c, char *buf, size_t n) {
  snprintf(buf, n, "d %llu, layers %llu, di %llu, state %llu, ctx %llu, batch %llu",
           (unsigned long long)c->d, (unsigned long long)c->layers, (unsigned long long)c->di,
           (unsigned long long)c->state, (unsigned long long)c->ctx, (unsigned long long)c->batch);
}

static int check(const Config *c, char *msg, size_t n) {
  if (c->di != 0 && c->state != 0) return 0;
  snprintf(msg, n, "di %llu and state %llu must be positive", (unsigned long long)c->di,
           (unsigned long long)c->state);
  return 1;
}

static const char *const SHAPE_KEYS[] = {"di", "state", NULL};

/* mamba.py's CONFIGS, plus the tiny one of memory checkers (every code path, a few steps). */
static const LmSpec MAMBA = {
    {.d = 64, .layers = 2, .di = 128, .state = 8, .ctx = 64, .batch = 8, .steps = 150,
     .warmup = 15, .vocab = 256, .lr = 3e-3},
    {.d = 256, .layers = 4, .di = 512, .state = 16, .ctx = 256, .batch = 16, .steps = 3000,
     .warmup = 200, .vocab = 256, .lr = 1e-3},
    {.d = 16, .layers = 1, .di = 32, .state = 4, .ctx = 16, .batch = 2, .steps = 4, .warmup = 2,
     .vocab = 256, .lr = 3e-3},
    SHAPE_KEYS, describe, check, model_init, forward, sampler_new, sampler_next, sampler_free};

int main(int argc, char **argv) { return lm_main(argc, argv, &MAMBA); }
