/* digits_mlp: train a small MLP on scikit-learn's handwritten digits with libtorchlean_rt (C99).
 *
 *   python3 examples/export_digits.py digits.bin     (once: the data ship inside scikit-learn)
 *   build/examples/digits_mlp [--cuda] [--epochs N] [--target PERCENT] [digits.bin]
 *
 * The data: 1797 images of 8x8 pixels scaled to [0, 1] (the TLDG file of export_digits.py),
 * shuffled with a fixed seed and split 80/20 into 1437 training and 360 test images.
 * The model: 64 -> 128 (ReLU) -> 10, PyTorch's nn.Linear layout and initialisation (weights and
 * biases uniform in +-1/sqrt(fan_in), from a fixed seed), cross-entropy loss on mini-batches of 32,
 * Adam (lr 2e-3, betas 0.9 / 0.999, eps 1e-8) with the fused in-place step tlrt_adam_step.
 * Each step records the forward pass on an autograd tape (abi/tlrt_tape.h), runs the backward
 * pass, takes the four parameter gradients, resets the tape and updates the parameters and the
 * Adam moments in place: the parameters are ordinary buffers that the program keeps.
 *
 * It runs on the CPU by default; --cuda runs everything on CUDA device 0 and fails loudly (status
 * name and message, exit 1) in a build without CUDA or on a machine without a GPU: the library
 * never falls back to the CPU. It prints one line per epoch (mean training loss, training and test
 * accuracy, seconds) and the final test accuracy, and exits 0 when that is at least the target
 * (--target, default 95%), 1 otherwise (and on any error). */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c99 */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "torchlean_rt.h"

enum { D_IN = 64, D_HID = 128, D_OUT = 10, BATCH = 32, NPARAM = 4 };
static const double kLr = 2e-3, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;

/* Every fallible call returns a tlrt_status; on failure print it with tlrt_last_error() and leave
 * through the function's cleanup label with the status. */
#define TRY(call)                                                                    \
  do {                                                                               \
    st = (call);                                                                     \
    if (st != TLRT_OK) {                                                             \
      fflush(stdout);                                                                \
      fprintf(stderr, "digits_mlp: %s\n  failed with %s: %s\n", #call,              \
              tlrt_status_string(st), tlrt_last_error());                            \
      goto done;                                                                     \
    }                                                                                \
  } while (0)

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
            "digits_mlp: cannot open %s\n  create it with: python3 examples/export_digits.py %s\n",
            path, path);
    return 1;
  }
  if (fread(head, 1, sizeof head, f) != sizeof head || memcmp(head, "TLDG", 4) != 0) {
    fprintf(stderr, "digits_mlp: %s is not a TLDG file (see examples/export_digits.py)\n", path);
    goto out;
  }
  ds->n = le32(head + 4);
  ds->d = le32(head + 8);
  if (ds->d != D_IN || ds->n < 10 || ds->n > 1000000) {
    fprintf(stderr, "digits_mlp: %s holds %u images of %u features; expected 64 features\n", path,
            ds->n, ds->d);
    goto out;
  }
  nx = (uint64_t)ds->n * ds->d;
  ds->x = (float *)malloc(nx * sizeof(float));
  ds->y = (uint8_t *)malloc(ds->n);
  if (!ds->x || !ds->y) {
    fprintf(stderr, "digits_mlp: out of host memory\n");
    goto out;
  }
  for (i = 0; i < nx; ++i) { /* little-endian float32, whatever the host's byte order */
    unsigned char b[4];
    uint32_t u;
    if (fread(b, 1, 4, f) != 4) {
      fprintf(stderr, "digits_mlp: %s is truncated\n", path);
      goto out;
    }
    u = le32(b);
    memcpy(&ds->x[i], &u, 4);
  }
  if (fread(ds->y, 1, ds->n, f) != ds->n) {
    fprintf(stderr, "digits_mlp: %s is truncated\n", path);
    goto out;
  }
  for (i = 0; i < ds->n; ++i)
    if (ds->y[i] >= D_OUT) {
      fprintf(stderr, "digits_mlp: %s: label %u of image %llu is not a digit\n", path,
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

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- model ---------------------------------------------------------------------------------- */

/* Parameters in PyTorch's layout: W1 (128, 64), b1 (128), W2 (10, 128), b2 (10). */
static const uint64_t kDims[NPARAM][2] = {{D_HID, D_IN}, {D_HID, 0}, {D_OUT, D_HID}, {D_OUT, 0}};
static const uint32_t kRank[NPARAM] = {2, 1, 2, 1};
static const uint64_t kFanIn[NPARAM] = {D_IN, D_IN, D_HID, D_HID};

static uint64_t param_size(int k) { return kDims[k][0] * (kRank[k] == 2 ? kDims[k][1] : 1); }

/* Gathers the images idx[0..b) into host staging (features and labels) and uploads the features. */
static tlrt_status batch_upload(const Dataset *ds, const uint32_t *idx, uint64_t b, tlrt_device dev,
                                float *xs, uint64_t *ys, tlrt_buffer **xb) {
  uint64_t i;
  for (i = 0; i < b; ++i) {
    memcpy(xs + i * D_IN, ds->x + (uint64_t)idx[i] * D_IN, D_IN * sizeof(float));
    ys[i] = ds->y[idx[i]];
  }
  return tlrt_buffer_from_f32(dev, xs, b * D_IN, xb);
}

/* Records the forward pass of a batch xb of b images: the four parameters as leaves (with
 * gradients when train), x as a leaf without, then linear -> relu -> linear. *logits = the node
 * of the (b, 10) logits; ids[k] = the leaf of parameter k. */
static tlrt_status forward(tlrt_tape *t, tlrt_buffer *const P[NPARAM], int train, tlrt_buffer *xb,
                           uint64_t b, uint64_t ids[NPARAM], uint64_t *logits) {
  tlrt_status st = TLRT_OK;
  const uint64_t xdims[2] = {b, D_IN};
  uint64_t x, h, a;
  int k;
  for (k = 0; k < NPARAM; ++k)
    TRY(tlrt_tape_leaf(t, P[k], kDims[k], kRank[k], train != 0, &ids[k]));
  TRY(tlrt_tape_leaf(t, xb, xdims, 2, false, &x));
  TRY(tlrt_tape_linear(t, x, ids[0], ids[1], &h));
  TRY(tlrt_tape_relu(t, h, &a));
  TRY(tlrt_tape_linear(t, a, ids[2], ids[3], logits));
done:
  return st;
}

/* Accuracy (percent) of the model on the images idx[0..n), in batches of up to 512. */
static tlrt_status accuracy(tlrt_tape *t, tlrt_buffer *const P[NPARAM], const Dataset *ds,
                            const uint32_t *idx, uint32_t n, tlrt_device dev, float *xs,
                            uint64_t *ys, float *out_host, double *acc) {
  tlrt_status st = TLRT_OK;
  tlrt_buffer *xb = NULL, *lb = NULL;
  uint64_t ids[NPARAM], logits, i, correct = 0;
  uint32_t off;
  for (off = 0; off < n; off += 512) {
    const uint64_t b = n - off < 512 ? n - off : 512;
    TRY(batch_upload(ds, idx + off, b, dev, xs, ys, &xb));
    TRY(forward(t, P, 0, xb, b, ids, &logits));
    TRY(tlrt_tape_value(t, logits, &lb));
    TRY(tlrt_buffer_to_f32(lb, out_host, b * D_OUT));
    for (i = 0; i < b; ++i) {
      const float *row = out_host + i * D_OUT;
      uint64_t j, best = 0;
      for (j = 1; j < D_OUT; ++j)
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

/* ---- main ----------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  const char *path = "digits.bin";
  tlrt_device dev = TLRT_DEVICE_CPU;
  int epochs = 30, rc = 1, k, epoch;
  double target = 95.0; /* percent */
  tlrt_status st = TLRT_OK;
  Dataset ds;
  uint32_t *order = NULL, *train = NULL, *test = NULL, ntrain, ntest, i;
  float *xs = NULL, *host = NULL;
  uint64_t *ys = NULL, seed = 2026, step = 0;
  tlrt_tape *t = NULL;
  tlrt_buffer *P[NPARAM] = {0}, *M[NPARAM] = {0}, *V[NPARAM] = {0}, *G[NPARAM] = {0};
  tlrt_buffer *xb = NULL, *lossb = NULL;
  double test_acc = 0.0, t0 = now_s();

  for (k = 1; k < argc; ++k) {
    if (strcmp(argv[k], "--cuda") == 0) {
      dev = TLRT_DEVICE_CUDA(0);
    } else if (strcmp(argv[k], "--epochs") == 0 && k + 1 < argc) {
      epochs = atoi(argv[++k]);
      if (epochs < 1 || epochs > 10000) {
        fprintf(stderr, "digits_mlp: --epochs must be in 1..10000\n");
        return 2;
      }
    } else if (strcmp(argv[k], "--target") == 0 && k + 1 < argc) {
      target = atof(argv[++k]);
    } else if (argv[k][0] != '-') {
      path = argv[k];
    } else {
      fprintf(stderr, "usage: %s [--cuda] [--epochs N] [--target PERCENT] [digits.bin]\n",
              argv[0]);
      return 2;
    }
  }
  if (read_digits(path, &ds) != 0) return 1;

  /* Fixed-seed shuffle, 80/20 split. */
  order = (uint32_t *)malloc(ds.n * sizeof *order);
  xs = (float *)malloc((size_t)512 * D_IN * sizeof *xs);
  ys = (uint64_t *)malloc(512 * sizeof *ys);
  host = (float *)malloc((size_t)512 * D_OUT * sizeof *host);
  if (!order || !xs || !ys || !host) {
    fprintf(stderr, "digits_mlp: out of host memory\n");
    goto done;
  }
  for (i = 0; i < ds.n; ++i) order[i] = i;
  shuffle(order, ds.n, &seed);
  ntrain = (uint32_t)((uint64_t)ds.n * 4 / 5);
  ntest = ds.n - ntrain;
  train = order;
  test = order + ntrain;

  printf("digits_mlp: %u images (%u train, %u test), MLP %d-%d-%d, Adam lr %g, batch %d, on %s\n",
         ds.n, ntrain, ntest, D_IN, D_HID, D_OUT, kLr, BATCH,
         dev == TLRT_DEVICE_CPU ? "the CPU" : "CUDA device 0");
  printf("library: %s\n", tlrt_build_info());

  /* Parameters (PyTorch's nn.Linear initialisation) and zeroed Adam moments. */
  TRY(tlrt_tape_new(dev, &t));
  for (k = 0; k < NPARAM; ++k) {
    const uint64_t n = param_size(k);
    const double bound = 1.0 / sqrt((double)kFanIn[k]);
    float *w = (float *)malloc(n * sizeof *w);
    uint64_t j;
    if (!w) {
      fprintf(stderr, "digits_mlp: out of host memory\n");
      goto done;
    }
    for (j = 0; j < n; ++j) w[j] = (float)((2.0 * rng_uniform(&seed) - 1.0) * bound);
    st = tlrt_buffer_from_f32(dev, w, n, &P[k]);
    free(w);
    TRY(st);
    TRY(tlrt_buffer_zeros(dev, n, &M[k]));
    TRY(tlrt_buffer_zeros(dev, n, &V[k]));
  }

  for (epoch = 1; epoch <= epochs; ++epoch) {
    const double te = now_s();
    double loss_sum = 0.0, train_acc = 0.0;
    uint32_t nb = 0, off;
    shuffle(train, ntrain, &seed);
    for (off = 0; off < ntrain; off += BATCH) {
      const uint64_t b = ntrain - off < BATCH ? ntrain - off : BATCH;
      uint64_t ids[NPARAM], logits, loss;
      float lv = 0.0f;
      TRY(batch_upload(&ds, train + off, b, dev, xs, ys, &xb));
      TRY(forward(t, P, 1, xb, b, ids, &logits));
      TRY(tlrt_tape_cross_entropy(t, logits, ys, &loss));
      TRY(tlrt_tape_backward(t, loss));
      TRY(tlrt_tape_value(t, loss, &lossb));
      TRY(tlrt_buffer_to_f32(lossb, &lv, 1));
      for (k = 0; k < NPARAM; ++k) TRY(tlrt_tape_grad(t, ids[k], &G[k]));
      TRY(tlrt_tape_reset(t));
      ++step;
      for (k = 0; k < NPARAM; ++k) {
        TRY(tlrt_adam_step(P[k], G[k], M[k], V[k], step, kLr, kBeta1, kBeta2, kEps, 0.0, false));
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
    TRY(accuracy(t, P, &ds, train, ntrain, dev, xs, ys, host, &train_acc));
    TRY(accuracy(t, P, &ds, test, ntest, dev, xs, ys, host, &test_acc));
    printf("epoch %3d  loss %.4f  train acc %6.2f%%  test acc %6.2f%%  %.3f s\n", epoch,
           loss_sum / nb, train_acc, test_acc, now_s() - te);
    fflush(stdout);
  }
  printf("final test accuracy: %.2f%% (%u images; target >= %.0f%%), %.1f s in all\n", test_acc,
         ntest, target, now_s() - t0);
  if (test_acc >= target) {
    rc = 0;
  } else {
    fprintf(stderr, "digits_mlp: test accuracy %.2f%% is below the %.0f%% target\n", test_acc,
            target);
  }

done:
  for (k = 0; k < NPARAM; ++k) {
    tlrt_buffer_free(P[k]);
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
