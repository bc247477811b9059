/* digits_cnn: train a small convolutional network on scikit-learn's handwritten digits with
 * libtorchlean_rt (C99).
 *
 *   python3 examples/export_digits.py digits.bin     (once: the data ship inside scikit-learn)
 *   build/examples/digits_cnn [--cuda] [--epochs N] [--target PERCENT] [digits.bin]
 *
 * The data and split are digits_mlp's (digits_common.h): 1797 images of 8x8 pixels in [0, 1],
 * shuffled with the same fixed seed and split 80/20 into the same 1437 training and 360 test
 * images. Each image is one channel of 8x8. Training batches are augmented: each image is
 * translated by -1, 0 or +1 pixels along each axis (drawn from the fixed seed; the vacated border
 * is 0, the background), which lifts the test accuracy by about one point on this small set.
 * The model (PyTorch's layouts and default initialisation: weights and biases uniform in
 * +-1/sqrt(fan_in)):
 *   conv 3x3, 1 -> 32 channels, padding 1, ReLU      (N, 32, 8, 8)
 *   conv 3x3, 32 -> 64 channels, padding 1, ReLU     (N, 64, 8, 8)
 *   max pool 2x2, stride 2                           (N, 64, 4, 4)
 *   flatten, linear 1024 -> 10                       (N, 10)
 * cross-entropy loss on mini-batches of 32, Adam (betas 0.9 / 0.999, eps 1e-8; the learning rate
 * 3e-3 decays along a half cosine to 1e-4 over the run) with the fused in-place tlrt_adam_step.
 * Each step records the forward pass on the autograd tape (tlrt_tape_conv2d, tlrt_tape_relu,
 * tlrt_tape_maxpool2d, tlrt_tape_reshape, tlrt_tape_linear), runs the backward pass, takes the six
 * parameter gradients, resets the tape and updates the parameters in place.
 *
 * It runs on the CPU by default; --cuda runs everything on CUDA device 0 and fails loudly (status
 * name and message, exit 1) in a build without CUDA or on a machine without a GPU. It prints one
 * line per epoch (mean training loss, training and test accuracy, seconds) and the final test
 * accuracy, and exits 0 when that is at least the target (--target, default 97%), 1 otherwise
 * (and on any error). */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c99 */
#define DIGITS_PROG "digits_cnn"

#include "digits_common.h"

enum { SIDE = 8, C1 = 32, C2 = 64, POOLED = C2 * (SIDE / 2) * (SIDE / 2), NPARAM = 6 };

/* ---- model ---------------------------------------------------------------------------------- */

/* digits_forward: the six parameters as leaves (with gradients when train), the batch as a leaf
 * (b, 1, 8, 8) without, then conv -> relu -> conv -> relu -> max pool -> flatten -> linear. */
static tlrt_status forward(void *model, tlrt_tape *t, tlrt_buffer *xb, uint64_t b, int train,
                           uint64_t *logits) {
  DigitsParams *m = (DigitsParams *)model;
  tlrt_status st = TLRT_OK;
  const uint64_t xdims[4] = {b, 1, SIDE, SIDE}, flat[2] = {b, POOLED};
  uint64_t x, c1, a1, c2, a2, p, f;
  TRY(digits_leaves(m, t, train));
  TRY(tlrt_tape_leaf(t, xb, xdims, 4, false, &x));
  TRY(tlrt_tape_conv2d(t, x, m->ids[0], m->ids[1], 1, 1, 1, 1, 1, 1, 1, &c1));
  TRY(tlrt_tape_relu(t, c1, &a1));
  TRY(tlrt_tape_conv2d(t, a1, m->ids[2], m->ids[3], 1, 1, 1, 1, 1, 1, 1, &c2));
  TRY(tlrt_tape_relu(t, c2, &a2));
  TRY(tlrt_tape_maxpool2d(t, a2, 2, 2, 2, 2, 0, 0, &p));
  TRY(tlrt_tape_reshape(t, p, flat, 2, &f));
  TRY(tlrt_tape_linear(t, f, m->ids[4], m->ids[5], logits));
done:
  return st;
}

/* batch_upload with augmentation: each image translated by (dy, dx) in {-1, 0, 1}^2 drawn from
 * *seed, pixels shifted in from outside the image are 0. */
static tlrt_status shifted_batch_upload(const Dataset *ds, const uint32_t *idx, uint64_t b,
                                        tlrt_device dev, uint64_t *seed, float *xs, uint64_t *ys,
                                        tlrt_buffer **xb) {
  uint64_t i;
  int r, c;
  for (i = 0; i < b; ++i) {
    const float *src = ds->x + (uint64_t)idx[i] * DIGITS_FEATURES;
    const int dy = (int)(rng_next(seed) % 3) - 1, dx = (int)(rng_next(seed) % 3) - 1;
    for (r = 0; r < SIDE; ++r)
      for (c = 0; c < SIDE; ++c) {
        const int sr = r - dy, sc = c - dx;
        xs[i * DIGITS_FEATURES + r * SIDE + c] =
            sr >= 0 && sr < SIDE && sc >= 0 && sc < SIDE ? src[sr * SIDE + sc] : 0.0f;
      }
    ys[i] = ds->y[idx[i]];
  }
  return tlrt_buffer_from_f32(dev, xs, b * DIGITS_FEATURES, xb);
}

int main(int argc, char **argv) {
  static const DigitsModel spec = {
      "CNN conv3x3(1-32)-conv3x3(32-64)-maxpool2-linear(1024-10), Adam lr 0.003 (cosine to "
      "0.0001)",
      NPARAM,
      {{C1, 1, 3, 3}, {C1}, {C2, C1, 3, 3}, {C2}, {DIGITS_CLASSES, POOLED}, {DIGITS_CLASSES}},
      {4, 1, 4, 1, 2, 1},
      {9, 9, C1 * 9, C1 * 9, POOLED, POOLED},
      forward,
      shifted_batch_upload,
      32,                           /* batch */
      3e-3, 1e-4, 0.9, 0.999, 1e-8, /* half-cosine rate 3e-3 -> 1e-4; Adam's betas and eps */
      97.0};                        /* target, percent */
  return digits_main(argc, argv, &spec);
}
