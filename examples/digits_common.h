/* digits_common.h: what the digits examples (digits_mlp.c, digits_cnn.c) share (C99): the
 * error-reporting macro, the command line, the TLDG data file of export_digits.py, the fixed-seed
 * random source and 80/20 split, PyTorch's uniform initialisation, batch upload and the accuracy
 * loop. Define DIGITS_PROG (the program's name, for messages) before including it. */
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

/* [--cuda] [--epochs N] [--target PERCENT] [digits.bin]: *epochs and *target hold the program's
 * defaults on entry. Returns 0, or 2 (the exit status) after printing the usage. */
static int digits_args(int argc, char **argv, const char **path, tlrt_device *dev, int *epochs,
                       double *target) {
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
    } else if (argv[k][0] != '-') {
      *path = argv[k];
    } else {
      fprintf(stderr, "usage: %s [--cuda] [--epochs N] [--target PERCENT] [digits.bin]\n",
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

#endif /* DIGITS_COMMON_H */
