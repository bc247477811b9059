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

enum { D_IN = DIGITS_FEATURES, D_HID = 128, D_OUT = DIGITS_CLASSES, NPARAM = 4 };

/* ---- model ---------------------------------------------------------------------------------- */

/* digits_forward: the four parameters as leaves (with gradients when train), x as a leaf
 * without, then linear -> relu -> linear. */
static tlrt_status forward(void *model, tlrt_tape *t, tlrt_buffer *xb, uint64_t b, int train,
                           uint64_t *logits) {
  DigitsParams *m = (DigitsParams *)model;
  tlrt_status st = TLRT_OK;
  const uint64_t xdims[2] = {b, D_IN};
  uint64_t x, h, a;
  TRY(digits_leaves(m, t, train));
  TRY(tlrt_tape_leaf(t, xb, xdims, 2, false, &x));
  TRY(tlrt_tape_linear(t, x, m->ids[0], m->ids[1], &h));
  TRY(tlrt_tape_relu(t, h, &a));
  TRY(tlrt_tape_linear(t, a, m->ids[2], m->ids[3], logits));
done:
  return st;
}

/* digits_train_batch: the training batch as it is (no augmentation). */
static tlrt_status digits_plain_batch(const Dataset *ds, const uint32_t *idx, uint64_t b,
                                      tlrt_device dev, uint64_t *seed, float *xs, uint64_t *ys,
                                      tlrt_buffer **xb) {
  (void)seed;
  return batch_upload(ds, idx, b, dev, xs, ys, xb);
}

int main(int argc, char **argv) {
  static const DigitsModel spec = {
      "MLP 64-128-10, Adam lr 0.002",
      NPARAM,
      {{D_HID, D_IN}, {D_HID}, {D_OUT, D_HID}, {D_OUT}},
      {2, 1, 2, 1},
      {D_IN, D_IN, D_HID, D_HID},
      forward,
      digits_plain_batch,
      32,                           /* batch */
      2e-3, 2e-3, 0.9, 0.999, 1e-8, /* constant rate; Adam's betas and eps */
      95.0};                        /* target, percent */
  return digits_main(argc, argv, &spec);
}
