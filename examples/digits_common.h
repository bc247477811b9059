/* digits_common.h: what the digits examples (digits_mlp.c, digits_cnn.c) share (C99): the
 * error-reporting macro, the command line, the TLDG data file of export_digits.py, the fixed-seed
 * random source and 80/20 split, PyTorch's uniform initialisation, batch upload, the accuracy
 * loop and the training driver digits_main (tape step, Adam, per-epoch report, exit status); a
 * program supplies only its model (DigitsModel). Define DIGITS_PROG (the program's name, for
 * messages) before including it. */
#ifndef DIGITS_COMMON_H
#define DIGITS_COMMON_H

#ifndef DIGITS_PROG
#error "define DIGITS_PROG before including digits_common.h"
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "torchlean_rt.h"

enum { DIGITS_FEATURES = 64, DIGITS_CLASSES = 10, DIGITS_EVAL_BATCH = 512 };

/* Every fallible call returns a tlrt_status; on failure print it with tlrt_last_error() and leave
 * through the function's cleanup label `done` with the status in `st`. */
#define TRY(call)                                                                    \
  do {                                                                               \
    st = (call);                                                                     \
    if (st != TLRT_OK) {                                                             \
      fflush(stdout);                                                                \
      fprintf(stderr, DIGITS_PROG ": %s\n  failed with %s: %s\n", #call,            \
              tlrt_status_string(st), tlrt_last_error());                            \
      goto done;                                                                     \
    }                                                                                \
  } while (0)

/* [--cuda] [--epochs N] [--target PERCENT] [--subset N] [digits.bin]: *epochs and *target hold
 * the program's defaults on entry; --subset N (for memory checkers: every code path in fewer
 * steps) trains and evaluates on the first N images of each side of the split (*subset 0: all).
 * Returns 0, or 2 (the exit status) after printing the usage. */
static int digits_args(int argc, char **argv, const char **path, tlrt_device *dev, int *epochs,
                       double *target, uint32_t *subset) {
  int k;
  for (k = 1; k < argc; ++k) {
    if (strcmp(argv[k], "--cuda") == 0) {
      *dev = TLRT_DEVICE_CUDA(0);
    } else if (strcmp(argv[k], "--epochs") == 0 && k + 1 < argc) {
      *epochs = atoi(argv[++k]);
      if (*epochs < 1 || *epochs > 10000) {
        fprintf(stderr, DIGITS_PROG ": --epochs must be in 1..10000\n");
        return 2;
      }
    } else if (strcmp(argv[k], "--target") == 0 && k + 1 < argc) {
      *target = atof(argv[++k]);
    } else if (strcmp(argv[k], "--subset") == 0 && k + 1 < argc) {
      const long n = atol(argv[++k]);
      if (n < 1 || n > 100000) {
        fprintf(stderr, DIGITS_PROG ": --subset must be in 1..100000\n");
        return 2;
      }
      *subset = (uint32_t)n;
    } else if (argv[k][0] != '-') {
      *path = argv[k];
    } else {
      fprintf(stderr,
              "usage: %s [--cuda] [--epochs N] [--target PERCENT] [--subset N] [digits.bin]\n",
              argv[0]);
      return 2;
    }
  }
  return 0;
}

/* ---- data ----------------------------------------------------------------------------------- */

typedef struct {
  uint32_t n, d;
  float *x;   /* n * d features in [0, 1] */
  uint8_t *y; /* n labels 0..9 */
} Dataset;

static uint32_t le32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Reads the TLDG file of export_digits.py. Returns 0 on success. */
static int read_digits(const char *path, Dataset *ds) {
  unsigned char head[12];
  uint64_t i, nx;
  int rc = 1;
  FILE *f = fopen(path, "rb");
  memset(ds, 0, sizeof *ds);
  if (!f) {
    fprintf(stderr,
            DIGITS_PROG ": cannot open %s\n  create it with: python3 examples/export_digits.py %s\n",
            path, path);
    return 1;
  }
  if (fread(head, 1, sizeof head, f) != sizeof head || memcmp(head, "TLDG", 4) != 0) {
    fprintf(stderr, DIGITS_PROG ": %s is not a TLDG file (see examples/export_digits.py)\n", path);
    goto out;
  }
  ds->n = le32(head + 4);
  ds->d = le32(head + 8);
  if (ds->d != DIGITS_FEATURES || ds->n < 10 || ds->n > 1000000) {
    fprintf(stderr, DIGITS_PROG ": %s holds %u images of %u features; expected 64 features\n",
            path, ds->n, ds->d);
    goto out;
  }
  nx = (uint64_t)ds->n * ds->d;
  ds->x = (float *)malloc(nx * sizeof(float));
  ds->y = (uint8_t *)malloc(ds->n);
  if (!ds->x || !ds->y) {
    fprintf(stderr, DIGITS_PROG ": out of host memory\n");
    goto out;
  }
  for (i = 0; i < nx; ++i) { /* little-endian float32, whatever the host's byte order */
    unsigned char b[4];
    uint32_t u;
    if (fread(b, 1, 4, f) != 4) {
      fprintf(stderr, DIGITS_PROG ": %s is truncated\n", path);
      goto out;
    }
    u = le32(b);
    memcpy(&ds->x[i], &u, 4);
  }
  if (fread(ds->y, 1, ds->n, f) != ds->n) {
    fprintf(stderr, DIGITS_PROG ": %s is truncated\n", path);
    goto out;
  }
  for (i = 0; i < ds->n; ++i)
    if (ds->y[i] >= DIGITS_CLASSES) {
      fprintf(stderr, DIGITS_PROG ": %s: label %u of image %llu is not a digit\n", path,
              (unsigned)ds->y[i], (unsigned long long)i);
      goto out;
    }
  rc = 0;
out:
  fclose(f);
  if (rc != 0) {
    free(ds->x);
    free(ds->y);
    memset(ds, 0, sizeof *ds);
  }
  return rc;
}

/* SplitMix64: the fixed-seed source of the split, the batch order and the initial weights. */
static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double rng_uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) / 9007199254740992.0; }
static void shuffle(uint32_t *a, uint32_t n, uint64_t *s) {
  uint32_t i;
  for (i = n; i > 1; --i) {
    const uint32_t j = (uint32_t)(rng_next(s) % i), t = a[i - 1];
    a[i - 1] = a[j];
    a[j] = t;
  }
}

/* The split every digits example uses: image indices shuffled from *seed (which then goes on
 * to drive initialisation and batch order), the first 80% for training, the rest for testing.
 * *order (malloc'd, n entries) holds the training indices first. Returns 0 on success. */
static int digits_split(const Dataset *ds, uint64_t *seed, uint32_t **order, uint32_t *ntrain) {
  uint32_t i;
  *order = (uint32_t *)malloc(ds->n * sizeof **order);
  if (!*order) {
    fprintf(stderr, DIGITS_PROG ": out of host memory\n");
    return 1;
  }
  for (i = 0; i < ds->n; ++i) (*order)[i] = i;
  shuffle(*order, ds->n, seed);
  *ntrain = (uint32_t)((uint64_t)ds->n * 4 / 5);
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- buffers -------------------------------------------------------------------------------- */

/* A new buffer of n values uniform in +-bound drawn from *seed: PyTorch's default initialisation
 * of nn.Linear and nn.Conv2d weights and biases with bound = 1 / sqrt(fan_in). */
static tlrt_status upload_uniform(tlrt_device dev, uint64_t n, double bound, uint64_t *seed,
                                  tlrt_buffer **out) {
  tlrt_status st;
  uint64_t j;
  float *w = (float *)malloc((n ? n : 1) * sizeof *w);
  *out = NULL;
  if (!w) return TLRT_ERR_OUT_OF_MEMORY;
  for (j = 0; j < n; ++j) w[j] = (float)((2.0 * rng_uniform(seed) - 1.0) * bound);
  st = tlrt_buffer_from_f32(dev, w, n, out);
  free(w);
  return st;
}

/* Gathers the images idx[0..b) into host staging (features and labels) and uploads the features
 * (b * 64 floats: the 8x8 images row by row). */
static tlrt_status batch_upload(const Dataset *ds, const uint32_t *idx, uint64_t b,
                                tlrt_device dev, float *xs, uint64_t *ys, tlrt_buffer **xb) {
  uint64_t i;
  for (i = 0; i < b; ++i) {
    memcpy(xs + i * DIGITS_FEATURES, ds->x + (uint64_t)idx[i] * DIGITS_FEATURES,
           DIGITS_FEATURES * sizeof(float));
    ys[i] = ds->y[idx[i]];
  }
  return tlrt_buffer_from_f32(dev, xs, b * DIGITS_FEATURES, xb);
}

/* Records a model's forward pass on the tape for the batch xb of b images (train: parameters
 * with gradients) and sets *logits to the node of the (b, 10) logits. */
typedef tlrt_status (*digits_forward)(void *model, tlrt_tape *t, tlrt_buffer *xb, uint64_t b,
                                      int train, uint64_t *logits);

/* Accuracy (percent) of the model on the images idx[0..n), in batches of up to 512; staging xs
 * (512 * 64 floats), ys (512) and host (512 * 10 floats). The tape is reset afterwards. */
static tlrt_status digits_accuracy(digits_forward forward, void *model, tlrt_tape *t,
                                   const Dataset *ds, const uint32_t *idx, uint32_t n,
                                   tlrt_device dev, float *xs, uint64_t *ys, float *host,
                                   double *acc) {
  tlrt_status st = TLRT_OK;
  tlrt_buffer *xb = NULL, *lb = NULL;
  uint64_t logits, i, correct = 0;
  uint32_t off;
  for (off = 0; off < n; off += DIGITS_EVAL_BATCH) {
    const uint64_t b = n - off < DIGITS_EVAL_BATCH ? n - off : DIGITS_EVAL_BATCH;
    TRY(batch_upload(ds, idx + off, b, dev, xs, ys, &xb));
    TRY(forward(model, t, xb, b, 0, &logits));
    TRY(tlrt_tape_value(t, logits, &lb));
    TRY(tlrt_buffer_to_f32(lb, host, b * DIGITS_CLASSES));
    for (i = 0; i < b; ++i) {
      const float *row = host + i * DIGITS_CLASSES;
      uint64_t j, best = 0;
      for (j = 1; j < DIGITS_CLASSES; ++j)
        if (row[j] > row[best]) best = j;
      correct += best == ys[i];
    }
    tlrt_buffer_free(lb);
    lb = NULL;
    tlrt_buffer_free(xb);
    xb = NULL;
    TRY(tlrt_tape_reset(t));
  }
  *acc = 100.0 * (double)correct / (double)n;
done:
  tlrt_buffer_free(lb);
  tlrt_buffer_free(xb);
  if (st != TLRT_OK) tlrt_tape_reset(t);
  return st;
}

/* ---- training driver ------------------------------------------------------------------------ */

enum { DIGITS_MAX_PARAM = 8, DIGITS_MAX_RANK = 4 };


/* Uploads the training batch idx[0..b) (features to *xb, labels to ys) through staging xs; may
 * draw from *seed (augmentation). */
typedef tlrt_status (*digits_train_batch)(const Dataset *ds, const uint32_t *idx, uint64_t b,
                                          tlrt_device dev, uint64_t *seed, float *xs,
                                          uint64_t *ys, tlrt_buffer **xb);

/* What a program describes: its parameters (shapes in PyTorch's layout, fan-in of the default
 * initialisation), its forward pass (a digits_forward whose model is a DigitsParams: it starts
 * with digits_leaves), how training batches
 * are made, and the optimiser's settings: Adam with the rate lr, decaying along a half cosine to
 * lr_min over all steps of the run when lr_min < lr (constant when lr_min == lr). */
typedef struct {
  const char *summary; /* printed after the image counts, e.g. "MLP 64-128-10, Adam lr 0.002" */
  int nparam;
  uint64_t dims[DIGITS_MAX_PARAM][DIGITS_MAX_RANK];
  uint32_t rank[DIGITS_MAX_PARAM];
  uint64_t fan_in[DIGITS_MAX_PARAM];
  digits_forward forward;
  digits_train_batch train_batch;
  uint32_t batch;
  double lr, lr_min, beta1, beta2, eps;
  double target; /* default --target, percent */
} DigitsModel;

/* A model's parameters: buffers the program keeps (updated in place by Adam), their leaf ids in
 * the current recording (set by digits_leaves) and the model they belong to. */
typedef struct {
  tlrt_buffer *P[DIGITS_MAX_PARAM];
  uint64_t ids[DIGITS_MAX_PARAM];
  const DigitsModel *spec;
} DigitsParams;

/* Records every parameter as a leaf of t (with gradients when train): a forward's first step. */
static tlrt_status digits_leaves(DigitsParams *m, tlrt_tape *t, int train) {
  tlrt_status st = TLRT_OK;
  int k;
  for (k = 0; k < m->spec->nparam; ++k)
    TRY(tlrt_tape_leaf(t, m->P[k], m->spec->dims[k], m->spec->rank[k], train != 0, &m->ids[k]));
done:
  return st;
}

static uint64_t digits_param_size(const DigitsModel *spec, int k) {
  uint64_t n = 1;
  uint32_t i;
  for (i = 0; i < spec->rank[k]; ++i) n *= spec->dims[k][i];
  return n;
}

/* The whole program: command line, data, fixed-seed split and initialisation, `epochs` epochs of
 * mini-batch training (each step records the forward pass on the tape, runs the backward pass,
 * takes the parameter gradients, resets the tape and applies tlrt_adam_step in place), one line
 * per epoch and the final accuracy. Returns the exit status: 0 when the final test accuracy
 * reaches the target, 1 below it or on any error, 2 on a bad command line. */
static int digits_main(int argc, char **argv, const DigitsModel *spec) {
  const char *path = "digits.bin";
  tlrt_device dev = TLRT_DEVICE_CPU;
  int epochs = 30, rc = 1, k, epoch;
  double target = spec->target;
  tlrt_status st = TLRT_OK;
  Dataset ds;
  uint32_t *order = NULL, *train, *test, ntrain, ntest, subset = 0;
  float *xs = NULL, *host = NULL;
  uint64_t *ys = NULL, seed = 2026, step = 0, total_steps;
  tlrt_tape *t = NULL;
  DigitsParams m;
  tlrt_buffer *M[DIGITS_MAX_PARAM] = {0}, *V[DIGITS_MAX_PARAM] = {0}, *G[DIGITS_MAX_PARAM] = {0};
  tlrt_buffer *xb = NULL, *lossb = NULL;
  double test_acc = 0.0, t0 = now_s();

  memset(&m, 0, sizeof m);
  m.spec = spec;
  if ((rc = digits_args(argc, argv, &path, &dev, &epochs, &target, &subset)) != 0) return rc;
  rc = 1;
  if (read_digits(path, &ds) != 0) return 1;

  /* Fixed-seed shuffle, 80/20 split. */
  xs = (float *)malloc((size_t)DIGITS_EVAL_BATCH * DIGITS_FEATURES * sizeof *xs);
  ys = (uint64_t *)malloc(DIGITS_EVAL_BATCH * sizeof *ys);
  host = (float *)malloc((size_t)DIGITS_EVAL_BATCH * DIGITS_CLASSES * sizeof *host);
  if (!xs || !ys || !host) {
    fprintf(stderr, DIGITS_PROG ": out of host memory\n");
    goto done;
  }
  if (digits_split(&ds, &seed, &order, &ntrain) != 0) goto done;
  ntest = ds.n - ntrain;
  train = order;
  test = order + ntrain;
  if (subset != 0 && ntrain > subset) ntrain = subset;
  if (subset != 0 && ntest > subset) ntest = subset;
  total_steps = (uint64_t)epochs * ((ntrain + spec->batch - 1) / spec->batch);

  printf(DIGITS_PROG ": %u images (%u train, %u test), %s, batch %u, on %s\n", ds.n, ntrain,
         ntest, spec->summary, spec->batch, dev == TLRT_DEVICE_CPU ? "the CPU" : "CUDA device 0");
  printf("library: %s\n", tlrt_build_info());

  /* Parameters (PyTorch's default initialisation) and zeroed Adam moments. */
  TRY(tlrt_tape_new(dev, &t));
  for (k = 0; k < spec->nparam; ++k) {
    const uint64_t n = digits_param_size(spec, k);
    TRY(upload_uniform(dev, n, 1.0 / sqrt((double)spec->fan_in[k]), &seed, &m.P[k]));
    TRY(tlrt_buffer_zeros(dev, n, &M[k]));
    TRY(tlrt_buffer_zeros(dev, n, &V[k]));
  }

  for (epoch = 1; epoch <= epochs; ++epoch) {
    const double te = now_s();
    double loss_sum = 0.0, train_acc = 0.0;
    uint32_t nb = 0, off;
    shuffle(train, ntrain, &seed);
    for (off = 0; off < ntrain; off += spec->batch) {
      const uint64_t b = ntrain - off < spec->batch ? ntrain - off : spec->batch;
      const double lr =
          spec->lr_min < spec->lr
              ? spec->lr_min + 0.5 * (spec->lr - spec->lr_min) *
                                   (1.0 + cos(3.14159265358979323846 * (double)step /
                                              (double)total_steps))
              : spec->lr;
      uint64_t logits, loss;
      float lv = 0.0f;
      TRY(spec->train_batch(&ds, train + off, b, dev, &seed, xs, ys, &xb));
      TRY(spec->forward(&m, t, xb, b, 1, &logits));
      TRY(tlrt_tape_cross_entropy(t, logits, ys, &loss));
      TRY(tlrt_tape_backward(t, loss));
      TRY(tlrt_tape_value(t, loss, &lossb));
      TRY(tlrt_buffer_to_f32(lossb, &lv, 1));
      for (k = 0; k < spec->nparam; ++k) TRY(tlrt_tape_grad(t, m.ids[k], &G[k]));
      TRY(tlrt_tape_reset(t));
      ++step;
      for (k = 0; k < spec->nparam; ++k) {
        TRY(tlrt_adam_step(m.P[k], G[k], M[k], V[k], step, lr, spec->beta1, spec->beta2,
                           spec->eps, 0.0, false));
        tlrt_buffer_free(G[k]);
        G[k] = NULL;
      }
      tlrt_buffer_free(lossb);
      lossb = NULL;
      tlrt_buffer_free(xb);
      xb = NULL;
      loss_sum += lv;
      ++nb;
    }
    TRY(digits_accuracy(spec->forward, &m, t, &ds, train, ntrain, dev, xs, ys, host, &train_acc));
    TRY(digits_accuracy(spec->forward, &m, t, &ds, test, ntest, dev, xs, ys, host, &test_acc));
    printf("epoch %3d  loss %.4f  train acc %6.2f%%  test acc %6.2f%%  %.3f s\n", epoch,
           loss_sum / nb, train_acc, test_acc, now_s() - te);
    fflush(stdout);
  }
  printf("final test accuracy: %.2f%% (%u images; target >= %.0f%%), %.1f s in all\n", test_acc,
         ntest, target, now_s() - t0);
  if (test_acc >= target) {
    rc = 0;
  } else {
    fprintf(stderr, DIGITS_PROG ": test accuracy %.2f%% is below the %.0f%% target\n", test_acc,
            target);
  }

done:
  for (k = 0; k < spec->nparam; ++k) {
    tlrt_buffer_free(m.P[k]);
    tlrt_buffer_free(M[k]);
    tlrt_buffer_free(V[k]);
    tlrt_buffer_free(G[k]);
  }
  tlrt_buffer_free(xb);
  tlrt_buffer_free(lossb);
  tlrt_tape_free(t);
  free(order);
  free(xs);
  free(ys);
  free(host);
  free(ds.x);
  free(ds.y);
  return rc;
}

#endif /* DIGITS_COMMON_H */
