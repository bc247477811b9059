/* libtorchlean_rt: fused optimizer steps (SGD with momentum, Adam, AdamW).
 *
 * IN PLACE. These are the only functions of the library that modify their arguments (DESIGN
 * section 2): one call updates the parameter buffer and the optimizer-state buffers in place, so a
 * training loop allocates nothing per step. Nothing else is allocated either (no output buffer, no
 * scratch), on either backend, except by tlrt_clip_grad_norm (which returns the norm) and by the
 * CUDA side of tlrt_clip_grad_norm and tlrt_adam_step_multi (a small table of the buffers, in
 * scratch of the stream-ordered pool); on CUDA a step is queued on the library stream like every
 * other op (the call does not wait for it).
 *
 * Buffers: param, grad and the state buffers must all have the same number of elements and live on
 * the same device, and must be distinct handles (param passed again as grad, or a state buffer
 * passed twice, is TLRT_ERR_INVALID_ARGUMENT: an in-place update reading its own output is never
 * what the caller meant). grad is only read. Empty buffers (0 elements) are fine: the call
 * validates its arguments and does nothing. Updating a buffer while another thread reads or
 * writes it is a data race (the caller orders them); steps on different buffers may run
 * concurrently from different threads.
 *
 * The caller owns the state: it creates the state buffers (tlrt_buffer_zeros: PyTorch's state
 * starts at zero), passes the same ones at every step with step = 1, 2, 3, ..., and keeps them (or
 * downloads them to checkpoint). step is the 1-based number of the step being taken (PyTorch's
 * state["step"] after its increment).
 *
 * DEFINITIONS. PyTorch's update formulas (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW,
 * version 2.x, with maximize = False, amsgrad = False), evaluated per element i in IEEE binary32
 * with one fixed order of operations on both backends: every operation below is ONE correctly
 * rounded binary32 operation (the square root and the division included), evaluated in the order
 * written, with no contraction; fma(a, b, c) = a * b + c with a single rounding. The host scalars
 * (double) follow the host-scalar rule of torchlean_rt.h (NaN, +-inf, or a finite value that
 * rounds to +-inf in float32, is TLRT_ERR_INVALID_ARGUMENT; there is no exception here) and are
 * rounded once to float32 (written f32(.)); where a scalar is a function of several arguments it
 * is computed in double on the host, once per call, then rounded once:
 *
 * SGD (tlrt_sgd_step), with lr = f32(lr), mu = f32(momentum), wd = f32(weight_decay),
 * omd = f32(1 - dampening):
 *   g = grad[i]
 *   if wd != 0:        g = fma(wd, p[i], g)                       (L2 penalty: g + wd * p)
 *   if mu != 0:        b = (step == 1) ? g : fma(omd, g, mu * buf[i])
 *                      buf[i] = b                      (step 1: PyTorch's buffer = clone(g))
 *                      d = nesterov ? fma(mu, b, g) : b
 *   else:              d = g
 *   p[i] = fma(-lr, d, p[i])
 *
 * Adam / AdamW (tlrt_adam_step), with b1 = f32(beta1), b2 = f32(beta2), omb1 = f32(1 - beta1),
 * omb2 = f32(1 - beta2), eps = f32(eps), and PyTorch's bias corrections computed in double on the
 * host (pow in double: there is no float32 powf in the definition):
 *   step_size = f32(lr / (1 - beta1^step)),   bc2_sqrt = f32(sqrt(1 - beta2^step))
 *   wd = f32(weight_decay) (Adam),            decay = f32(-(lr * weight_decay)) (AdamW)
 *   p = param[i], g = grad[i]
 *   Adam  (decoupled == false), if wd != 0:     g = fma(wd, p, g)          (L2 penalty)
 *   AdamW (decoupled == true),  if decay != 0:  p = fma(decay, p, p)       (p * (1 - lr * wd))
 *   m[i]  = fma(omb1, g, b1 * m[i])
 *   v[i]  = fma(omb2, g * g, b2 * v[i])
 *   denom = sqrt(v[i]) / bc2_sqrt + eps
 *   param[i] = fma(-step_size, m[i] / denom, p)
 * which is PyTorch's p -= step_size * m / (sqrt(v) / bc2_sqrt + eps). Differences from PyTorch's
 * eager float32 kernels are rounding-level only: PyTorch writes m as lerp(m, g, 1 - beta1) and the
 * AdamW decay as p * f32(1 - lr * wd) (here one rounding of p - lr * wd * p, which keeps the low
 * bits of a small lr * wd); its fused CUDA kernel computes the same quantities in a different
 * order. (Upstream TorchLean's fused step used the textbook (m / bc1) / (sqrt(v / bc2) + eps).)
 *
 * NUMERIC CLASS: exact. Every operation is a correctly rounded IEEE binary32 operation in the
 * order above and the scalars come from the host, so the CPU and CUDA backends produce bitwise
 * identical param and state buffers, every step (the parity suite compares them bit for bit;
 * NaN payloads are unspecified). tlrt_set_deterministic changes nothing. Against a float64
 * evaluation of PyTorch's formulas on the same float32 inputs, one step is within a few units of
 * 2^-24 relative to the magnitudes involved (tests/unit/test_optim.cpp checks this per step and
 * over trajectories).
 *
 * SPECIAL VALUES propagate as in PyTorch: a NaN in grad or state makes that element's param (and
 * state) NaN; an infinite gradient gives Adam m = +-inf, v = +inf and param NaN (inf / inf); with
 * eps = 0 an element whose m and v are both 0 becomes NaN (0 / 0), as in PyTorch. No argument is
 * checked for finiteness element by element. */
#ifndef TLRT_OPTIM_H
#define TLRT_OPTIM_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One SGD step, in place (DEFINITIONS above): updates param, and momentum_buf when mu != 0.
 * param, grad and momentum_buf have the same size n and live on one device.
 * momentum_buf: the momentum buffer (n elements), required (non-NULL) when mu = f32(momentum) != 0
 * and NULL when mu == 0 (a buffer that would silently not be updated is refused). At step 1 its
 * contents are not read (it is set to the gradient, as PyTorch creates it), so it may be created
 * with any values. step: 1-based step number; only step == 1 versus step > 1 matters here.
 * Scalars: lr >= 0, momentum >= 0, weight_decay >= 0, dampening any finite value; each under the
 * host-scalar rule, finite and finite when rounded to float32 (then so is 1 - dampening);
 * nesterov requires momentum > 0 and dampening == 0 (PyTorch's rule).
 * Errors: TLRT_ERR_NULL_ARGUMENT (param, grad; momentum_buf when mu != 0);
 * TLRT_ERR_RELEASED; TLRT_ERR_SHAPE (grad or momentum_buf not the size of param);
 * TLRT_ERR_DEVICE_MISMATCH; TLRT_ERR_INVALID_ARGUMENT (a scalar outside its domain, step == 0,
 * nesterov without momentum or with dampening, momentum_buf given with mu == 0, the same
 * handle passed twice); TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. On failure nothing is modified. */
TLRT_API tlrt_status tlrt_sgd_step(tlrt_buffer *param, const tlrt_buffer *grad,
                                   tlrt_buffer *momentum_buf, uint64_t step, double lr,
                                   double momentum, double dampening, double weight_decay,
                                   bool nesterov);

/* One Adam (decoupled == false) or AdamW (decoupled == true) step, in place (DEFINITIONS above):
 * updates param, m (first moment, PyTorch's exp_avg) and v (second moment, exp_avg_sq).
 * param, grad, m and v have the same size n and live on one device; m and v start as zeros.
 * step: 1-based step number (>= 1), used for the bias corrections.
 * Scalars: lr >= 0; 0 <= beta1 < 1; 0 <= beta2 < 1; eps >= 0; weight_decay >= 0; each under the
 * host-scalar rule, finite and finite in float32, and step_size = lr / (1 - beta1^step) must be finite in float32 (beta1 very
 * close to 1 with a large lr could overflow it). PyTorch's defaults: lr = 1e-3, betas = (0.9,
 * 0.999), eps = 1e-8, weight_decay = 0 (Adam) or 1e-2 (AdamW).
 * Errors: TLRT_ERR_NULL_ARGUMENT (param, grad, m, v); TLRT_ERR_RELEASED; TLRT_ERR_SHAPE (grad, m
 * or v not the size of param); TLRT_ERR_DEVICE_MISMATCH; TLRT_ERR_INVALID_ARGUMENT (a scalar
 * outside its domain, step == 0, the same handle passed twice); TLRT_ERR_CUDA;
 * TLRT_ERR_DEVICE_LOST. On failure nothing is modified. */
TLRT_API tlrt_status tlrt_adam_step(tlrt_buffer *param, const tlrt_buffer *grad, tlrt_buffer *m,
                                    tlrt_buffer *v, uint64_t step, double lr, double beta1,
                                    double beta2, double eps, double weight_decay, bool decoupled);

/* tlrt_adam_step for a whole model in one call: for t = 0 .. count - 1, in any order,
 *   tlrt_adam_step(params[t], grads[t], m[t], v[t], step, lr, beta1, beta2, eps,
 *                  weight_decays[t], decoupled)
 * with the DEFINITIONS above, so the results are BIT FOR BIT those of the count single calls, on
 * both backends (the scalars are computed once, by the same host code, and every element runs
 * the same per-element function). PyTorch's fused / foreach Adam and AdamW over a parameter list
 * (torch.optim.AdamW(params, fused=True)), with one weight decay per tensor as parameter groups
 * give it.
 * params, grads, m, v: count handles each (the count first, as tlrt_clip_grad_norm takes it) of
 * float32 buffers, all on one device; params[t], grads[t], m[t] and v[t] have the same size n_t
 * (sizes may differ between tensors; an empty tensor is validated and left alone). Every handle
 * appears once across the four arrays (a buffer passed as params[0] and again as m[3], or twice
 * in grads, is TLRT_ERR_INVALID_ARGUMENT). grads are only read.
 * weight_decays: count host doubles, tensor t's weight_decay, each under tlrt_adam_step's rule
 * (the host-scalar rule and >= 0; for AdamW, lr * weight_decays[t] finite in float32).
 * step, lr, beta1, beta2, eps, decoupled: as in tlrt_adam_step (one value for every tensor).
 * count == 0: the arrays may be NULL; the scalars are validated and nothing else happens.
 * CUDA: one launch whatever the count: the tensors are cut into chunks of 16384 elements, one
 * block per chunk, its tensor found by a binary search of a table of (pointers, size, first chunk,
 * weight decay), 56 bytes per tensor, uploaded through pinned staging (no host wait) into scratch
 * from the stream-ordered pool; per element the bytes of tlrt_adam_step (28). CPU: the tensors in
 * order, each tlrt_adam_step's loop.
 * Errors: TLRT_ERR_NULL_ARGUMENT (params, grads, m, v or weight_decays NULL while count > 0; an
 * entry of the arrays NULL); TLRT_ERR_STALE_HANDLE; TLRT_ERR_RELEASED; TLRT_ERR_DTYPE (an entry
 * not float32); TLRT_ERR_DEVICE_MISMATCH (entries on different devices); TLRT_ERR_SHAPE (grads[t],
 * m[t] or v[t] not the size of params[t]); TLRT_ERR_INVALID_ARGUMENT (a handle twice across the
 * four arrays; a scalar or weight_decays[t] outside its domain; step == 0);
 * TLRT_ERR_OUT_OF_MEMORY (host memory, or the CUDA table's scratch); TLRT_ERR_CUDA;
 * TLRT_ERR_DEVICE_LOST. On failure nothing is modified.
 * NUMERIC CLASS: exact, as tlrt_adam_step. */
TLRT_API tlrt_status tlrt_adam_step_multi(uint64_t count, tlrt_buffer *const *params,
                                          const tlrt_buffer *const *grads, tlrt_buffer *const *m,
                                          tlrt_buffer *const *v, const double *weight_decays,
                                          uint64_t step, double lr, double beta1, double beta2,
                                          double eps, bool decoupled);

/* Gradient clipping by the global L2 norm, in place: torch.nn.utils.clip_grad_norm_(grads,
 * max_norm) with norm_type = 2 and error_if_nonfinite = False, in one pass of the device and
 * without a host synchronisation (the norm is never read by the host; the scale is read on the
 * device).
 *   S     = the sum over every element x of every buffer of x^2, in double (below)
 *   norm  = f32(sqrt(S))                                   (sqrt in double, correctly rounded)
 *   coef  = f32(max_norm) / (norm + f32(1e-6))             (binary32 addition and division)
 *   coef  = min(coef, 1), a NaN coef kept                  (torch.clamp(max=1.0))
 *   every element of every buffer: x = x * coef            (binary32 multiply; skipped on the
 *                                                           device when coef == 1: x * 1 == x)
 * *total_norm is a fresh 1-element float32 buffer holding norm, on the device of the buffers.
 * A NaN anywhere makes norm NaN and every element NaN; an infinite element (and no NaN) makes
 * norm +inf, coef 0 and the buffers 0 or NaN (inf * 0), as in PyTorch.
 * ORDER (deterministic, the same on both backends, bit for bit): each buffer is cut into chunks
 * of 4096 consecutive elements; a chunk's value is the double sum of 256 lanes, lane t folding
 * x[t]^2, x[t + 256]^2, ... in order, then pairwise halving (h = 128, 64, .., 1). Squares of
 * float32 values are exact in double. The chunk values of all buffers, in argument order, are
 * reduced by the same 256 lanes and halving into S. S is within about 2^-44 S of the exact sum
 * (far below float32's resolution), so norm is the correctly rounded float32 norm except in
 * rare ties; PyTorch's foreach path (float32 per-tensor norms) differs from it by a few ulps.
 * CUDA: three launches whatever the count (the sums of all chunks, the finish, the scale) and
 * one upload of a table of (pointer, size) pairs through pinned staging; scratch of 8 bytes per
 * chunk plus 24 per buffer from the stream-ordered pool.
 * grads: count handles (the count first, as tlrt_safetensors_save takes it) of float32 buffers
 * on one device, all distinct; empty buffers count for
 * nothing. count == 0 (grads may then be NULL) yields norm +0 in a buffer on the CPU (PyTorch:
 * tensor(0.)). max_norm: the host-scalar rule (finite, and finite in float32) and >= 0.
 * Errors: TLRT_ERR_NULL_ARGUMENT (grads when count > 0, an entry of grads, total_norm);
 * TLRT_ERR_STALE_HANDLE; TLRT_ERR_RELEASED; TLRT_ERR_DTYPE (an entry not float32);
 * TLRT_ERR_DEVICE_MISMATCH (entries on different devices); TLRT_ERR_INVALID_ARGUMENT (max_norm
 * outside its domain; the same handle twice); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA;
 * TLRT_ERR_DEVICE_LOST. On failure *total_norm is NULL and no buffer is modified. */
TLRT_API tlrt_status tlrt_clip_grad_norm(uint64_t count, tlrt_buffer *const *grads,
                                         double max_norm, tlrt_buffer **total_norm);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_OPTIM_H */
