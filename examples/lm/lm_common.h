/* examples/lm/lm_common.h: what the C language-model examples share (gpt.c, mamba.c), as
 * examples/lm/lm.py is what gpt.py and mamba.py share. C99, static functions only: a program
 * defines PROG (its name, a string literal that prefixes its messages and is its checkpoints'
 * "model"), includes this header, describes its model in an LmSpec (configurations, parameter
 * initialisation, the forward on a tape, the next-byte logits for sampling) and calls lm_main.
 *
 *   - TRY / FAIL: every library call checked; a failure prints the call, the status and
 *     tlrt_last_error() (or the program's own message) and leaves through the label `done`;
 *   - random keys (SplitMix64, lm.py's mix() and streams), the text (load_text: a file, or the
 *     *.txt files of a folder, every 20th to validation), batch windows (window_starts,
 *     upload_batch: int32 tokens and next-byte labels on the device);
 *   - the parameters (Param: name, shape, AdamW's weight decay, value and Adam moments; normal()
 *     and constant() as lm.py's LanguageModel.normal / const, keys 2^32 apart);
 *   - lr_at (linear warm-up, cosine decay to a tenth), train_step (the model's forward,
 *     cross-entropy, backward, clipping by global norm, AdamW by one tlrt_adam_step_multi),
 *     evaluate (8 fixed validation batches), the sampler's draw (softmax at a temperature, the
 *     uniforms of the sampling stream);
 *   - checkpoints (safetensors, abi/tlrt_checkpoint.h: parameters, "opt.m.NAME", "opt.v.NAME",
 *     the I64 scalar "opt.step", the configuration as metadata) and their reading back;
 *   - lm_main: the command line (gpt.c's top comment lists the options), training loop, progress
 *     lines, validation, sample. */
#ifndef TLRT_EXAMPLES_LM_COMMON_H
#define TLRT_EXAMPLES_LM_COMMON_H

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

#ifndef PROG
#error "define PROG (the example's name) before including lm_common.h"
#endif

#define DOC_SOURCES "/usr/share/doc/python3.11/html/_sources"
#define CKPT_FORMAT "torchlean_rt examples/lm checkpoint 1"

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

/* A model's configuration: the fields of both models' CONFIGS (a model ignores the others). */
typedef struct {
  uint64_t d, layers, ctx, batch, steps, warmup, vocab;
  double lr;
  uint64_t heads;     /* gpt: attention heads */
  uint64_t di, state; /* mamba: inner width, state size per channel */
} Config;

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
/* ---- the model's parameters ----------------------------------------------------------------- */

enum { NAME_MAX_LEN = 48 };

typedef struct {
  char name[NAME_MAX_LEN];
  uint64_t dims[2], size;
  uint32_t rank;
  int decay;                  /* AdamW's weight decay: matrices only */
  tlrt_buffer *w, *m, *v;     /* the parameter and its Adam moments (zeros at first) */
} Param;

struct LmSpec;

typedef struct {
  const struct LmSpec *spec;
  Config cfg;
  tlrt_device dev;
  Param *p;
  uint64_t np;
  uint64_t key;               /* lm.py's self._key: the keys of the normal initialisations */
  uint64_t *ids;              /* leaf ids of the current recording */
} Model;

/* What a program tells lm_main about its model. */
typedef struct LmSpec {
  Config quick, small, tiny;  /* --quick (CPU, CI), --cuda, and memory checkers' few steps */
  /* The model's own integer metadata keys (beyond d, layers, ctx, batch, steps, warmup), as
   * config_u64 names them; NULL-terminated. */
  const char *const *shape_keys;
  /* The configuration's shape for the parameter line ("d 64, layers 2, ..."). */
  void (*describe)(const Config *cfg, char *buf, size_t n);
  /* 0, or 1 with a message: a configuration the model cannot build. */
  int (*check)(const Config *cfg, char *msg, size_t n);
  /* The parameters in the Python model's order (model_alloc, normal, constant), zero moments. */
  tlrt_status (*init)(Model *m);
  /* The forward: every parameter a leaf (ids in m->ids, gradients when train), the network on
   * tokens (batch * n int32 bytes); *logits = the node of the (batch * n, vocab) logits. */
  tlrt_status (*forward)(Model *m, tlrt_tape *t, const tlrt_buffer *tokens, uint64_t batch,
                         uint64_t n, int train, double dropout, uint64_t key, uint64_t *logits);
  /* The sampler: state for a run of next-byte predictions; z[0 .. vocab) = the logits of the
   * byte after out[0 .. n) (n grows by one each call); its state freed. */
  tlrt_status (*sampler_new)(Model *m, tlrt_tape *t, void **state);
  tlrt_status (*sampler_next)(void *state, const unsigned char *out, uint64_t n, float *z);
  void (*sampler_free)(void *state);
} LmSpec;

static void model_free(Model *m) {
  uint64_t i;
  for (i = 0; i < m->np; ++i) {
    tlrt_buffer_free(m->p[i].w);
    tlrt_buffer_free(m->p[i].m);
    tlrt_buffer_free(m->p[i].v);
  }
  free(m->p);
  free(m->ids);
  memset(m, 0, sizeof *m);
}

/* Room for max_params parameters (and their leaf ids). */
static tlrt_status model_alloc(Model *m, uint64_t max_params) {
  tlrt_status st = TLRT_OK;
  m->p = (Param *)calloc(max_params, sizeof *m->p);
  m->ids = (uint64_t *)calloc(max_params, sizeof *m->ids);
  if (!m->p || !m->ids) FAIL("out of host memory");
done:
  return st;
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

/* lm.py's normal(): N(0, std^2) from tlrt_rand_normal, keys 2^32 apart; decayed. */
static tlrt_status normal(Model *m, const char *name, uint64_t d0, uint64_t d1, double std) {
  Param *p = new_param(m, name, d0, d1, 1);
  m->key += (uint64_t)1 << 32;
  return tlrt_rand_normal(m->dev, p->size, 0.0, std, m->key, &p->w);
}

/* lm.py's const(): filled with value, not decayed (norm scales, biases). */
static tlrt_status constant(Model *m, const char *name, uint64_t d0, double value) {
  Param *p = new_param(m, name, d0, 0, 0);
  return tlrt_buffer_full(m->dev, p->size, value, &p->w);
}

static uint64_t model_count(const Model *m) {
  uint64_t i, n = 0;
  for (i = 0; i < m->np; ++i) n += m->p[i].size;
  return n;
}

/* Adam's moments of every parameter: zeros. */
static tlrt_status model_zero_moments(Model *m) {
  tlrt_status st = TLRT_OK;
  uint64_t i;
  for (i = 0; i < m->np; ++i) {
    TRY(tlrt_buffer_zeros(m->dev, m->p[i].size, &m->p[i].m));
    TRY(tlrt_buffer_zeros(m->dev, m->p[i].size, &m->p[i].v));
  }
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
  TRY(m->spec->forward(m, t, tokens, m->cfg.batch, m->cfg.ctx, 1, run->dropout,
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
    TRY(m->spec->forward(m, t, tokens, B, T, 0, 0.0, 0, &logits));
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
/* ---- sampling ----------------------------------------------------------------------------- */

/* lm.py's sample: `length` bytes after the prompt, each drawn from the softmax of the next-byte
 * logits (the model's sampler) at `temperature` (0: greedy) with uniforms of the sampling
 * stream. out: room for plen + length bytes; *outn its length. */
static tlrt_status sample(Model *m, tlrt_tape *t, const char *prompt, uint64_t length,
                          double temperature, uint64_t seed, unsigned char *out, uint64_t *outn) {
  tlrt_status st = TLRT_OK;
  const uint64_t V = m->cfg.vocab;
  uint64_t n = strlen(prompt), k, i;
  float *z = (float *)malloc(V * sizeof *z);
  double *w = (double *)malloc(V * sizeof *w);
  void *state = NULL;
  memcpy(out, prompt, n);
  TRY(m->spec->sampler_new(m, t, &state));
  if (!z || !w) FAIL("out of host memory");
  if (n == 0) FAIL("the prompt is empty");
  for (k = 0; k < length; ++k) {
    uint64_t next = 0;
    TRY(m->spec->sampler_next(state, out, n, z));
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
  m->spec->sampler_free(state);
  free(z);
  free(w);
  return st;
}

/* ---- checkpoints ------------------------------------------------------------------------ */

enum { META_MAX = 24, META_LEN = 64 };

/* The integer configuration field named `key` ("d", "layers", "heads", "di", "state", "ctx",
 * "batch", "steps", "warmup"), or NULL. */
static uint64_t *config_u64(Config *c, const char *key) {
  static const char *const names[] = {"d", "layers", "heads", "di", "state", "ctx", "batch",
                                      "steps", "warmup"};
  uint64_t *const fields[] = {&c->d, &c->layers, &c->heads, &c->di, &c->state, &c->ctx,
                              &c->batch, &c->steps, &c->warmup};
  size_t i;
  for (i = 0; i < sizeof names / sizeof *names; ++i)
    if (strcmp(key, names[i]) == 0) return fields[i];
  return NULL;
}

/* The integer metadata keys every model writes; the model's own follow (LmSpec.shape_keys). */
static const char *const COMMON_U64_KEYS[] = {"batch", "ctx", "d", "layers", "steps", "warmup",
                                              NULL};

/* The checkpoint of the model after `step` steps: the tensors (lm.py's save) and the metadata
 * (the configuration: the integer keys, lr, format, model, seed, dropout, weight_decay, clip,
 * val_init; the library writes them in the keys' byte order). */
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
  char vals[META_MAX][META_LEN];
  const char *keys[META_MAX], *values[META_MAX];
  Config cfg = m->cfg;
  uint64_t i;
  int k, nm = 0, pass;
  if (!names || !bufs || !dims || !ranks || !opt_names) FAIL("out of host memory");
  for (pass = 0; pass < 2; ++pass) {
    const char *const *list = pass == 0 ? COMMON_U64_KEYS : m->spec->shape_keys;
    for (k = 0; list[k] != NULL; ++k) {
      const uint64_t *v = config_u64(&cfg, list[k]);
      if (!v || nm == META_MAX - 8) FAIL("the configuration key %s", list[k]);
      keys[nm] = list[k];
      snprintf(vals[nm++], META_LEN, "%llu", (unsigned long long)*v);
    }
  }
#define META(key, ...) (keys[nm] = key, snprintf(vals[nm++], META_LEN, __VA_ARGS__))
  META("clip", "%.17g", run->clip);
  META("dropout", "%.17g", run->dropout);
  META("format", "%s", CKPT_FORMAT);
  META("lr", "%.17g", m->cfg.lr);
  META("model", "%s", PROG);
  META("seed", "%llu", (unsigned long long)run->seed);
  META("val_init", "%.17g", val_init);
  META("weight_decay", "%.17g", run->weight_decay);
#undef META
  for (k = 0; k < nm; ++k) values[k] = vals[k];
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
  TRY(tlrt_safetensors_save(path, n, names, bufs, dims, ranks, (uint64_t)nm, keys, values));
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
static tlrt_status read_checkpoint_config(const LmSpec *spec, tlrt_safetensors *f,
                                          const char *path, Config *cfg, Run *run,
                                          double *val_init) {
  tlrt_status st = TLRT_OK;
  const char *v;
  int pass, k, bad = 0;
  if (tlrt_safetensors_metadata(f, "format", &v) != TLRT_OK || strcmp(v, CKPT_FORMAT) != 0 ||
      tlrt_safetensors_metadata(f, "model", &v) != TLRT_OK || strcmp(v, PROG) != 0)
    FAIL("%s: not a checkpoint of " PROG " (metadata \"format\" \"%s\", \"model\" \"" PROG
         "\" expected)", path, CKPT_FORMAT);
  for (pass = 0; pass < 2; ++pass) {
    const char *const *list = pass == 0 ? COMMON_U64_KEYS : spec->shape_keys;
    for (k = 0; list[k] != NULL; ++k) {
      uint64_t *field = config_u64(cfg, list[k]);
      if (!field || meta_u64(f, list[k], field)) bad = 1;
      /* a shape of the model's own: positive and not absurd */
      else if (pass == 1 && (*field == 0 || *field > (1u << 20))) bad = 2;
    }
  }
  if (bad == 1 || meta_f64(f, "lr", &cfg->lr) ||
      meta_u64(f, "seed", &run->seed) || meta_f64(f, "dropout", &run->dropout) ||
      meta_f64(f, "weight_decay", &run->weight_decay) || meta_f64(f, "clip", &run->clip) ||
      meta_f64(f, "val_init", val_init))
    FAIL("%s: the configuration metadata is incomplete or malformed", path);
  if (bad || cfg->d == 0 || cfg->layers == 0 || cfg->layers > 1024 ||
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

/* The program: options, text, model, training, validation, sample (gpt.c's top comment). */
static int lm_main(int argc, char **argv, const LmSpec *spec) {
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
  char shape[256];

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
    else if (strcmp(a, "--min-improvement") == 0)
      bad = parse_f64(v, &min_improvement), have_min = 1;
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
  cfg = tiny ? spec->tiny : cuda && !quick ? spec->small : spec->quick;
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
    TRY(read_checkpoint_config(spec, f, resume, &cfg, &run, &vi));
    val0 = vi;
  }
  if (steps_arg) cfg.steps = steps_arg;
  if (!run.log_every) run.log_every = cfg.steps / 10 ? cfg.steps / 10 : 1;
  if (!run.sample_length) run.sample_length = cfg.ctx >= 256 ? 400 : 120;
  if (spec->check(&cfg, shape, sizeof shape)) FAIL("%s", shape);

  if (load_text(data, &train, &val) != 0) goto done;
  if (train.n < cfg.ctx + 2 || val.n < cfg.ctx + 2)
    FAIL("%llu training / %llu validation bytes, fewer than a context of %llu",
         (unsigned long long)train.n, (unsigned long long)val.n, (unsigned long long)cfg.ctx);
  printf(PROG ": %llu training / %llu validation bytes from %s; %s\n",
         (unsigned long long)train.n, (unsigned long long)val.n, data,
         cuda ? "CUDA device 0" : "the CPU");
  model.spec = spec;
  model.cfg = cfg;
  model.dev = dev;
  model.key = run.seed * 1000003u;
  TRY(spec->init(&model));
  spec->describe(&cfg, shape, sizeof shape);
  printf(PROG ": %s; %llu parameters, %llu steps\n", shape,
         (unsigned long long)model_count(&model), (unsigned long long)cfg.steps);
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
  TRY(sample(&model, t, prompt, run.sample_length, run.temperature, run.seed, text_out,
             &outn));
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

#endif /* TLRT_EXAMPLES_LM_COMMON_H */
