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
 * clipping by global norm. The same parameter names and shapes, the same random keys (initialisation, dropout, batch
 * windows, sampling), so gpt.c and gpt.py print the same losses on the CPU.
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
 * frees everything and exits 1. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, opendir, strdup under -std=c99 */

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "torchlean_rt.h"

#define PROG "gpt"
#define DOC_SOURCES "/usr/share/doc/python3.11/html/_sources"
#define CKPT_FORMAT "torchlean_rt examples/lm checkpoint 1"

/* On failure: print the call, the status and the library's message, leave through `done`. */
#define TRY(call)                                                                         \
  do {                                                                                    \
    st = (call);                                                                          \
    if (st != TLRT_OK) {                                                                  \
      fflush(stdout);                                                                     \
      fprintf(stderr, PROG ": %s\n  failed with %s: %s\n", #call, tlrt_status_string(st), \
              tlrt_last_error());                                                         \
      goto done;                                                                          \
    }                                                                                     \
  } while (0)
/* A failure of this program's own (out of memory, a bad file): a message, then `done`. */
#define FAIL(...)                                \
  do {                                           \
    fflush(stdout);                              \
    fprintf(stderr, PROG ": " __VA_ARGS__);      \
    fputc('\n', stderr);                         \
    st = TLRT_ERR_INVALID_ARGUMENT;              \
    goto done;                                   \
  } while (0)

/* ---- configuration ------------------------------------------------------------------------ */

typedef struct {
  uint64_t d, layers, heads, ctx, batch, steps, warmup, vocab;
  double lr;
} Config;

/* gpt.py's CONFIGS, plus the tiny one of memory checkers (every code path, a few steps). */
static const Config QUICK = {64, 2, 4, 64, 8, 150, 15, 256, 3e-3};
static const Config SMALL = {384, 6, 6, 256, 16, 3000, 200, 256, 6e-4};
static const Config TINY = {16, 1, 2, 16, 2, 4, 2, 256, 3e-3};

typedef struct {
  uint64_t seed, stop_after, save_every;
  double dropout, weight_decay, clip, temperature;
  uint64_t log_every, sample_length, eval_batches;
} Run;

/* ---- random keys: SplitMix64, as lm.py's mix() ---------------------------------------------- */

static uint64_t mix(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
/* The streams of lm.py: training windows (from the seed), validation windows (fixed), sampling. */
static uint64_t train_stream(uint64_t seed) { return mix(seed); }
static uint64_t eval_stream(void) { return mix(0x6576616cull); /* "eval" */ }
static uint64_t sample_stream(uint64_t seed) { return mix(seed + 0x73616d70ull); /* "samp" */ }

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- text ------------------------------------------------------------------------------------ */

typedef struct {
  unsigned char *p;
  uint64_t n, cap;
} Bytes;

static int bytes_append(Bytes *b, const unsigned char *src, uint64_t n) {
  if (b->n + n > b->cap) {
    uint64_t cap = b->cap ? b->cap : 1 << 20;
    unsigned char *q;
    while (cap < b->n + n) cap *= 2;
    q = (unsigned char *)realloc(b->p, cap);
    if (!q) return 1;
    b->p = q;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, src, n);
  b->n += n;
  return 0;
}

static int read_file(const char *path, Bytes *out) {
  unsigned char chunk[1 << 16];
  size_t got;
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, PROG ": cannot open %s: %s\n", path, strerror(errno));
    return 1;
  }
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
    if (bytes_append(out, chunk, got) != 0) {
      fclose(f);
      fprintf(stderr, PROG ": out of host memory reading %s\n", path);
      return 1;
    }
  if (ferror(f)) {
    fprintf(stderr, PROG ": cannot read %s\n", path);
    fclose(f);
    return 1;
  }
  fclose(f);
  return 0;
}

typedef struct {
  char **v;
  size_t n, cap;
} Paths;

static void paths_free(Paths *p) {
  size_t i;
  for (i = 0; i < p->n; ++i) free(p->v[i]);
  free(p->v);
  memset(p, 0, sizeof *p);
}

/* Every *.txt under dir (recursively, names starting with '.' skipped, as Python's glob). */
static int collect_txt(const char *dir, Paths *out) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int rc = 0;
  if (!d) return 0; /* an unreadable folder is skipped, as glob skips it */
  while (rc == 0 && (e = readdir(d)) != NULL) {
    const size_t nl = strlen(e->d_name), dl = strlen(dir);
    struct stat sb;
    char *full;
    if (e->d_name[0] == '.') continue;
    full = (char *)malloc(dl + nl + 2);
    if (!full) {
      rc = 1;
      break;
    }
    memcpy(full, dir, dl);
    full[dl] = '/';
    memcpy(full + dl + 1, e->d_name, nl + 1);
    if (stat(full, &sb) != 0) {
      free(full);
      continue;
    }
    if (S_ISDIR(sb.st_mode)) {
      rc = collect_txt(full, out);
      free(full);
    } else if (S_ISREG(sb.st_mode) && nl > 4 && strcmp(e->d_name + nl - 4, ".txt") == 0) {
      if (out->n == out->cap) {
        const size_t cap = out->cap ? 2 * out->cap : 256;
        char **v = (char **)realloc(out->v, cap * sizeof *v);
        if (!v) {
          free(full);
          rc = 1;
          break;
        }
        out->v = v;
        out->cap = cap;
      }
      out->v[out->n++] = full;
    } else {
      free(full);
    }
  }
  closedir(d);
  if (rc) fprintf(stderr, PROG ": out of host memory listing %s\n", dir);
  return rc;
}

static int cmp_paths(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* lm.py's load_text: (train, validation) bytes of a file (the last twentieth validates) or of the
 * *.txt files under a folder, sorted, every 20th to validation, joined with '\n'. */
static int load_text(const char *path, Bytes *train, Bytes *val) {
  struct stat sb;
  Paths files = {0};
  size_t i;
  int rc = 1;
  uint64_t ntrain = 0, nval = 0;
  if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
    Bytes all = {0};
    uint64_t cut;
    if (read_file(path, &all) != 0) return 1;
    cut = all.n * 19 / 20;
    rc = bytes_append(train, all.p, cut) || bytes_append(val, all.p + cut, all.n - cut);
    if (rc) fprintf(stderr, PROG ": out of host memory\n");
    free(all.p);
    return rc;
  }
  if (collect_txt(path, &files) != 0) goto out;
  if (files.n == 0) {
    fprintf(stderr,
            PROG ": no text under %s (Debian: apt-get install python3.11-doc, or give --data "
                 "FILE_OR_FOLDER)\n",
            path);
    goto out;
  }
  qsort(files.v, files.n, sizeof *files.v, cmp_paths);
  for (i = 0; i < files.n; ++i) {
    Bytes *dst = i % 20 == 19 ? val : train;
    uint64_t *count = i % 20 == 19 ? &nval : &ntrain;
    if (*count > 0 && bytes_append(dst, (const unsigned char *)"\n", 1) != 0) {
      fprintf(stderr, PROG ": out of host memory\n");
      goto out;
    }
    if (read_file(files.v[i], dst) != 0) goto out;
    ++*count;
  }
  rc = 0;
out:
  paths_free(&files);
  return rc;
}

/* ---- the model ------------------------------------------------------------------------------ */

enum { NAME_MAX_LEN = 48 };

typedef struct {
  char name[NAME_MAX_LEN];
  uint64_t dims[2], size;
  uint32_t rank;
  int decay;                  /* AdamW's weight decay: matrices only */
  tlrt_buffer *w, *m, *v;     /* the parameter and its Adam moments (zeros at first) */
} Param;

typedef struct {
  Config cfg;
  tlrt_device dev;
  Param *p;
  uint64_t np;
  uint64_t key;               /* gpt.py's self._key: the keys of the normal initialisations */
  uint64_t *ids;              /* leaf ids of the current recording */
  tlrt_buffer *pos;           /* positions 0..ctx-1 repeated batch times (int32) */
} Model;

static void model_free(Model *m) {
  uint64_t i;
  for (i = 0; i < m->np; ++i) {
    tlrt_buffer_free(m->p[i].w);
    tlrt_buffer_free(m->p[i].m);
    tlrt_buffer_free(m->p[i].v);
  }
  free(m->p);
  free(m->ids);
  tlrt_buffer_free(m->pos);
  memset(m, 0, sizeof *m);
}

static Param *new_param(Model *m, const char *name, uint64_t d0, uint64_t d1, int decay) {
  Param *p = &m->p[m->np++];
  snprintf(p->name, sizeof p->name, "%s", name);
  p->dims[0] = d0;
  p->dims[1] = d1;
  p->rank = d1 ? 2 : 1;
  p->size = d1 ? d0 * d1 : d0;
  p->decay = decay;
  return p;
}

/* gpt.py's normal(): N(0, std^2) from tlrt_rand_normal, keys 2^32 apart; decayed. */
static tlrt_status normal(Model *m, const char *name, uint64_t d0, uint64_t d1, double std) {
  Param *p = new_param(m, name, d0, d1, 1);
  m->key += (uint64_t)1 << 32;
  return tlrt_rand_normal(m->dev, p->size, 0.0, std, m->key, &p->w);
}

/* gpt.py's const(): filled with value, not decayed (norm scales, biases). */
static tlrt_status constant(Model *m, const char *name, uint64_t d0, double value) {
  Param *p = new_param(m, name, d0, 0, 0);
  return tlrt_buffer_full(m->dev, p->size, value, &p->w);
}

/* Parameters in gpt.py's order (the order of the leaves, gradients, clipping and AdamW). */
static tlrt_status model_init(Model *m, const Config *cfg, tlrt_device dev, uint64_t seed) {
  tlrt_status st = TLRT_OK;
  const uint64_t d = cfg->d, L = cfg->layers, V = cfg->vocab, T = cfg->ctx;
  const double proj_std = 0.02 / sqrt((double)(2 * L)); /* GPT-2's residual projections */
  const char *qkv = "qkv";
  uint64_t i, j;
  int32_t *pos = NULL;
  char name[NAME_MAX_LEN];
  memset(m, 0, sizeof *m);
  m->cfg = *cfg;
  m->dev = dev;
  m->key = seed * 1000003u;
  m->p = (Param *)calloc(4 + 16 * L, sizeof *m->p);
  m->ids = (uint64_t *)calloc(4 + 16 * L, sizeof *m->ids);
  pos = (int32_t *)malloc(cfg->batch * T * sizeof *pos);
  if (!m->p || !m->ids || !pos) FAIL("out of host memory");
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
  for (i = 0; i < m->np; ++i) {
    TRY(tlrt_buffer_zeros(dev, m->p[i].size, &m->p[i].m));
    TRY(tlrt_buffer_zeros(dev, m->p[i].size, &m->p[i].v));
  }
  for (i = 0; i < cfg->batch * T; ++i) pos[i] = (int32_t)(i % T);
  TRY(tlrt_buffer_from_i32(dev, pos, cfg->batch * T, &m->pos));
done:
  free(pos);
  return st;
}

static uint64_t model_count(const Model *m) {
  uint64_t i, n = 0;
  for (i = 0; i < m->np; ++i) n += m->p[i].size;
  return n;
}

/* gpt.py's forward: records every parameter as a leaf (with gradients when train), then the
 * network on tokens (batch * n int32 bytes); *logits = the node of the (batch * n, vocab)
 * logits. positions: the int32 buffer 0..n-1 repeated batch times. Dropout nodes take keys
 * key + rows * d * 8, + 2 rows * d * 8, ... (disjoint ranges), as gpt.py's drop().
 * Each node is released (tlrt_tape_release) right after its last use, as Python releases gpt.py's
 * nodes when their names are rebound: the tape then holds only what the backward rules read
 * (abi/tlrt_tape.h, MEMORY). The parameter leaves stay (their gradients are read after the
 * backward; their buffers are the model's anyway). */
static tlrt_status forward(Model *m, tlrt_tape *t, const tlrt_buffer *tokens,
                           const tlrt_buffer *positions, uint64_t batch, uint64_t n, int train,
                           double dropout, uint64_t key, uint64_t *logits) {
  tlrt_status st = TLRT_OK;
  const uint64_t d = m->cfg.d, rows = batch * n;
  const uint64_t d3[3] = {batch, n, d}, d2[2] = {rows, d}, d3x3[3] = {batch, n, 3 * d};
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
  TRY(tlrt_tape_gather_rows_ibuf(t, P[1], positions, &e2));
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

/* ---- batches ------------------------------------------------------------------------------ */

/* lm.py's Batches.next: windows of ctx + 1 bytes at starts[0..batch) -> int32 tokens and
 * next-byte labels on the device. staging: 2 * batch * ctx int32. */
static tlrt_status upload_batch(const Bytes *text, const uint64_t *starts, uint64_t batch,
                                uint64_t ctx, tlrt_device dev, int32_t *staging,
                                tlrt_buffer **tokens, tlrt_buffer **labels) {
  tlrt_status st = TLRT_OK;
  uint64_t i, j;
  int32_t *tk = staging, *lb = staging + batch * ctx;
  *tokens = *labels = NULL;
  for (i = 0; i < batch; ++i)
    for (j = 0; j < ctx; ++j) {
      tk[i * ctx + j] = text->p[starts[i] + j];
      lb[i * ctx + j] = text->p[starts[i] + j + 1];
    }
  TRY(tlrt_buffer_from_i32(dev, tk, batch * ctx, tokens));
  TRY(tlrt_buffer_from_i32(dev, lb, batch * ctx, labels));
done:
  if (st != TLRT_OK) {
    tlrt_buffer_free(*tokens);
    *tokens = NULL;
  }
  return st;
}

/* Window starts number first .. first + batch - 1 of a stream (lm.py's window_starts). */
static void window_starts(uint64_t stream, uint64_t first, uint64_t batch, uint64_t span,
                          uint64_t *starts) {
  uint64_t i;
  for (i = 0; i < batch; ++i) starts[i] = mix(stream + first + i) % span;
}

/* ---- training ----------------------------------------------------------------------------- */

/* lm.py's lr_at: linear warm-up, then cosine decay to a tenth. */
static double lr_at(uint64_t step, const Config *cfg) {
  const double lr = cfg->lr;
  const uint64_t warm = cfg->warmup;
  double q;
  if (step < warm) return lr * (double)(step + 1) / (double)warm;
  q = (double)(step - warm) / (double)(cfg->steps > warm + 1 ? cfg->steps - warm : 1);
  if (q > 1.0) q = 1.0;
  return lr * (0.1 + 0.9 * 0.5 * (1 + cos(3.14159265358979323846 * q)));
}

/* One step (lm.py's train_step): forward, cross-entropy, backward, the gradients, clipping by
 * global norm (clip > 0), AdamW on every parameter (one tlrt_adam_step_multi call). *loss_out =
 * the loss (read from the device). The host releases the logits once the loss is recorded (the
 * loss node keeps them for its backward), and the backward
 * frees each rule's saved values as soon as it has run (TLRT_TAPE_BACKWARD_FREE). */
static tlrt_status train_step(Model *m, tlrt_tape *t, const tlrt_buffer *tokens,
                              const tlrt_buffer *labels, uint64_t step, double lr,
                              const Run *run, float *loss_out) {
  tlrt_status st = TLRT_OK;
  uint64_t logits, loss, i;
  tlrt_buffer **G = (tlrt_buffer **)calloc(m->np, sizeof *G);
  tlrt_buffer **W = (tlrt_buffer **)calloc(3 * m->np, sizeof *W); /* then M, then V */
  double *wd = (double *)calloc(m->np, sizeof *wd);
  tlrt_buffer *lossb = NULL, *total = NULL;
  if (!G || !W || !wd) FAIL("out of host memory");
  TRY(forward(m, t, tokens, m->pos, m->cfg.batch, m->cfg.ctx, 1, run->dropout,
              (run->seed + step) << 40, &logits));
  TRY(tlrt_tape_cross_entropy_ibuf(t, logits, labels, &loss));
  TRY(tlrt_tape_release(t, logits));
  TRY(tlrt_tape_backward_ex(t, loss, NULL, TLRT_TAPE_BACKWARD_FREE));
  for (i = 0; i < m->np; ++i) TRY(tlrt_tape_grad(t, m->ids[i], &G[i]));
  TRY(tlrt_tape_value(t, loss, &lossb));
  TRY(tlrt_tape_reset(t));
  if (run->clip > 0.0) { /* by the global norm on the device, in place (no host read) */
    TRY(tlrt_clip_grad_norm(m->np, G, run->clip, &total));
  }
  for (i = 0; i < m->np; ++i) { /* AdamW on every parameter in one call */
    W[i] = m->p[i].w;
    W[m->np + i] = m->p[i].m;
    W[2 * m->np + i] = m->p[i].v;
    wd[i] = m->p[i].decay ? run->weight_decay : 0.0;
  }
  TRY(tlrt_adam_step_multi(m->np, W, (const tlrt_buffer *const *)G, W + m->np, W + 2 * m->np, wd,
                           step + 1, lr, 0.9, 0.95, 1e-8, true));
  TRY(tlrt_buffer_to_f32(lossb, loss_out, 1));
done:
  if (G)
    for (i = 0; i < m->np; ++i) tlrt_buffer_free(G[i]);
  free(G);
  free(W);
  free(wd);
  tlrt_buffer_free(lossb);
  tlrt_buffer_free(total);
  if (st != TLRT_OK) tlrt_tape_reset(t);
  return st;
}

/* lm.py's evaluate: the mean loss over `batches` fixed windows of the validation text. */
static tlrt_status evaluate(Model *m, tlrt_tape *t, const Bytes *text, uint64_t batches,
                            int32_t *staging, uint64_t *starts, double *out) {
  tlrt_status st = TLRT_OK;
  const uint64_t B = m->cfg.batch, T = m->cfg.ctx;
  tlrt_buffer *tokens = NULL, *labels = NULL, *lb = NULL;
  uint64_t j, logits, loss;
  double total = 0.0;
  float v;
  for (j = 0; j < batches; ++j) {
    window_starts(eval_stream(), j * B, B, text->n - T - 1, starts);
    TRY(upload_batch(text, starts, B, T, m->dev, staging, &tokens, &labels));
    TRY(forward(m, t, tokens, m->pos, B, T, 0, 0.0, 0, &logits));
    TRY(tlrt_tape_cross_entropy_ibuf(t, logits, labels, &loss));
    TRY(tlrt_tape_value(t, loss, &lb));
    TRY(tlrt_buffer_to_f32(lb, &v, 1));
    total += v;
    tlrt_buffer_free(lb);
    tlrt_buffer_free(tokens);
    tlrt_buffer_free(labels);
    lb = tokens = labels = NULL;
    TRY(tlrt_tape_reset(t));
  }
  *out = total / (double)batches;
done:
  tlrt_buffer_free(lb);
  tlrt_buffer_free(tokens);
  tlrt_buffer_free(labels);
  if (st != TLRT_OK) tlrt_tape_reset(t);
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

/* lm.py's sample with gpt.py's decoder: `length` bytes after the prompt, each drawn from the
 * softmax of the next-byte logits at `temperature` (0: greedy) with uniforms of the sampling
 * stream. out: room for plen + length bytes; *outn its length. */
static tlrt_status sample(Model *m, const char *prompt, uint64_t length, double temperature,
                          uint64_t seed, unsigned char *out, uint64_t *outn) {
  tlrt_status st = TLRT_OK;
  const uint64_t V = m->cfg.vocab;
  uint64_t n = strlen(prompt), k, i;
  float *z = (float *)malloc(V * sizeof *z);
  double *w = (double *)malloc(V * sizeof *w);
  Decoder dec;
  memcpy(out, prompt, n);
  TRY(decoder_init(&dec, m));
  if (!z || !w) FAIL("out of host memory");
  if (n == 0) FAIL("the prompt is empty");
  for (k = 0; k < length; ++k) {
    uint64_t next = 0;
    TRY(decoder_next(&dec, out, n, z));
    if (temperature <= 0.0) {
      for (i = 1; i < V; ++i)
        if (z[i] > z[next]) next = i;
    } else {
      double mx = z[0], sum = 0.0, target, acc = 0.0;
      for (i = 1; i < V; ++i)
        if (z[i] > mx) mx = z[i];
      for (i = 0; i < V; ++i) {
        w[i] = exp(((double)z[i] - mx) / temperature);
        sum += w[i];
      }
      target = (double)(mix(sample_stream(seed) + k) >> 11) * (1.0 / 9007199254740992.0) * sum;
      next = V - 1;
      for (i = 0; i < V; ++i) {
        acc += w[i];
        if (acc > target) {
          next = i;
          break;
        }
      }
    }
    out[n++] = (unsigned char)next;
  }
  *outn = n;
done:
  decoder_free(&dec);
  free(z);
  free(w);
  return st;
}

/* ---- checkpoints ------------------------------------------------------------------------ */

enum { META_COUNT = 15, META_LEN = 64 };

/* The checkpoint of the model after `step` steps (see the top of this file). */
static tlrt_status save_checkpoint(const char *path, const Model *m, const Run *run,
                                   uint64_t step, double val_init) {
  tlrt_status st = TLRT_OK;
  const uint64_t n = 3 * m->np + 1;
  const char **names = (const char **)calloc(n, sizeof *names);
  const tlrt_buffer **bufs = (const tlrt_buffer **)calloc(n, sizeof *bufs);
  const uint64_t **dims = (const uint64_t **)calloc(n, sizeof *dims);
  uint32_t *ranks = (uint32_t *)calloc(n, sizeof *ranks);
  char *opt_names = (char *)malloc(2 * m->np * (NAME_MAX_LEN + 8));
  tlrt_buffer *stepb = NULL;
  const int64_t step64 = (int64_t)step;
  char vals[META_COUNT][META_LEN];
  const char *keys[META_COUNT] = {"batch", "clip", "ctx", "d", "dropout", "format", "heads",
                                  "layers", "lr", "model", "seed", "steps", "val_init",
                                  "warmup", "weight_decay"};
  const char *values[META_COUNT];
  uint64_t i;
  int k;
  if (!names || !bufs || !dims || !ranks || !opt_names) FAIL("out of host memory");
#define U(x) (unsigned long long)(x)
  snprintf(vals[0], META_LEN, "%llu", U(m->cfg.batch));
  snprintf(vals[1], META_LEN, "%.17g", run->clip);
  snprintf(vals[2], META_LEN, "%llu", U(m->cfg.ctx));
  snprintf(vals[3], META_LEN, "%llu", U(m->cfg.d));
  snprintf(vals[4], META_LEN, "%.17g", run->dropout);
  snprintf(vals[5], META_LEN, "%s", CKPT_FORMAT);
  snprintf(vals[6], META_LEN, "%llu", U(m->cfg.heads));
  snprintf(vals[7], META_LEN, "%llu", U(m->cfg.layers));
  snprintf(vals[8], META_LEN, "%.17g", m->cfg.lr);
  snprintf(vals[9], META_LEN, "gpt");
  snprintf(vals[10], META_LEN, "%llu", U(run->seed));
  snprintf(vals[11], META_LEN, "%llu", U(m->cfg.steps));
  snprintf(vals[12], META_LEN, "%.17g", val_init);
  snprintf(vals[13], META_LEN, "%llu", U(m->cfg.warmup));
  snprintf(vals[14], META_LEN, "%.17g", run->weight_decay);
#undef U
  for (k = 0; k < META_COUNT; ++k) values[k] = vals[k];
  for (i = 0; i < m->np; ++i) {
    char *mn = opt_names + 2 * i * (NAME_MAX_LEN + 8), *vn = mn + NAME_MAX_LEN + 8;
    snprintf(mn, NAME_MAX_LEN + 8, "opt.m.%s", m->p[i].name);
    snprintf(vn, NAME_MAX_LEN + 8, "opt.v.%s", m->p[i].name);
    names[i] = m->p[i].name;
    names[m->np + i] = mn;
    names[2 * m->np + i] = vn;
    bufs[i] = m->p[i].w;
    bufs[m->np + i] = m->p[i].m;
    bufs[2 * m->np + i] = m->p[i].v;
    dims[i] = dims[m->np + i] = dims[2 * m->np + i] = m->p[i].dims;
    ranks[i] = ranks[m->np + i] = ranks[2 * m->np + i] = m->p[i].rank;
  }
  TRY(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, &step64, 1, &stepb));
  names[n - 1] = "opt.step";
  bufs[n - 1] = stepb;
  dims[n - 1] = NULL;
  ranks[n - 1] = 0; /* a scalar */
  TRY(tlrt_safetensors_save(path, n, names, bufs, dims, ranks, META_COUNT, keys, values));
done:
  tlrt_buffer_free(stepb);
  free((void *)names);
  free((void *)bufs);
  free((void *)dims);
  free(ranks);
  free(opt_names);
  return st;
}

static int meta_u64(tlrt_safetensors *f, const char *key, uint64_t *out) {
  const char *v;
  char *end;
  if (tlrt_safetensors_metadata(f, key, &v) != TLRT_OK) return 1;
  errno = 0;
  *out = strtoull(v, &end, 10);
  return errno != 0 || end == v || *end != '\0';
}
static int meta_f64(tlrt_safetensors *f, const char *key, double *out) {
  const char *v;
  char *end;
  if (tlrt_safetensors_metadata(f, key, &v) != TLRT_OK) return 1;
  *out = strtod(v, &end);
  return end == v || *end != '\0';
}

/* Reads the configuration of a checkpoint (metadata) into *cfg and *run (seed, dropout, weight
 * decay, clip) and *val_init. */
static tlrt_status read_checkpoint_config(tlrt_safetensors *f, const char *path, Config *cfg,
                                          Run *run, double *val_init) {
  tlrt_status st = TLRT_OK;
  const char *v;
  if (tlrt_safetensors_metadata(f, "format", &v) != TLRT_OK || strcmp(v, CKPT_FORMAT) != 0 ||
      tlrt_safetensors_metadata(f, "model", &v) != TLRT_OK || strcmp(v, "gpt") != 0)
    FAIL("%s: not a checkpoint of gpt (metadata \"format\" \"%s\", \"model\" \"gpt\" expected)",
         path, CKPT_FORMAT);
  if (meta_u64(f, "d", &cfg->d) || meta_u64(f, "layers", &cfg->layers) ||
      meta_u64(f, "heads", &cfg->heads) || meta_u64(f, "ctx", &cfg->ctx) ||
      meta_u64(f, "batch", &cfg->batch) || meta_u64(f, "steps", &cfg->steps) ||
      meta_u64(f, "warmup", &cfg->warmup) || meta_f64(f, "lr", &cfg->lr) ||
      meta_u64(f, "seed", &run->seed) || meta_f64(f, "dropout", &run->dropout) ||
      meta_f64(f, "weight_decay", &run->weight_decay) || meta_f64(f, "clip", &run->clip) ||
      meta_f64(f, "val_init", val_init))
    FAIL("%s: the configuration metadata is incomplete or malformed", path);
  if (cfg->d == 0 || cfg->layers == 0 || cfg->layers > 1024 || cfg->heads == 0 ||
      cfg->ctx == 0 || cfg->batch == 0 || cfg->d > (1u << 20) || cfg->ctx > (1u << 20) ||
      cfg->batch > (1u << 20))
    FAIL("%s: an implausible configuration", path);
done:
  return st;
}

/* Loads tensor `name` of the shape of p into *out (a new buffer on dev), checking dtype and
 * shape. */
static tlrt_status load_tensor(tlrt_safetensors *f, const char *path, const char *name,
                               const Param *p, tlrt_device dev, tlrt_buffer **out) {
  tlrt_status st = TLRT_OK;
  uint64_t dims[TLRT_SAFETENSORS_MAX_RANK];
  uint32_t dtype, rank;
  TRY(tlrt_safetensors_info(f, name, &dtype, dims, TLRT_SAFETENSORS_MAX_RANK, &rank));
  if (dtype != TLRT_SAFETENSORS_F32 || rank != p->rank || dims[0] != p->dims[0] ||
      (rank == 2 && dims[1] != p->dims[1]))
    FAIL("%s: tensor %s is not F32 of the model's shape", path, name);
  TRY(tlrt_safetensors_load(f, name, dev, out));
done:
  return st;
}

/* Loads every parameter and both moments of the model and the step from the open checkpoint f
 * (replacing the model's buffers). With verify set, compares them byte for byte with the
 * model's instead (the self-check of --test after a save), leaving the model as it is. */
static tlrt_status load_checkpoint(tlrt_safetensors *f, const char *path, Model *m, int verify,
                                   uint64_t *step) {
  tlrt_status st = TLRT_OK;
  uint64_t i, nt = 0, maxn = 0;
  int j;
  char name[NAME_MAX_LEN + 8];
  tlrt_buffer *b = NULL;
  uint8_t *h1 = NULL, *h2 = NULL;
  int64_t s = 0;
  uint32_t dtype, rank;
  for (i = 0; i < m->np; ++i)
    if (m->p[i].size > maxn) maxn = m->p[i].size;
  if (verify) {
    h1 = (uint8_t *)malloc(4 * maxn);
    h2 = (uint8_t *)malloc(4 * maxn);
    if (!h1 || !h2) FAIL("out of host memory");
  }
  TRY(tlrt_safetensors_count(f, &nt));
  if (nt != 3 * m->np + 1)
    FAIL("%s holds %llu tensors; this model's checkpoint has %llu", path, (unsigned long long)nt,
         (unsigned long long)(3 * m->np + 1));
  for (i = 0; i < m->np; ++i)
    for (j = 0; j < 3; ++j) {
      Param *p = &m->p[i];
      tlrt_buffer **slot = j == 0 ? &p->w : j == 1 ? &p->m : &p->v;
      snprintf(name, sizeof name, "%s%s", j == 0 ? "" : j == 1 ? "opt.m." : "opt.v.", p->name);
      TRY(load_tensor(f, path, name, p, m->dev, &b));
      if (verify) {
        TRY(tlrt_buffer_to_bytes(b, h1, 4 * p->size));
        TRY(tlrt_buffer_to_bytes(*slot, h2, 4 * p->size));
        if (memcmp(h1, h2, 4 * p->size) != 0) FAIL("%s: %s differs from the model's", path, name);
        tlrt_buffer_free(b);
      } else {
        tlrt_buffer_free(*slot);
        *slot = b;
      }
      b = NULL;
    }
  TRY(tlrt_safetensors_info(f, "opt.step", &dtype, NULL, 0, &rank));
  if (dtype != TLRT_SAFETENSORS_I64 || rank != 0) FAIL("%s: opt.step is not an I64 scalar", path);
  TRY(tlrt_safetensors_load(f, "opt.step", TLRT_DEVICE_CPU, &b));
  TRY(tlrt_buffer_to_i64(b, &s, 1));
  if (s < 0) FAIL("%s: opt.step is negative", path);
  if (verify && (uint64_t)s != *step) FAIL("%s: opt.step differs", path);
  *step = (uint64_t)s;
done:
  tlrt_buffer_free(b);
  free(h1);
  free(h2);
  return st;
}

/* ---- main ---------------------------------------------------------------------------------- */

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--quick] [--cuda] [--steps N] [--data FILE_OR_FOLDER] [--dropout P]\n"
          "          [--weight-decay W] [--clip C] [--log-every N] [--seed S] [--prompt TEXT]\n"
          "          [--sample-length N] [--temperature T] [--min-improvement X] [--test]\n"
          "          [--save PATH] [--save-every N] [--resume PATH] [--stop-after K] [--tiny]\n",
          argv0);
}

static int takes_value(const char *a) {
  static const char *const names[] = {
      "--steps", "--data", "--dropout", "--weight-decay", "--clip", "--log-every", "--seed",
      "--prompt", "--sample-length", "--temperature", "--min-improvement", "--save",
      "--save-every", "--resume", "--stop-after"};
  size_t i;
  for (i = 0; i < sizeof names / sizeof *names; ++i)
    if (strcmp(a, names[i]) == 0) return 1;
  return 0;
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  if (s[0] == '-') return 1;
  errno = 0;
  *out = strtoull(s, &end, 10);
  return errno != 0 || end == s || *end != '\0';
}
static int parse_f64(const char *s, double *out) {
  char *end;
  *out = strtod(s, &end);
  return end == s || *end != '\0' || !isfinite(*out);
}

int main(int argc, char **argv) {
  const char *data = DOC_SOURCES, *prompt = "The Python interpreter ", *save = NULL,
             *resume = NULL;
  int cuda = 0, quick = 0, test = 0, tiny = 0, have_min = 0, rc = 1, k;
  uint64_t steps_arg = 0, start = 0, step, end, log_n = 0, tokens_per_step, outn = 0;
  double min_improvement = 0.0, val0 = 0.0, val1 = 0.0, loss_sum = 0.0, t_log;
  Run run = {1234, 0, 1000, 0.1, 0.1, 1.0, 0.8, 0, 0, 8};
  Config cfg;
  tlrt_status st = TLRT_OK;
  tlrt_device dev = TLRT_DEVICE_CPU;
  Bytes train = {0}, val = {0};
  Model model;
  tlrt_tape *t = NULL;
  tlrt_safetensors *f = NULL;
  int32_t *staging = NULL;
  uint64_t *starts = NULL;
  unsigned char *text_out = NULL;
  tlrt_buffer *tokens = NULL, *labels = NULL;
  struct stat sb;

  memset(&model, 0, sizeof model);
  for (k = 1; k < argc; ++k) {
    const char *a = argv[k], *v = k + 1 < argc ? argv[k + 1] : NULL;
    int bad = 0, takes = 1;
    if (strcmp(a, "--quick") == 0) quick = 1, takes = 0;
    else if (strcmp(a, "--cuda") == 0) cuda = 1, takes = 0;
    else if (strcmp(a, "--test") == 0) test = 1, takes = 0;
    else if (strcmp(a, "--tiny") == 0) tiny = 1, takes = 0;
    else if (!v) bad = takes_value(a) ? 3 : 2;
    else if (strcmp(a, "--steps") == 0) bad = parse_u64(v, &steps_arg) || steps_arg == 0;
    else if (strcmp(a, "--data") == 0) data = v;
    else if (strcmp(a, "--dropout") == 0)
      bad = parse_f64(v, &run.dropout) || run.dropout < 0.0 || run.dropout >= 1.0;
    else if (strcmp(a, "--weight-decay") == 0)
      bad = parse_f64(v, &run.weight_decay) || run.weight_decay < 0.0;
    else if (strcmp(a, "--clip") == 0) bad = parse_f64(v, &run.clip) || run.clip < 0.0;
    else if (strcmp(a, "--log-every") == 0) bad = parse_u64(v, &run.log_every) || !run.log_every;
    else if (strcmp(a, "--seed") == 0) bad = parse_u64(v, &run.seed) || run.seed >= (1u << 20);
    else if (strcmp(a, "--prompt") == 0) bad = (prompt = v)[0] == '\0';
    else if (strcmp(a, "--sample-length") == 0)
      bad = parse_u64(v, &run.sample_length) || run.sample_length > 100000;
    else if (strcmp(a, "--temperature") == 0)
      bad = parse_f64(v, &run.temperature) || run.temperature < 0.0;
    else if (strcmp(a, "--min-improvement") == 0) bad = parse_f64(v, &min_improvement), have_min = 1;
    else if (strcmp(a, "--save") == 0) save = v;
    else if (strcmp(a, "--save-every") == 0) bad = parse_u64(v, &run.save_every) || !run.save_every;
    else if (strcmp(a, "--resume") == 0) resume = v;
    else if (strcmp(a, "--stop-after") == 0) bad = parse_u64(v, &run.stop_after) || !run.stop_after;
    else bad = 2;
    if (bad) {
      if (strcmp(a, "--help") != 0 && strcmp(a, "-h") != 0)
        fprintf(stderr, bad == 2 ? PROG ": unknown option %s\n" : bad == 3 ? PROG
                ": %s needs a value\n" : PROG ": bad value for %s\n", a);
      usage(argv[0]);
      return 2;
    }
    k += takes;
  }
  if (test && (getenv("TLRT_UNDER_VALGRIND") || (getenv("LM_TEST_TINY") &&
                                                  getenv("LM_TEST_TINY")[0]))) {
    /* memcheck / sanitizers: every code path in a few steps, no learning target */
    printf(PROG ": under valgrind or a sanitizer: the tiny configuration, no target\n");
    tiny = 1;
    have_min = 0;
  }
  if (stat(data, &sb) != 0) {
    if (test) {
      printf(PROG ": skipped (no %s: apt-get install python3.11-doc)\n", data);
      return 77;
    }
    fprintf(stderr, PROG ": no %s (Debian: apt-get install python3.11-doc, or --data PATH)\n",
            data);
    return 1;
  }
  cfg = tiny ? TINY : cuda && !quick ? SMALL : QUICK;
  if (tiny) {
    run.eval_batches = 2;
    if (!run.sample_length) run.sample_length = 8;
  }
  if (cuda) {
    uint32_t ngpu = 0;
    TRY(tlrt_device_count(TLRT_DEVICE_KIND_CUDA, &ngpu));
    if (ngpu == 0)
      FAIL("--cuda, but no usable CUDA device (%s)", tlrt_build_info());
    dev = TLRT_DEVICE_CUDA(0);
  }

  if (resume) { /* the configuration comes from the checkpoint */
    double vi;
    TRY(tlrt_safetensors_open(resume, &f));
    TRY(read_checkpoint_config(f, resume, &cfg, &run, &vi));
    val0 = vi;
  }
  if (steps_arg) cfg.steps = steps_arg;
  if (!run.log_every) run.log_every = cfg.steps / 10 ? cfg.steps / 10 : 1;
  if (!run.sample_length) run.sample_length = cfg.ctx >= 256 ? 400 : 120;
  if (cfg.d % cfg.heads != 0) FAIL("d %llu is not a multiple of heads %llu",
                                   (unsigned long long)cfg.d, (unsigned long long)cfg.heads);

  if (load_text(data, &train, &val) != 0) goto done;
  if (train.n < cfg.ctx + 2 || val.n < cfg.ctx + 2)
    FAIL("%llu training / %llu validation bytes, fewer than a context of %llu",
         (unsigned long long)train.n, (unsigned long long)val.n, (unsigned long long)cfg.ctx);
  printf(PROG ": %llu training / %llu validation bytes from %s; %s\n",
         (unsigned long long)train.n, (unsigned long long)val.n, data,
         cuda ? "CUDA device 0" : "the CPU");
  TRY(model_init(&model, &cfg, dev, run.seed));
  printf(PROG ": d %llu, layers %llu, heads %llu, ctx %llu, batch %llu, vocab %llu; %llu "
              "parameters, %llu steps\n",
         (unsigned long long)cfg.d, (unsigned long long)cfg.layers, (unsigned long long)cfg.heads,
         (unsigned long long)cfg.ctx, (unsigned long long)cfg.batch,
         (unsigned long long)cfg.vocab, (unsigned long long)model_count(&model),
         (unsigned long long)cfg.steps);
  TRY(tlrt_tape_new(dev, &t));
  staging = (int32_t *)malloc(2 * cfg.batch * cfg.ctx * sizeof *staging);
  starts = (uint64_t *)malloc(cfg.batch * sizeof *starts);
  text_out = (unsigned char *)malloc(strlen(prompt) + run.sample_length + 1);
  if (!staging || !starts || !text_out) FAIL("out of host memory");

  if (resume) {
    TRY(load_checkpoint(f, resume, &model, 0, &start));
    tlrt_safetensors_close(f);
    f = NULL;
    printf(PROG ": resumed from %s after step %llu (validation loss at initialisation %.4f)\n",
           resume, (unsigned long long)start, val0);
    if (start > cfg.steps)
      FAIL("%s holds step %llu, past the %llu steps of the run", resume,
           (unsigned long long)start, (unsigned long long)cfg.steps);
  } else {
    TRY(evaluate(&model, t, &val, run.eval_batches, staging, starts, &val0));
    printf(PROG ": validation loss at initialisation %.4f (ln 256 = %.4f)\n", val0, log(256.0));
  }

  end = run.stop_after && run.stop_after < cfg.steps ? run.stop_after : cfg.steps;
  tokens_per_step = cfg.batch * cfg.ctx;
  t_log = now_s();
  for (step = start; step < end; ++step) {
    const double lr = lr_at(step, &cfg);
    float loss;
    window_starts(train_stream(run.seed), step * cfg.batch, cfg.batch, train.n - cfg.ctx - 1,
                  starts);
    TRY(upload_batch(&train, starts, cfg.batch, cfg.ctx, dev, staging, &tokens, &labels));
    TRY(train_step(&model, t, tokens, labels, step, lr, &run, &loss));
    tlrt_buffer_free(tokens);
    tlrt_buffer_free(labels);
    tokens = labels = NULL;
    loss_sum += loss;
    ++log_n;
    if ((step + 1) % run.log_every == 0 || step + 1 == end) {
      double dt;
      TRY(tlrt_synchronize(dev));
      dt = now_s() - t_log;
      printf("step %5llu  loss %.4f  lr %.2e  %9.0f tokens/s  %7.2f ms/step\n",
             (unsigned long long)(step + 1), loss_sum / (double)log_n, lr,
             (double)(tokens_per_step * log_n) / dt, 1000.0 * dt / (double)log_n);
      fflush(stdout);
      t_log = now_s();
      loss_sum = 0.0;
      log_n = 0;
    }
    if (save && ((step + 1) % run.save_every == 0 || step + 1 == end)) {
      TRY(save_checkpoint(save, &model, &run, step + 1, val0));
      printf(PROG ": saved %s (step %llu)\n", save, (unsigned long long)(step + 1));
    }
  }
  if (save && start == end) { /* nothing trained (a resume at the end): still write the file */
    TRY(save_checkpoint(save, &model, &run, end, val0));
    printf(PROG ": saved %s (step %llu)\n", save, (unsigned long long)end);
  }
  if (save && test) { /* the file read back equals the model: the load path checked too */
    uint64_t s = end;
    TRY(tlrt_safetensors_open(save, &f));
    TRY(load_checkpoint(f, save, &model, 1, &s));
    tlrt_safetensors_close(f);
    f = NULL;
    printf(PROG ": %s read back: every tensor equal\n", save);
  }

  TRY(evaluate(&model, t, &val, run.eval_batches, staging, starts, &val1));
  printf(PROG ": validation loss %.4f (from %.4f)\n", val1, val0);
  TRY(sample(&model, prompt, run.sample_length, run.temperature, run.seed, text_out, &outn));
  printf(PROG ": sample: ");
  fwrite(text_out, 1, outn, stdout);
  printf("\n");
  rc = 0;
  if (have_min && val0 - val1 < min_improvement) {
    printf(PROG ": FAILED: the validation loss fell by %.4f nats, less than %g\n", val0 - val1,
           min_improvement);
    rc = 1;
  }
done:
  if (st != TLRT_OK) rc = 1;
  tlrt_buffer_free(tokens);
  tlrt_buffer_free(labels);
  tlrt_safetensors_close(f);
  tlrt_tape_free(t);
  model_free(&model);
  free(train.p);
  free(val.p);
  free(staging);
  free(starts);
  free(text_out);
  return rc;
}
