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
#define DIGITS_PROG "digits_mlp"

#include "digits_common.h"

enum { D_IN = DIGITS_FEATURES, D_HID = 128, D_OUT = DIGITS_CLASSES, BATCH = 32, NPARAM = 4 };
static const double kLr = 2e-3, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;

/* ---- model ---------------------------------------------------------------------------------- */

/* Parameters in PyTorch's layout: W1 (128, 64), b1 (128), W2 (10, 128), b2 (10). */
static const uint64_t kDims[NPARAM][2] = {{D_HID, D_IN}, {D_HID, 0}, {D_OUT, D_HID}, {D_OUT, 0}};
static const uint32_t kRank[NPARAM] = {2, 1, 2, 1};
static const uint64_t kFanIn[NPARAM] = {D_IN, D_IN, D_HID, D_HID};

static uint64_t param_size(int k) { return kDims[k][0] * (kRank[k] == 2 ? kDims[k][1] : 1); }

typedef struct {
  tlrt_buffer *P[NPARAM]; /* the parameters (kept by the program, updated in place) */
  uint64_t ids[NPARAM];   /* their leaves in the current recording */
} Mlp;

/* digits_forward: the four parameters as leaves (with gradients when train), x as a leaf
 * without, then linear -> relu -> linear. */
static tlrt_status forward(void *model, tlrt_tape *t, tlrt_buffer *xb, uint64_t b, int train,
                           uint64_t *logits) {
  Mlp *m = (Mlp *)model;
  tlrt_status st = TLRT_OK;
  const uint64_t xdims[2] = {b, D_IN};
  uint64_t x, h, a;
  int k;
  for (k = 0; k < NPARAM; ++k)
    TRY(tlrt_tape_leaf(t, m->P[k], kDims[k], kRank[k], train != 0, &m->ids[k]));
  TRY(tlrt_tape_leaf(t, xb, xdims, 2, false, &x));
  TRY(tlrt_tape_linear(t, x, m->ids[0], m->ids[1], &h));
  TRY(tlrt_tape_relu(t, h, &a));
  TRY(tlrt_tape_linear(t, a, m->ids[2], m->ids[3], logits));
done:
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
  uint32_t *order = NULL, *train, *test, ntrain, ntest;
  float *xs = NULL, *host = NULL;
  uint64_t *ys = NULL, seed = 2026, step = 0;
  tlrt_tape *t = NULL;
  Mlp m = {{0}, {0}};
  tlrt_buffer *M[NPARAM] = {0}, *V[NPARAM] = {0}, *G[NPARAM] = {0};
  tlrt_buffer *xb = NULL, *lossb = NULL;
  double test_acc = 0.0, t0 = now_s();

  if ((rc = digits_args(argc, argv, &path, &dev, &epochs, &target)) != 0) return rc;
  rc = 1;
  if (read_digits(path, &ds) != 0) return 1;

  /* Fixed-seed shuffle, 80/20 split (digits_common.h). */
  xs = (float *)malloc((size_t)DIGITS_EVAL_BATCH * D_IN * sizeof *xs);
  ys = (uint64_t *)malloc(DIGITS_EVAL_BATCH * sizeof *ys);
  host = (float *)malloc((size_t)DIGITS_EVAL_BATCH * D_OUT * sizeof *host);
  if (!xs || !ys || !host) {
    fprintf(stderr, "digits_mlp: out of host memory\n");
    goto done;
  }
  if (digits_split(&ds, &seed, &order, &ntrain) != 0) goto done;
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
    TRY(upload_uniform(dev, n, 1.0 / sqrt((double)kFanIn[k]), &seed, &m.P[k]));
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
      uint64_t logits, loss;
      float lv = 0.0f;
      TRY(batch_upload(&ds, train + off, b, dev, xs, ys, &xb));
      TRY(forward(&m, t, xb, b, 1, &logits));
      TRY(tlrt_tape_cross_entropy(t, logits, ys, &loss));
      TRY(tlrt_tape_backward(t, loss));
      TRY(tlrt_tape_value(t, loss, &lossb));
      TRY(tlrt_buffer_to_f32(lossb, &lv, 1));
      for (k = 0; k < NPARAM; ++k) TRY(tlrt_tape_grad(t, m.ids[k], &G[k]));
      TRY(tlrt_tape_reset(t));
      ++step;
      for (k = 0; k < NPARAM; ++k) {
        TRY(tlrt_adam_step(m.P[k], G[k], M[k], V[k], step, kLr, kBeta1, kBeta2, kEps, 0.0, false));
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
    TRY(digits_accuracy(forward, &m, t, &ds, train, ntrain, dev, xs, ys, host, &train_acc));
    TRY(digits_accuracy(forward, &m, t, &ds, test, ntest, dev, xs, ys, host, &test_acc));
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
