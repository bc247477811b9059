/* examples/lm/gpt.c: the GPT-2-style language model of gpt.py in plain C over the public headers
 * (C99), trained through the tape on the Python 3.11 documentation's text, with checkpoints.
 *
 *   build/examples/gpt --quick                        # CPU, 5-10 s on 2 cores: what CI runs
 *   build/examples/gpt --cuda                         # the small configuration on the first GPU
 *   build/examples/gpt --quick --save gpt.safetensors --save-every 50
 *   build/examples/gpt --resume gpt.safetensors       # continues where the checkpoint stopped
 *
 * The model and the training are gpt.py's and examples/lm/lm.py's, call for call: byte-level tokens
 * (vocabulary 256), learned token and position embeddings (tlrt_tape_gather_rows_ibuf of int32
 * index buffers), L pre-LayerNorm blocks of causal multi-head attention (one fused q / k / v
 * projection: the three weights concatenated on the tape, one (3 d, d) product, read in place by
 * tlrt_tape_attention_qkv) and a tanh-GELU MLP (tlrt_tape_linear_gelu) with residual connections
 * and dropout (tlrt_tape_dropout), a final LayerNorm and an LM head tied to the token embedding;
 * the loss tlrt_tape_cross_entropy_ibuf of int32 labels; AdamW (the fused tlrt_adam_step_multi,
 * betas 0.9 / 0.95, weight decay on matrices only), a cosine schedule with linear warm-up,
 * clipping by global norm. The same parameter names and shapes, the same random keys
 * (initialisation, dropout, batch windows, sampling), so gpt.c and gpt.py print the same losses
 * on the CPU.
 *
 * Text: --data FILE_OR_FOLDER (default /usr/share/doc/python3.11/html/_sources, Debian's
 * python3.11-doc): a file (its last twentieth for validation) or every *.txt under a folder,
 * sorted by path, every 20th file for validation. Batches are random windows of ctx + 1 bytes
 * whose starts derive from (seed, step) only, dropout keys from (seed, step), so a run can stop
 * and resume anywhere and continue bit for bit.
 *
 * Output: a line every --log-every steps (step, mean loss, learning rate, tokens/s, ms/step), the
 * validation loss (8 fixed batches of the validation text) before and after, and a sample after
 * --prompt (--temperature, 0: greedy) decoded with a KV cache (gpt.py's decoder: one token a step,
 * tlrt_attention_fwd with len_q = 1 over each layer's cached q / k / v rows). --min-improvement X
 * exits 1 unless the validation loss fell by at least X nats; --test exits 77 (skipped) without the
 * text, and under valgrind (TLRT_UNDER_VALGRIND) or in a sanitizer build (LM_TEST_TINY) trains a
 * tiny configuration a few steps without the target.
 *
 * Checkpoints (safetensors, abi/tlrt_checkpoint.h): --save PATH writes every --save-every steps
 * and after the last step: the parameters under their names and shapes ("wte", "h0.attn.wq",
 * ...), Adam's moments as "opt.m.NAME" and "opt.v.NAME", the number of steps taken as the I64
 * scalar "opt.step", and the configuration as metadata (model, d, layers, heads, ctx, batch,
 * vocab, steps, lr, warmup, seed, dropout, weight_decay, clip, and val_init, the validation loss
 * at initialisation). --resume PATH loads all of it (the configuration from the file; --steps
 * may lengthen the schedule) and trains on from the step it holds. --stop-after K ends the run
 * after step K as if it were interrupted (the checkpoint written), so that
 *   gpt --steps 40 --save a                       and
 *   gpt --steps 40 --stop-after 20 --save b;  gpt --resume b --save b
 * end with the same losses and byte-identical checkpoints (the meson test gpt_c_resume checks it,
 * and that Hugging Face's safetensors package reads the file). gpt.py and mamba.py (lm.py) have
 * the same options and file layout.
 *
 * Every library call is checked: a failure prints the call, the status and tlrt_last_error(),
 * frees everything and exits 1. The text, batches, training step, checkpoints, options and
 * progress lines are examples/lm/lm_common.h's (shared with mamba.c); this file is the model. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, opendir, strdup under -std=c99 */

#define PROG "gpt"
#include "lm_common.h"

/* ---- the model ------------------------------------------------------------------------------ */

/* Parameters in gpt.py's order (the order of the leaves, gradients, clipping and AdamW). */
static tlrt_status model_init(Model *m) {
  tlrt_status st = TLRT_OK;
  const Config *cfg = &m->cfg;
  const uint64_t d = cfg->d, L = cfg->layers, V = cfg->vocab, T = cfg->ctx;
  const double proj_std = 0.02 / sqrt((double)(2 * L)); /* GPT-2's residual projections */
  const char *qkv = "qkv";
  uint64_t i, j;
  char name[NAME_MAX_LEN];
  TRY(model_alloc(m, 4 + 16 * L));
  TRY(normal(m, "wte", V, d, 0.02));
  TRY(normal(m, "wpe", T, d, 0.01));
  for (i = 0; i < L; ++i) {
#define NAME(s) (snprintf(name, sizeof name, "h%llu.%s", (unsigned long long)i, s), name)
    TRY(constant(m, NAME("ln1.g"), d, 1.0));
    TRY(constant(m, NAME("ln1.b"), d, 0.0));
    for (j = 0; j < 3; ++j) {
      char w[8] = "attn.w?", b[8] = "attn.b?";
      w[6] = b[6] = qkv[j];
      TRY(normal(m, NAME(w), d, d, 0.02));
      TRY(constant(m, NAME(b), d, 0.0));
    }
    TRY(normal(m, NAME("attn.wo"), d, d, proj_std));
    TRY(constant(m, NAME("attn.bo"), d, 0.0));
    TRY(constant(m, NAME("ln2.g"), d, 1.0));
    TRY(constant(m, NAME("ln2.b"), d, 0.0));
    TRY(normal(m, NAME("mlp.wfc"), 4 * d, d, 0.02));
    TRY(constant(m, NAME("mlp.bfc"), 4 * d, 0.0));
    TRY(normal(m, NAME("mlp.wproj"), d, 4 * d, proj_std));
    TRY(constant(m, NAME("mlp.bproj"), d, 0.0));
#undef NAME
  }
  TRY(constant(m, "lnf.g", d, 1.0));
  TRY(constant(m, "lnf.b", d, 0.0));
  TRY(model_zero_moments(m));
done:
  return st;
}

/* gpt.py's forward: records every parameter as a leaf (with gradients when train), then the
 * network on tokens (batch * n int32 bytes, n = ctx: every position); *logits = the
 * node of the (batch * n, vocab) logits. Dropout nodes take keys
 * key + rows * d * 8, + 2 rows * d * 8, ... (disjoint ranges), as gpt.py's drop().
 * Each node is released (tlrt_tape_release) right after its last use, as Python releases gpt.py's
 * nodes when their names are rebound: the tape then holds only what the backward rules read
 * (abi/tlrt_tape.h, MEMORY). The parameter leaves stay (their gradients are read after the
 * backward; their buffers are the model's anyway). */
static tlrt_status forward(Model *m, tlrt_tape *t, const tlrt_buffer *tokens, uint64_t batch,
                           uint64_t n, int train, double dropout, uint64_t key,
                           uint64_t *logits) {
  tlrt_status st = TLRT_OK;
  const uint64_t d = m->cfg.d, rows = batch * n;
  const uint64_t d3[3] = {batch, n, d}, d2[2] = {rows, d}, d3x3[3] = {batch, n, 3 * d};
  const uint32_t pos_map[3] = {0, 1, 2}; /* wpe (n, d) -> (batch, n, d) */
  const int drop = train && dropout != 0.0;
  uint64_t i, *P = m->ids, x, e1, e2, h, a, f, g, y;
  for (i = 0; i < m->np; ++i)
    TRY(tlrt_tape_leaf(t, m->p[i].w, m->p[i].dims, m->p[i].rank, train != 0, &P[i]));
  /* node = op(node, ...): the new node replaces the old, which is released. */
#define STEP(node, call)                  \
  do {                                    \
    const uint64_t old_ = node;           \
    TRY(call);                            \
    TRY(tlrt_tape_release(t, old_));      \
  } while (0)
#define DROP(node)                                                 \
  do {                                                             \
    if (drop) {                                                    \
      key += rows * d * 8;                                         \
      STEP(node, tlrt_tape_dropout(t, node, dropout, key, &node)); \
    }                                                              \
  } while (0)
  TRY(tlrt_tape_gather_rows_ibuf(t, P[0], tokens, &e1));
  /* The position embedding broadcast over the batch: its gradient is the sum over the batch (a
   * column reduction), not a scatter-add of batch * n rows. */
  TRY(tlrt_tape_broadcast_to(t, P[1], d3, 3, pos_map, &e2));
  STEP(e2, tlrt_tape_reshape(t, e2, d2, 2, &e2));
  TRY(tlrt_tape_add(t, e1, e2, &x));
  TRY(tlrt_tape_release(t, e1));
  TRY(tlrt_tape_release(t, e2));
  DROP(x);
  STEP(x, tlrt_tape_reshape(t, x, d3, 3, &x));
  for (i = 0; i < m->cfg.layers; ++i) {
    const uint64_t *q = P + 2 + 16 * i; /* ln1.g ln1.b wq bq wk bk wv bv wo bo ln2.g ln2.b
                                           wfc bfc wproj bproj */
    uint64_t wqkv, bqkv;
    TRY(tlrt_tape_layer_norm(t, x, q[0], q[1], 1e-5, &h));
    STEP(h, tlrt_tape_reshape(t, h, d2, 2, &h));
    /* One (3 d, d) projection, read in place by the attention node (heads_kv = heads). */
    TRY(tlrt_tape_concat_axis0(t, q[2], q[4], &wqkv));
    STEP(wqkv, tlrt_tape_concat_axis0(t, wqkv, q[6], &wqkv));
    TRY(tlrt_tape_concat1d(t, q[3], q[5], &bqkv));
    STEP(bqkv, tlrt_tape_concat1d(t, bqkv, q[7], &bqkv));
    TRY(tlrt_tape_linear(t, h, wqkv, bqkv, &a));
    TRY(tlrt_tape_release(t, h));
    TRY(tlrt_tape_release(t, wqkv));
    TRY(tlrt_tape_release(t, bqkv));
    STEP(a, tlrt_tape_reshape(t, a, d3x3, 3, &a));
    STEP(a, tlrt_tape_attention_qkv(t, a, m->cfg.heads, m->cfg.heads, true,
                                    1.0 / sqrt((double)(d / m->cfg.heads)), &a));
    STEP(a, tlrt_tape_reshape(t, a, d2, 2, &a));
    STEP(a, tlrt_tape_linear(t, a, q[8], q[9], &a));
    STEP(a, tlrt_tape_reshape(t, a, d3, 3, &a));
    DROP(a);
    TRY(tlrt_tape_add(t, x, a, &y));
    TRY(tlrt_tape_release(t, x));
    TRY(tlrt_tape_release(t, a));
    x = y;
    TRY(tlrt_tape_layer_norm(t, x, q[10], q[11], 1e-5, &h));
    STEP(h, tlrt_tape_reshape(t, h, d2, 2, &h));
    TRY(tlrt_tape_linear_gelu(t, h, q[12], q[13], &g));
    TRY(tlrt_tape_release(t, h));
    TRY(tlrt_tape_linear(t, g, q[14], q[15], &f));
    TRY(tlrt_tape_release(t, g));
    DROP(f);
    STEP(f, tlrt_tape_reshape(t, f, d3, 3, &f));
    TRY(tlrt_tape_add(t, x, f, &y));
    TRY(tlrt_tape_release(t, x));
    TRY(tlrt_tape_release(t, f));
    x = y;
  }
#undef DROP
#undef STEP
  TRY(tlrt_tape_layer_norm(t, x, P[m->np - 2], P[m->np - 1], 1e-5, &h));
  TRY(tlrt_tape_release(t, x));
  TRY(tlrt_tape_reshape(t, h, d2, 2, &x));
  TRY(tlrt_tape_release(t, h));
  TRY(tlrt_tape_matmul(t, x, P[0], false, true, logits)); /* the tied LM head: x wte^T */
  TRY(tlrt_tape_release(t, x));
done:
  return st;
}

/* gpt.py's GPT.decoder: the next byte's logits one token a step with a KV cache. Each layer keeps
 * the fused q / k / v rows of the tokens seen ((len, 3 d), grown by tlrt_concat_axis0) and
 * attends from the new token's row (len_q = 1: causal aligned bottom-right sees every cached key)
 * through views of both buffers. The cache's position 0 is byte `start` of the text; when it
 * holds ctx tokens it is rebuilt from the last ctx / 2 (positions are absolute). */
typedef struct {
  Model *m;
  tlrt_buffer **wqkv, **bqkv, **cache; /* per layer */
  uint64_t len, start, fed;
} Decoder;

static void decoder_clear(Decoder *k) {
  uint64_t i;
  for (i = 0; k->cache && i < k->m->cfg.layers; ++i) {
    tlrt_buffer_free(k->cache[i]);
    k->cache[i] = NULL;
  }
  k->len = 0;
}

static void decoder_free(Decoder *k) {
  uint64_t i;
  decoder_clear(k);
  for (i = 0; k->wqkv && i < k->m->cfg.layers; ++i) {
    tlrt_buffer_free(k->wqkv[i]);
    tlrt_buffer_free(k->bqkv[i]);
  }
  free(k->wqkv);
  free(k->bqkv);
  free(k->cache);
}

/* The fused (3 d, d) weights and (3 d) biases of every layer, an empty cache. */
static tlrt_status decoder_init(Decoder *k, Model *m) {
  tlrt_status st = TLRT_OK;
  const uint64_t d = m->cfg.d, L = m->cfg.layers;
  uint64_t i;
  tlrt_buffer *tmp = NULL;
  memset(k, 0, sizeof *k);
  k->m = m;
  k->wqkv = (tlrt_buffer **)calloc(L, sizeof *k->wqkv);
  k->bqkv = (tlrt_buffer **)calloc(L, sizeof *k->bqkv);
  k->cache = (tlrt_buffer **)calloc(L, sizeof *k->cache);
  if (!k->wqkv || !k->bqkv || !k->cache) FAIL("out of host memory");
  for (i = 0; i < L; ++i) {
    const Param *p = m->p + 2 + 16 * i; /* ln1.g ln1.b wq bq wk bk wv bv wo bo ... */
    TRY(tlrt_concat_axis0(p[2].w, p[4].w, d, d, d, &tmp));
    TRY(tlrt_concat_axis0(tmp, p[6].w, 2 * d, d, d, &k->wqkv[i]));
    tlrt_buffer_free(tmp);
    tmp = NULL;
    TRY(tlrt_concat1d(p[3].w, p[5].w, d, d, &tmp));
    TRY(tlrt_concat1d(tmp, p[7].w, 2 * d, d, &k->bqkv[i]));
    tlrt_buffer_free(tmp);
    tmp = NULL;
  }
done:
  tlrt_buffer_free(tmp);
  return st;
}

/* y = layer_norm(x) over one row of d (the statistics dropped). */
static tlrt_status norm_row(const tlrt_buffer *x, const Param *g, const Param *b, uint64_t d,
                            tlrt_buffer **y) {
  tlrt_buffer *mean = NULL, *inv = NULL;
  const tlrt_status st = tlrt_layer_norm_fwd(x, g->w, b->w, 1, d, 1e-5, y, &mean, &inv);
  tlrt_buffer_free(mean);
  tlrt_buffer_free(inv);
  return st;
}

/* *x = *x + y (y freed). */
static tlrt_status add_into(tlrt_buffer **x, tlrt_buffer *y) {
  tlrt_buffer *s = NULL;
  const tlrt_status st = tlrt_add(*x, y, &s);
  tlrt_buffer_free(y);
  if (st == TLRT_OK) {
    tlrt_buffer_free(*x);
    *x = s;
  }
  return st;
}

/* One token at position pos through every layer (its q / k / v rows appended to the caches);
 * z != NULL: z[0 .. V) = its next-byte logits. */
static tlrt_status decoder_step(Decoder *k, int32_t token, int32_t pos, float *z) {
  tlrt_status st = TLRT_OK;
  Model *m = k->m;
  const uint64_t d = m->cfg.d, H = m->cfg.heads, dh = d / H, V = m->cfg.vocab, n = k->len + 1;
  uint64_t i;
  tlrt_buffer *tb = NULL, *ab = NULL, *e1 = NULL, *e2 = NULL, *x = NULL, *h = NULL, *qkv = NULL,
              *c = NULL, *o = NULL, *lse = NULL, *y = NULL, *g = NULL, *lg = NULL;
  TRY(tlrt_buffer_from_i32(m->dev, &token, 1, &tb));
  TRY(tlrt_buffer_from_i32(m->dev, &pos, 1, &ab));
  TRY(tlrt_gather_rows_ibuf(m->p[0].w, V, d, tb, &e1));
  TRY(tlrt_gather_rows_ibuf(m->p[1].w, m->cfg.ctx, d, ab, &e2));
  TRY(tlrt_add(e1, e2, &x));
  for (i = 0; i < m->cfg.layers; ++i) {
    const Param *p = m->p + 2 + 16 * i; /* ln1.g ln1.b wq bq wk bk wv bv wo bo ln2.g ln2.b
                                           wfc bfc wproj bproj */
    tlrt_attention_geometry ge;
    memset(&ge, 0, sizeof ge);
    ge.struct_size = sizeof ge;
    ge.batch = 1, ge.heads_q = H, ge.heads_kv = H, ge.len_q = 1, ge.len_k = n, ge.d = dh;
    ge.q_offset = 0, ge.k_offset = d, ge.v_offset = 2 * d;
    ge.q_stride_batch = 3 * d, ge.k_stride_batch = ge.v_stride_batch = n * 3 * d;
    ge.q_stride_token = ge.k_stride_token = ge.v_stride_token = 3 * d;
    ge.q_stride_head = ge.k_stride_head = ge.v_stride_head = dh;
    TRY(norm_row(x, &p[0], &p[1], d, &h));
    TRY(tlrt_linear_fwd(h, k->wqkv[i], k->bqkv[i], 1, d, 3 * d, TLRT_ACT_NONE, &qkv, NULL));
    tlrt_buffer_free(h);
    h = NULL;
    if (k->cache[i] == NULL) {
      TRY(tlrt_buffer_retain(qkv));
      k->cache[i] = qkv;
    } else {
      TRY(tlrt_concat_axis0(k->cache[i], qkv, n - 1, 1, 3 * d, &c));
      tlrt_buffer_free(k->cache[i]);
      k->cache[i] = c;
      c = NULL;
    }
    TRY(tlrt_attention_fwd(qkv, k->cache[i], k->cache[i], NULL, &ge, 1.0 / sqrt((double)dh),
                           true, -INFINITY, &o, &lse));
    tlrt_buffer_free(qkv);
    tlrt_buffer_free(lse);
    qkv = lse = NULL;
    TRY(tlrt_linear_fwd(o, p[8].w, p[9].w, 1, d, d, TLRT_ACT_NONE, &y, NULL));
    tlrt_buffer_free(o);
    o = NULL;
    TRY(add_into(&x, y));
    y = NULL;
    TRY(norm_row(x, &p[10], &p[11], d, &h));
    TRY(tlrt_linear_fwd(h, p[12].w, p[13].w, 1, d, 4 * d, TLRT_ACT_GELU, &g, NULL));
    TRY(tlrt_linear_fwd(g, p[14].w, p[15].w, 1, 4 * d, d, TLRT_ACT_NONE, &y, NULL));
    tlrt_buffer_free(h);
    tlrt_buffer_free(g);
    h = g = NULL;
    TRY(add_into(&x, y));
    y = NULL;
  }
  k->len = n;
  if (z) {
    TRY(norm_row(x, &m->p[m->np - 2], &m->p[m->np - 1], d, &h));
    TRY(tlrt_matmul(h, m->p[0].w, 1, d, V, false, true, &lg)); /* the tied LM head */
    TRY(tlrt_buffer_to_f32(lg, z, V));
  }
done:
  tlrt_buffer_free(tb);
  tlrt_buffer_free(ab);
  tlrt_buffer_free(e1);
  tlrt_buffer_free(e2);
  tlrt_buffer_free(x);
  tlrt_buffer_free(h);
  tlrt_buffer_free(qkv);
  tlrt_buffer_free(c);
  tlrt_buffer_free(o);
  tlrt_buffer_free(lse);
  tlrt_buffer_free(y);
  tlrt_buffer_free(g);
  tlrt_buffer_free(lg);
  return st;
}

/* z = the logits of the byte after out[0 .. n): the bytes not yet in the cache go through it
 * (a prompt longer than ctx: its last ctx bytes; a full cache: rebuilt from the last ctx / 2). */
static tlrt_status decoder_next(Decoder *k, const unsigned char *out, uint64_t n, float *z) {
  tlrt_status st = TLRT_OK;
  const uint64_t T = k->m->cfg.ctx;
  if (k->fed == 0 && n > T) k->start = k->fed = n - T;
  while (k->fed < n) {
    const uint64_t i = k->fed;
    uint64_t j;
    if (i - k->start == T) {
      decoder_clear(k);
      k->start = i - T / 2;
      for (j = k->start; j < i; ++j)
        TRY(decoder_step(k, out[j], (int32_t)(j - k->start), NULL));
    }
    TRY(decoder_step(k, out[i], (int32_t)(i - k->start), i == n - 1 ? z : NULL));
    k->fed = i + 1;
  }
done:
  return st;
}

/* The sampler of lm_common.h's sample(): gpt.py's decoder (the tape is not used). */
static tlrt_status sampler_new(Model *m, tlrt_tape *t, void **state) {
  Decoder *k = (Decoder *)calloc(1, sizeof *k);
  (void)t;
  *state = k;
  if (!k) {
    fprintf(stderr, PROG ": out of host memory\n");
    return TLRT_ERR_OUT_OF_MEMORY;
  }
  return decoder_init(k, m);
}

static tlrt_status sampler_next(void *state, const unsigned char *out, uint64_t n, float *z) {
  return decoder_next((Decoder *)state, out, n, z);
}

static void sampler_free(void *state) {
  if (state) decoder_free((Decoder *)state);
  free(state);
}

/* ---- main ---------------------------------------------------------------------------------- */

static void describe(const Config *c, char *buf, size_t n) {
  snprintf(buf, n, "d %llu, layers %llu, heads %llu, ctx %llu, batch %llu, vocab %llu",
           (unsigned long long)c->d, (unsigned long long)c->layers, (unsigned long long)c->heads,
           (unsigned long long)c->ctx, (unsigned long long)c->batch, (unsigned long long)c->vocab);
}

static int check(const Config *c, char *msg, size_t n) {
  if (c->d % c->heads == 0) return 0;
  snprintf(msg, n, "d %llu is not a multiple of heads %llu", (unsigned long long)c->d,
           (unsigned long long)c->heads);
  return 1;
}

static const char *const SHAPE_KEYS[] = {"heads", NULL};

/* gpt.py's CONFIGS, plus the tiny one of memory checkers (every code path, a few steps). */
static const LmSpec GPT = {
    {.d = 64, .layers = 2, .heads = 4, .ctx = 64, .batch = 8, .steps = 150, .warmup = 15,
     .vocab = 256, .lr = 3e-3},
    {.d = 384, .layers = 6, .heads = 6, .ctx = 256, .batch = 16, .steps = 3000, .warmup = 200,
     .vocab = 256, .lr = 6e-4},
    {.d = 16, .layers = 1, .heads = 2, .ctx = 16, .batch = 2, .steps = 4, .warmup = 2,
     .vocab = 256, .lr = 3e-3},
    SHAPE_KEYS, describe, check, model_init, forward, sampler_new, sampler_next, sampler_free};

int main(int argc, char **argv) { return lm_main(argc, argv, &GPT); }
