/* libtorchlean_rt: the autograd tape (reverse-mode automatic differentiation).
 *
 * A tlrt_tape records a computation as a list of NODES, in the order the host records them, and
 * later walks that list backwards to compute gradients. It is written against the public headers
 * only: every recorded op calls the tlrt_* function of the same name (tlrt_tape_X records tlrt_X),
 * and every backward rule is a composition of public tlrt_* calls (tlrt_add, tlrt_relu_bwd,
 * tlrt_matmul, ...). So a tape gives the same values as the ops themselves, on the tape's device.
 *
 * NODES. A node is named by a uint64_t id (no handle to free). Ids are opaque: an id names its
 * tape and the tape's reset generation besides the node's position, so an id of another tape, or
 * one recorded before a tlrt_tape_reset, fails with TLRT_ERR_STALE_HANDLE instead of naming some
 * other node (detection fails only for ids 65536 resets old, or of a tape created 65534 tapes
 * apart). Nodes are numbered in recording order: the low 32 bits of an id are its index, 0 for
 * the first node after tlrt_tape_new or tlrt_tape_reset, 1 for the next, and so on (at most
 * 2^32 - 1 nodes; more fail with TLRT_ERR_OVERFLOW). A node has
 *  - a VALUE: a tlrt_buffer on the tape's device, never modified after recording;
 *  - a SHAPE: dims[0..rank), rank <= TLRT_TAPE_MAX_RANK (8), row-major, outermost first; rank 0
 *    is a scalar (one element). The element count (the product of dims) always equals the size of
 *    the value. Shapes let every recording call check its arguments (matmul of (m, n) by (n, p))
 *    and spare the host from passing sizes: where the op takes sizes (rows, cols, m, n, p ...),
 *    the recording call reads them from the nodes' shapes and takes only the other parameters
 *    (scalars, flags, axes, index lists, target shapes);
 *  - REQUIRES_GRAD: set by the host for a leaf; for any other node, true when at least one input
 *    node requires it. Backward rules run only for nodes that require a gradient, and only
 *    contributions to such nodes are computed.
 * A LEAF is a host buffer entered with tlrt_tape_leaf (a parameter, an input, a target). Every
 * other node is the output of a recording call. Leaves must be entered again after each
 * tlrt_tape_reset: parameters are buffers that the host keeps (and updates with an optimizer step)
 * between steps; the tape holds them only from tlrt_tape_leaf to the next reset or free (or, once
 * released, until no backward rule reads them).
 *
 * A TRAINING STEP:
 *     tlrt_tape_leaf(t, W, dims, 2, true, &w);  tlrt_tape_leaf(t, X, ...false, &x); ...
 *     tlrt_tape_linear(t, x, w, b, &h); tlrt_tape_relu(t, h, &a); ...; tlrt_tape_mse_loss(.., &loss);
 *     tlrt_tape_backward(t, loss);
 *     tlrt_tape_grad(t, w, &dW);  ... optimizer step on W with dW ...;  tlrt_buffer_free(dW);
 *     tlrt_tape_reset(t);
 *
 * BACKWARD. tlrt_tape_backward seeds the gradient of a node with one element with 1;
 * tlrt_tape_backward_seed with a buffer of the node's size. Nodes are then visited from that node
 * down to id 0 (reverse recording order, so every consumer of a node is visited before the node);
 * each visited node that requires a gradient and received one runs its backward rule, and the
 * contributions it produces for its inputs are summed with tlrt_add (a node used twice, or reached
 * through two paths, receives the sum of its contributions; the order of that sum follows the
 * reverse recording order and is deterministic). The gradient of an intermediate node is released
 * as soon as it has been propagated; the gradients of leaves are kept until reset or free.
 * Nodes recorded after the starting node take no part.
 * Calling backward again without a reset is allowed and ACCUMULATES: the new leaf gradients are
 * added to those already held (as PyTorch's .backward() without zero_grad). tlrt_tape_backward
 * and tlrt_tape_backward_seed keep what the rules read (below), so a graph may be differentiated
 * several times (with different seeds); tlrt_tape_backward_ex with TLRT_TAPE_BACKWARD_FREE frees
 * it as it goes (PyTorch's retain_graph=False).
 * A backward is all or nothing: if any call inside it fails, the leaf gradients are those held
 * before the call, every buffer the failed call allocated is freed, and the status and message
 * (prefixed with "tlrt_tape_backward: ") are those of the op that failed. (The one exception is
 * the freeing backward: the rules that ran before the failure have dropped what they read.)
 *
 * MEMORY. A node's value is held for two readers: the HOST, until it calls tlrt_tape_release on
 * the node (or resets or frees the tape), and the BACKWARD RULES of the nodes recorded from it.
 * Each recording call declares, by rule, which values its rule reads, and the node keeps its own
 * references to exactly those (nothing when no input requires a gradient: the rule never runs):
 *   nothing:   add, sub, axpy, neg, scale, dropout (the mask is recomputed from the key), the
 *              sums and means, every layout op, the gathers and scatters (their index lists are
 *              the node's workspace), average pooling;
 *   its input: abs, sqrt, inv, relu, clamp, exp, log, safe_log, sigmoid, tanh, softplus, gelu,
 *              silu, max pooling; max / min (both inputs); mul (b when a requires a gradient, a
 *              when b does); div (b, and its own output when b requires a gradient); matmul and
 *              bmm (b when a requires a gradient, a when b does); linear and linear_gelu (x and
 *              W, not b; pre as workspace); conv2d and conv (x and w, not b); layer_norm (x and
 *              gamma; mean and inv_std as workspace); rms_norm (x, gamma; inv_rms); the spectral
 *              convolution (x, w_re, w_im); cross_entropy_ignore (the logits; the labels and two
 *              floats per row as workspace);
 *   its output: softmax, log_softmax; reduce_max_axis0 / 1 (and its input); the selective scans
 *              (and their four inputs); flash_attention (and q, k, v; lse and the mask as
 *              workspace).
 * So a buffer is freed as soon as the host has released every node holding it and every rule
 * reading it has been freed (a reshape, or a dropout with p = 0, shares its input's buffer: the
 * memory goes with the last of them). Inner nodes of a composite (every node it records but
 * the last, whose id it returns) are released at once: only their rules' references keep them.
 * A host that releases each node after its last use, and differentiates with
 * TLRT_TAPE_BACKWARD_FREE, holds about what PyTorch's autograd holds: the activations saved for
 * backward, each freed as soon as its rule has run. Releasing a LEAF drops the tape's references
 * to the host's buffer once no rule reads it (the host's own references stay valid); its gradient
 * stays readable (tlrt_tape_grad). A rule that never runs (its node is not on the path of a
 * backward) keeps what it reads until reset.
 *
 * NUMERICS. Values are those of the recorded ops (their numeric classes, abi/tlrt_*.h). Gradients
 * are compositions of the ops' backward kernels and elementwise/reduction/product calls, each in
 * its own numeric class; a gradient is therefore "library" class when any matmul/bmm lies on its
 * path, and otherwise bitwise identical between the CPU and CUDA tapes (exact, shared math and
 * ordered reduction ops only; the parity suite checks this). No gradient depends on the
 * determinism switch beyond what the ops themselves state.
 *
 * ERRORS, for every tlrt_tape_* function (on failure every out-parameter is NULL / 0, nothing
 * leaks, the tape is unchanged, and tlrt_last_error() names the function, the argument and the
 * condition):
 *  - TLRT_ERR_NULL_ARGUMENT: tape, an out pointer, or a required array is NULL;
 *  - TLRT_ERR_STALE_HANDLE: a tape handle that was freed (or never was one); a node id of
 *    another tape or recorded before a reset (the message says which);
 *  - TLRT_ERR_INDEX: a node id of this tape and generation whose index is not < the number of
 *    nodes in the tape (the message gives the id, its index and the count), or an axis that is
 *    not < the rank;
 *  - TLRT_ERR_SHAPE: at RECORD time, shapes that the op cannot accept; the message names the
 *    recording call, the arguments and both shapes, e.g.
 *    "tlrt_tape_matmul: inner dimensions differ: argument a has shape (3, 4), argument b has
 *    shape (5, 2)";
 *  - TLRT_ERR_INVALID_ARGUMENT: rank > TLRT_TAPE_MAX_RANK; a host scalar outside the host-scalar
 *    rule of torchlean_rt.h or its op's domain (the op's check, with the op's exceptions);
 *    tlrt_tape_grad of a node that is not a leaf requiring a gradient;
 *  - TLRT_ERR_DEVICE_MISMATCH: a leaf or seed buffer on another device than the tape;
 *  - TLRT_ERR_DTYPE: a leaf or seed buffer of integer values;
 *  - TLRT_ERR_RELEASED: a leaf or seed buffer whose storage was released (also later, at an op or
 *    backward that reads a leaf released after it was recorded); a node released with
 *    tlrt_tape_release (or an inner node of a composite) passed to a recording call, to
 *    tlrt_tape_value or again to tlrt_tape_release; a backward whose path crosses a rule that a
 *    freeing backward has already run (the message names the node);
 *  - TLRT_ERR_BACKEND_UNAVAILABLE / TLRT_ERR_NO_DEVICE: tlrt_tape_new for CUDA in a build without
 *    CUDA / with no such device;
 *  - TLRT_ERR_OUT_OF_MEMORY, TLRT_ERR_CUDA, TLRT_ERR_DEVICE_LOST, TLRT_ERR_LIBRARY and the other
 *    codes of the recorded op, passed through with the op's message ("tlrt_tape_add: tlrt_add: ...").
 *
 * THREADING. A tape is NOT thread-safe: use one tape per thread (or serialise all calls on one
 * tape). Different tapes on different threads are independent, and may share leaf buffers (they
 * only read them).
 *
 * NOT RECORDED: the optimizer steps (they update parameters in place, outside the graph); the
 * plain transforms tlrt_rfft1d_packed / tlrt_irfft1d_packed (their packed layout has no use in a
 * graph; record the spectral convolution); transposed convolution, smooth max pooling, the N-D
 * pools and the single-gradient attention entry points (no recording call yet). */
#ifndef TLRT_TAPE_H
#define TLRT_TAPE_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tlrt_tape tlrt_tape;

/* Largest rank of a node's shape. */
#define TLRT_TAPE_MAX_RANK 8u
/* "No node": an optional bias (tlrt_tape_linear, tlrt_tape_conv2d, ...). Never a valid id. */
#define TLRT_TAPE_NONE UINT64_MAX

/* ---- lifetime ------------------------------------------------------------------------------- */

/* New empty tape whose nodes live on `device` (TLRT_DEVICE_CPU or TLRT_DEVICE_CUDA(ordinal)).
 * Errors: TLRT_ERR_NULL_ARGUMENT (out); TLRT_ERR_INVALID_ARGUMENT (malformed device);
 * TLRT_ERR_BACKEND_UNAVAILABLE (CUDA in a build without CUDA); TLRT_ERR_NO_DEVICE;
 * TLRT_ERR_OUT_OF_MEMORY. */
TLRT_API tlrt_status tlrt_tape_new(tlrt_device device, tlrt_tape **out);

/* Free the tape with every node value, saved workspace and gradient it holds (leaf buffers lose
 * the reference the tape took; the host's own references stay valid). NULL is a no-op. */
TLRT_API void tlrt_tape_free(tlrt_tape *tape);

/* tlrt_tape_free that reports misuse: TLRT_OK when the tape was freed or tape is NULL;
 * TLRT_ERR_STALE_HANDLE (and nothing done) when tape is not a live handle (freed already, or
 * never a tape). tlrt_tape_free of such a handle does nothing. */
TLRT_API tlrt_status tlrt_tape_free_checked(tlrt_tape *tape);

/* Drop every node (values, workspace, gradients); the tape is empty and ready for the next step,
 * the next node recorded has index 0, and the ids recorded so far become stale. Never fails for a
 * live tape.
 * Errors: TLRT_ERR_NULL_ARGUMENT. */
TLRT_API tlrt_status tlrt_tape_reset(tlrt_tape *tape);

/* *count = the number of nodes in the tape; *device = its device.
 * Errors: TLRT_ERR_NULL_ARGUMENT. */
TLRT_API tlrt_status tlrt_tape_node_count(const tlrt_tape *tape, uint64_t *count);
TLRT_API tlrt_status tlrt_tape_device(const tlrt_tape *tape, tlrt_device *device);

/* ---- leaves and reading nodes ------------------------------------------------------------------- */

/* Record a leaf: `buffer` (retained, NOT copied: the host must not release its storage while the
 * tape may still read it) with shape dims[0..rank). requires_grad says whether tlrt_tape_backward
 * computes its gradient. dims may be NULL when rank == 0 (a scalar).
 * Errors: TLRT_ERR_NULL_ARGUMENT (tape, buffer, dims with rank > 0, out);
 * TLRT_ERR_INVALID_ARGUMENT (rank > 8); TLRT_ERR_RELEASED; TLRT_ERR_DEVICE_MISMATCH (buffer not
 * on the tape's device); TLRT_ERR_SHAPE (product of dims != size of buffer, product computed
 * exactly); TLRT_ERR_OUT_OF_MEMORY. */
TLRT_API tlrt_status tlrt_tape_leaf(tlrt_tape *tape, tlrt_buffer *buffer, const uint64_t *dims,
                                    uint32_t rank, bool requires_grad, uint64_t *out);

/* *out = a NEW reference to the node's value (the caller frees it with tlrt_buffer_free).
 * Errors: TLRT_ERR_NULL_ARGUMENT; TLRT_ERR_STALE_HANDLE; TLRT_ERR_INDEX (node);
 * TLRT_ERR_RELEASED (the node was released: tlrt_tape_release, or an inner node of a
 * composite). */
TLRT_API tlrt_status tlrt_tape_value(const tlrt_tape *tape, uint64_t node, tlrt_buffer **out);

/* The host will no longer use `node`: neither read its value nor record with it (MEMORY above).
 * The tape drops its reference to the node's value at once; the buffer is freed as soon as no
 * backward rule that reads it remains (now, when none does). What still works on a released
 * node: tlrt_tape_shape, tlrt_tape_grad (a leaf's gradient), and backward from it or through it.
 * What fails with TLRT_ERR_RELEASED: recording with it (the message names the argument and the
 * node), tlrt_tape_value, and releasing it again (a repeated release is an error, not a no-op:
 * it is a host's double free). A reset makes the id stale as every other.
 * Errors: TLRT_ERR_NULL_ARGUMENT (tape); TLRT_ERR_STALE_HANDLE (a freed tape; an id of another
 * tape or from before a reset); TLRT_ERR_INDEX (node not in the tape); TLRT_ERR_RELEASED
 * (released already, or an inner node of a composite). Never allocates; on failure nothing
 * changes. */
TLRT_API tlrt_status tlrt_tape_release(tlrt_tape *tape, uint64_t node);

/* *out = a NEW reference to the accumulated gradient of a leaf that requires a gradient (same
 * size and shape as the leaf). A leaf that has received no gradient (no backward yet since the
 * last reset, or the leaf does not influence the node backward started from) gets a fresh buffer
 * of +0.0f, never NULL. Gradients of intermediate nodes are not kept (released once propagated).
 * Errors: TLRT_ERR_NULL_ARGUMENT; TLRT_ERR_INDEX (node); TLRT_ERR_INVALID_ARGUMENT (node is not a
 * leaf, or a leaf recorded with requires_grad = false); TLRT_ERR_OUT_OF_MEMORY (the zeros). */
TLRT_API tlrt_status tlrt_tape_grad(const tlrt_tape *tape, uint64_t node, tlrt_buffer **out);

/* The node's shape: dims[0..*rank) are written; dims must have room for TLRT_TAPE_MAX_RANK
 * values (entries from *rank on are left untouched). *requires_grad (optional, may be NULL) = the
 * node's requires_grad. Errors: TLRT_ERR_NULL_ARGUMENT (tape, dims, rank); TLRT_ERR_INDEX. On
 * failure *rank is 0. */
TLRT_API tlrt_status tlrt_tape_shape(const tlrt_tape *tape, uint64_t node, uint64_t *dims,
                                     uint32_t *rank, bool *requires_grad);

/* ---- backward ------------------------------------------------------------------------------ */

/* Backward from `node`, which must have exactly one element (any rank), seeded with 1.
 * See BACKWARD above (accumulates into leaf gradients; all or nothing).
 * Errors: TLRT_ERR_NULL_ARGUMENT; TLRT_ERR_INDEX; TLRT_ERR_SHAPE (node has != 1 element);
 * the codes of the ops the backward rules call. A node that does not require a gradient is
 * accepted and changes nothing. */
TLRT_API tlrt_status tlrt_tape_backward(tlrt_tape *tape, uint64_t node);

/* Backward from `node` seeded with `seed` (a buffer of the node's element count, on the tape's
 * device; read, not retained). Errors: as tlrt_tape_backward, plus TLRT_ERR_NULL_ARGUMENT (seed);
 * TLRT_ERR_RELEASED; TLRT_ERR_DEVICE_MISMATCH; TLRT_ERR_SHAPE (seed size != node's element
 * count; any element count is accepted for the node). */
TLRT_API tlrt_status tlrt_tape_backward_seed(tlrt_tape *tape, uint64_t node,
                                             const tlrt_buffer *seed);

/* Flags of tlrt_tape_backward_ex. TLRT_TAPE_BACKWARD_FREE: free the graph as the backward goes
 * (PyTorch's backward with retain_graph=False). */
#define TLRT_TAPE_BACKWARD_FREE 1u

/* Backward from `node` with flags: seed NULL is tlrt_tape_backward (node must have one element,
 * seeded with 1), a buffer is tlrt_tape_backward_seed (read, not retained). flags 0 is exactly
 * those calls. With TLRT_TAPE_BACKWARD_FREE, each rule drops what it reads (its references to
 * input and output values and its workspace, MEMORY above) right after it has run, so a saved
 * value is freed once the last rule reading it has run and the host has released its node; the
 * leaf gradients are accumulated as by tlrt_tape_backward, and nodes' values the host has not
 * released stay readable. Rules that do not run (not on the path from `node`) keep theirs.
 * A later backward whose path crosses a rule that has been freed fails with TLRT_ERR_RELEASED
 * before any rule runs (nothing changes); record the graph again after tlrt_tape_reset.
 * On a failure inside a freeing backward, the leaf gradients are those held before the call
 * (all or nothing), but the rules that ran before the failure stay freed.
 * Errors: as tlrt_tape_backward / tlrt_tape_backward_seed; TLRT_ERR_INVALID_ARGUMENT (a flag bit
 * other than TLRT_TAPE_BACKWARD_FREE); TLRT_ERR_RELEASED (also: a freed rule on the path). */
TLRT_API tlrt_status tlrt_tape_backward_ex(tlrt_tape *tape, uint64_t node,
                                           const tlrt_buffer *seed, uint32_t flags);

/* ---- recording: elementwise (abi/tlrt_elementwise.h) ------------------------------------------ */
/* Binary ops: a and b must have the SAME shape (rank and dims; no implicit broadcasting: record
 * tlrt_tape_broadcast_to first); the output has that shape. Gradients (g the output's):
 *   add: (g, g); sub: (g, -g); mul: (g b, g a); div: (g / b, -(g / b) * (a / b));
 *   max / min: tlrt_max_bwd / tlrt_min_bwd (ties split 0.5 g each; a NaN operand takes g);
 *   axpy (out = fma(c, b, a)): (g, c g). axpy's c has the op's domain (the host-scalar rule:
 *   TLRT_ERR_INVALID_ARGUMENT at record time if c is NaN, +-inf or rounds to +-inf). */
TLRT_API tlrt_status tlrt_tape_add(tlrt_tape *tape, uint64_t a, uint64_t b, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_sub(tlrt_tape *tape, uint64_t a, uint64_t b, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_mul(tlrt_tape *tape, uint64_t a, uint64_t b, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_div(tlrt_tape *tape, uint64_t a, uint64_t b, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_max(tlrt_tape *tape, uint64_t a, uint64_t b, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_min(tlrt_tape *tape, uint64_t a, uint64_t b, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_axpy(tlrt_tape *tape, uint64_t a, uint64_t b, double c,
                                    uint64_t *out);

/* Unary ops: the output has x's shape. Gradients: neg: -g; scale: c g (c rounded to float32);
 * abs, sqrt, inv, relu, clamp, exp, log, sigmoid, tanh, softplus, gelu, silu, safe_log: the op's
 * tlrt_<op>_bwd kernel (with its conventions: relu'(0) = 0, abs'(0) = 0, sqrt'(0) = 0, clamp
 * passes g strictly inside (lo, hi)); neg is the exact -g. scale's c, clamp's lo/hi (which may
 * be +-inf) and safe_log's eps have the op's domains under the host-scalar rule
 * (TLRT_ERR_INVALID_ARGUMENT at record time). */
TLRT_API tlrt_status tlrt_tape_neg(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_scale(tlrt_tape *tape, uint64_t x, double c, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_abs(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_sqrt(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_inv(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_relu(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_clamp(tlrt_tape *tape, uint64_t x, double lo, double hi,
                                     uint64_t *out);
TLRT_API tlrt_status tlrt_tape_exp(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_log(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_safe_log(tlrt_tape *tape, uint64_t x, double eps, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_sigmoid(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_tanh(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_softplus(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_gelu(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_silu(tlrt_tape *tape, uint64_t x, uint64_t *out);

/* dropout: y = x * mask / (1 - p) (inverted dropout, as torch.nn.functional.dropout in training
 * mode); x of any shape, output x's shape. p is a probability under the host-scalar rule, rounded
 * once to float32 (pf): p >= 0 and pf < 1, else TLRT_ERR_INVALID_ARGUMENT (a p just below 1 that
 * rounds to 1 is refused; -0 is 0). With n the element count and D the tape's device, element i
 * is kept iff u[i] < (float)(1 - pf), u[i] the value tlrt_rand_uniform(D, n, key) gives at i: the
 * mask is tlrt_bernoulli_mask(D, n, 1 - pf, key) (abi/tlrt_rng.h; 1 - pf computed in double), and
 * y[i] = x[i] * m[i] with m[i] = (float)(1 / (1 - pf)) (computed in double, rounded once) where
 * kept and +0 where dropped (so a dropped NaN or infinity gives NaN, as x * 0 does in PyTorch).
 * The mask depends only on (key, i): the same bits on both backends and in every backward, and a
 * new key gives a new mask (space keys at least n apart, as tlrt_rng.h says, or hash them).
 * pf == 0 is the identity: the node shares x's value (no copy, no mask, key unused).
 * Gradient: g * m, the same m. The MASK IS NOT STORED: the backward recomputes it from (key, pf)
 * with the same calls (a counter-based generator: the recomputation is exact, and costs the two
 * mask passes of the forward again, bernoulli_mask and scale), which keeps the node's workspace
 * at zero; storing it would
 * hold n more floats per dropout node until the reset, while the activation memory of the nodes
 * is what bounds the batch of a language model. Numeric class: exact (values and gradients
 * bitwise identical on CPU and CUDA). */
TLRT_API tlrt_status tlrt_tape_dropout(tlrt_tape *tape, uint64_t x, double p, uint64_t key,
                                       uint64_t *out);

/* ---- recording: reductions (abi/tlrt_reduce.h) ----------------------------------------------- */
/* reduce_sum / reduce_mean: all elements of x, output a scalar (rank 0). Gradients: g broadcast
 * to x's shape (times 1 / n rounded to float32 for the mean; an empty x has an empty gradient).
 * reduce_sum_axis0 / reduce_sum_axis1: x must have rank 2 (rows, cols); output (cols) / (rows).
 * reduce_sum_axis: x of rank >= 1, axis < rank (TLRT_ERR_INDEX otherwise); output x's shape
 * without that axis (rank - 1). Gradients: g broadcast back along the summed axis.
 * reduce_max_axis0 / reduce_max_axis1: x of rank 2; output (cols) / (rows). Gradient: the
 * maxima share g EQUALLY (as torch.amax): an element equal to its column's (row's) maximum
 * receives g / k, k the number of such elements (ties counted with tlrt_max's order, so +0 and
 * -0 tie), every other element 0; a NaN maximum makes the gradient of its column (row) NaN.
 * An empty reduced axis (rows == 0 for axis0) gives an empty gradient. */
TLRT_API tlrt_status tlrt_tape_reduce_sum(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_reduce_mean(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_reduce_sum_axis0(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_reduce_sum_axis1(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_reduce_sum_axis(tlrt_tape *tape, uint64_t x, uint32_t axis,
                                               uint64_t *out);
TLRT_API tlrt_status tlrt_tape_reduce_max_axis0(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_reduce_max_axis1(tlrt_tape *tape, uint64_t x, uint64_t *out);

/* ---- recording: layout (abi/tlrt_layout.h) --------------------------------------------------- */
/* reshape: the same values with shape dims[0..rank) (same element count, else TLRT_ERR_SHAPE; the
 * value buffer is shared, not copied); gradient: g reshaped back. Not an op of tlrt_layout.h: a
 * tape-only view, like upstream's flatten/reshape.
 * transpose2d: x (rows, cols) -> (cols, rows); gradient: g transposed back.
 * permute: x of rank r, perm[0..r) a permutation (as tlrt_permute); gradient: the inverse
 * permutation. swap_adjacent_at_depth: as tlrt_swap_adjacent_at_depth; gradient: the same swap.
 * broadcast_to: x's shape is in_dims; the output has shape out_dims[0..out_rank) through
 * axis_map[0..out_rank) (tlrt_broadcast_to's convention and validation); gradient:
 * tlrt_reduce_from_broadcast. broadcast_vec_to_rows: v (cols) -> (rows, cols); gradient: column
 * sums. broadcast_vec_to_cols: v (rows) -> (rows, cols); gradient: row sums.
 * concat1d: a (n), b (m) -> (n + m). concat_axis0: a (ra, d1, ...), b (rb, d1, ...) with the same
 * trailing dims (rank >= 1) -> (ra + rb, d1, ...). Gradients: slices of g.
 * slice1d: x (n) -> (len), x[start .. start + len). slice_axis0: x (r, d1, ...) of rank >= 1 ->
 * (len, d1, ...), rows start .. start + len. TLRT_ERR_INDEX unless start + len <= n (r).
 * Gradients: g padded with zeros to x's shape. */
TLRT_API tlrt_status tlrt_tape_reshape(tlrt_tape *tape, uint64_t x, const uint64_t *dims,
                                       uint32_t rank, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_transpose2d(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_permute(tlrt_tape *tape, uint64_t x, const uint32_t *perm,
                                       uint64_t *out);
TLRT_API tlrt_status tlrt_tape_swap_adjacent_at_depth(tlrt_tape *tape, uint64_t x, uint32_t depth,
                                                      uint64_t *out);
TLRT_API tlrt_status tlrt_tape_broadcast_to(tlrt_tape *tape, uint64_t x, const uint64_t *out_dims,
                                            uint32_t out_rank, const uint32_t *axis_map,
                                            uint64_t *out);
TLRT_API tlrt_status tlrt_tape_broadcast_vec_to_rows(tlrt_tape *tape, uint64_t v, uint64_t rows,
                                                     uint64_t *out);
TLRT_API tlrt_status tlrt_tape_broadcast_vec_to_cols(tlrt_tape *tape, uint64_t v, uint64_t cols,
                                                     uint64_t *out);
TLRT_API tlrt_status tlrt_tape_concat1d(tlrt_tape *tape, uint64_t a, uint64_t b, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_concat_axis0(tlrt_tape *tape, uint64_t a, uint64_t b,
                                            uint64_t *out);
TLRT_API tlrt_status tlrt_tape_slice1d(tlrt_tape *tape, uint64_t x, uint64_t start, uint64_t len,
                                       uint64_t *out);
TLRT_API tlrt_status tlrt_tape_slice_axis0(tlrt_tape *tape, uint64_t x, uint64_t start,
                                           uint64_t len, uint64_t *out);

/* ---- recording: indexing (abi/tlrt_index.h) -------------------------------------------------- */
/* The index list idx[0..k) is copied into the tape (kept for backward until reset). Entries follow
 * the rule of abi/tlrt_index.h: out of range reads +0 (and receives no gradient), >= 2^60 is
 * TLRT_ERR_INDEX.
 * gather_vec: v of any shape, read flat (n = its element count) -> (k); gradient: tlrt_scatter_add
 * of g into zeros (duplicates accumulate). gather_rows: mat (rows, cols) -> (k, cols); gradient:
 * tlrt_scatter_add_rows into zeros.
 * scatter_add: x of any shape (n elements, flat), vals (k) -> x's shape; gradients: (g,
 * gather_vec(g, idx)). scatter_add_rows: mat (rows, cols), vals (k, cols) -> (rows, cols);
 * gradients: (g, gather_rows(g, idx)). */
TLRT_API tlrt_status tlrt_tape_gather_vec(tlrt_tape *tape, uint64_t v, const uint64_t *idx,
                                          uint64_t k, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_gather_rows(tlrt_tape *tape, uint64_t mat, const uint64_t *idx,
                                           uint64_t k, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_scatter_add(tlrt_tape *tape, uint64_t x, uint64_t vals,
                                           const uint64_t *idx, uint64_t k, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_scatter_add_rows(tlrt_tape *tape, uint64_t mat, uint64_t vals,
                                                const uint64_t *idx, uint64_t k, uint64_t *out);
/* The same four with an index buffer (abi/tlrt_index.h's _ibuf rule: an entry that is not an
 * index reads +0, receives no gradient and is counted by tlrt_index_faults, once by the recording
 * call and once more by each backward that reads the buffer again). The tape holds a
 * reference to idx until reset (the host may free its handle at once; it must not change the
 * buffer's values before the backward). idx on the tape's device, int32 or int64; k = its size. */
TLRT_API tlrt_status tlrt_tape_gather_vec_ibuf(tlrt_tape *tape, uint64_t v,
                                               const tlrt_buffer *idx, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_gather_rows_ibuf(tlrt_tape *tape, uint64_t mat,
                                                const tlrt_buffer *idx, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_scatter_add_ibuf(tlrt_tape *tape, uint64_t x, uint64_t vals,
                                                const tlrt_buffer *idx, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_scatter_add_rows_ibuf(tlrt_tape *tape, uint64_t mat,
                                                     uint64_t vals, const tlrt_buffer *idx,
                                                     uint64_t *out);

/* ---- recording: softmax, layer norm, products --------------------------------------------------- */
/* softmax / log_softmax over the LAST axis of x (rank >= 1; leading axes folded into rows; a rank
 * 0 x is one row of one element: softmax 1, log-softmax 0, gradient 0). Output: x's shape.
 * Gradients: tlrt_softmax_bwd / tlrt_log_softmax_bwd on the recorded output (no extra workspace).
 * layer_norm over the last axis of x (rank >= 1, cols = last dim), gamma and beta of shape (cols)
 * (rank 1); eps as tlrt_layer_norm_fwd. Output: x's shape. The forward's mean and inv_std are
 * kept as workspace; gradients (x, gamma, beta) from tlrt_layer_norm_bwd.
 * matmul: a of rank 2 stored (m, n), or (n, m) when trans_a; b of rank 2 stored (n, p), or (p, n)
 * when trans_b (tlrt_matmul's convention); output (m, p). bmm: rank 3, (batch, ., .) each, equal
 * batch; output (batch, m, p). TLRT_ERR_SHAPE if the inner dimensions (or batches) differ.
 * Gradients: products of g with the other operand, honouring the flags (no transposed copy is
 * made). */
TLRT_API tlrt_status tlrt_tape_softmax(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_log_softmax(tlrt_tape *tape, uint64_t x, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_layer_norm(tlrt_tape *tape, uint64_t x, uint64_t gamma,
                                          uint64_t beta, double eps, uint64_t *out);
/* rms_norm over the last axis of x (rank >= 1, cols = last dim), gamma of shape (cols) (rank 1) or
 * TLRT_TAPE_NONE for no scale; eps as tlrt_rms_norm_fwd. Output: x's shape. The forward's inv_rms
 * (rows floats) is kept as workspace; gradients (x, gamma) from one tlrt_rms_norm_bwd call
 * (without gamma it computes no column sums). Numeric class: ordered reduction (bitwise identical
 * on CPU and CUDA, values and gradients). */
TLRT_API tlrt_status tlrt_tape_rms_norm(tlrt_tape *tape, uint64_t x, uint64_t gamma, double eps,
                                        uint64_t *out);
TLRT_API tlrt_status tlrt_tape_matmul(tlrt_tape *tape, uint64_t a, uint64_t b, bool trans_a,
                                      bool trans_b, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_bmm(tlrt_tape *tape, uint64_t a, uint64_t b, bool trans_a,
                                   bool trans_b, uint64_t *out);

/* ---- recording: spectral convolution (abi/tlrt_fft.h) and selective scan (abi/tlrt_scan.h) -- */
/* spectral_conv1d_rfft: x (grid, width), w_re and w_im (modes, width, width) each (rank 3, the
 * same shape); output (grid, width), tlrt_spectral_conv1d_rfft_fwd. Gradients:
 * tlrt_spectral_conv1d_rfft_bwd_x and tlrt_spectral_conv1d_rfft_bwd_w (one pass for both weight
 * parts). The op's own domain errors (grid == 0, modes > grid / 2 + 1) pass through.
 * selective_scan_diag: A, B, h0 of shape (D), X of shape (T, D); output (T, D),
 * tlrt_selective_scan_diag_fwd; gradients (A, B, X, h0) from tlrt_selective_scan_diag_bwd.
 * selective_scan_diag_var: A, B, X of shape (T, D), h0 (D); output (T, D); gradients from
 * tlrt_selective_scan_diag_var_bwd. No workspace: the backward reads the recorded output. */
TLRT_API tlrt_status tlrt_tape_spectral_conv1d_rfft(tlrt_tape *tape, uint64_t x, uint64_t w_re,
                                                    uint64_t w_im, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_selective_scan_diag(tlrt_tape *tape, uint64_t A, uint64_t B,
                                                   uint64_t X, uint64_t h0, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_selective_scan_diag_var(tlrt_tape *tape, uint64_t A, uint64_t B,
                                                       uint64_t X, uint64_t h0, uint64_t *out);

/* ---- recording: convolution (abi/tlrt_conv.h) and pooling (abi/tlrt_pool.h) ----------------- */
/* conv2d: x (N, C, H, W) of rank 4; w (C_out, C / groups, kernel_h, kernel_w) of rank 4
 * (PyTorch's layout); b (C_out) of rank 1, or TLRT_TAPE_NONE for no bias; stride, padding (the
 * same number of zero cells on both sides of an axis), dilation and groups as tlrt_conv2d_fwd.
 * Output (N, C_out, out_h, out_w) with tlrt_conv.h's GEOMETRY (an EMPTY output when the dilated
 * window exceeds the padded input). Gradients (x, w, b): one tlrt_conv2d_bwd call that requests
 * only the gradients of nodes requiring one. No workspace: the backward reads x and w.
 * conv: the N-D form of tlrt_conv_fwd / tlrt_conv_bwd: x (N, C, in_0, ..., in_{r-1}) with
 * r = rank(x) - 2 spatial axes, 1 <= r <= 6 (a node has rank <= 8); w (C_out, C / groups, k_0,
 * ..., k_{r-1}) of the same rank; stride and padding hold r values each, dilation r values or
 * NULL for all 1. A 1-D convolution is r = 1: x (N, C, length), w (C_out, C / groups, k).
 * Record-time errors: TLRT_ERR_SHAPE (x or w of another rank, rank(x) != rank(w), x's rank < 3
 * for conv; w's second dim times groups != C; b not of shape (C_out)); TLRT_ERR_NULL_ARGUMENT
 * (stride or padding NULL); the op's own: TLRT_ERR_INVALID_ARGUMENT (a stride, dilation or groups
 * of 0; C or C_out not divisible by groups; padding too large for 64-bit index arithmetic),
 * TLRT_ERR_OVERFLOW (an output beyond TLRT_MAX_ELEMENTS). Numeric class: library (tlrt_conv.h):
 * values and gradients through a convolution are NOT bitwise identical between CPU and CUDA.
 *
 * maxpool2d / avgpool2d: x (N, C, H, W) of rank 4; kernel, stride and padding per axis as
 * tlrt_maxpool2d_fwd / tlrt_avgpool2d_fwd (their domain: kernel and stride >= 1, 2 pad <=
 * kernel, else TLRT_ERR_INVALID_ARGUMENT); count_include_pad as tlrt_avgpool2d_fwd. Output (N, C,
 * out_h, out_w) with tlrt_pool.h's GEOMETRY. Gradients: tlrt_maxpool2d_bwd (the cell each window
 * selected, its first maximum or first NaN, receives that window's gradient) and
 * tlrt_avgpool2d_bwd. No workspace. Numeric classes: the ops' (max pool forward exact; average
 * pool and both backward kernels ordered reduction): bitwise identical between CPU and CUDA. */
TLRT_API tlrt_status tlrt_tape_conv2d(tlrt_tape *tape, uint64_t x, uint64_t w, uint64_t b,
                                      uint64_t stride_h, uint64_t stride_w, uint64_t pad_h,
                                      uint64_t pad_w, uint64_t dilation_h, uint64_t dilation_w,
                                      uint64_t groups, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_conv(tlrt_tape *tape, uint64_t x, uint64_t w, uint64_t b,
                                    const uint64_t *stride, const uint64_t *padding,
                                    const uint64_t *dilation, uint64_t groups, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_maxpool2d(tlrt_tape *tape, uint64_t x, uint64_t kernel_h,
                                         uint64_t kernel_w, uint64_t stride_h, uint64_t stride_w,
                                         uint64_t pad_h, uint64_t pad_w, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_avgpool2d(tlrt_tape *tape, uint64_t x, uint64_t kernel_h,
                                         uint64_t kernel_w, uint64_t stride_h, uint64_t stride_w,
                                         uint64_t pad_h, uint64_t pad_w, bool count_include_pad,
                                         uint64_t *out);

/* ---- recording: fused attention (abi/tlrt_attention.h) ------------------------------------ */
/* flash_attention: q, k and v of rank 3 and the same shape (bh, n, d); output (bh, n, d),
 * tlrt_flash_attention_fwd. mask is NULL or a CONSTANT buffer (not a node: it gets no gradient) of
 * bh * n * n or n * n elements on the tape's device, selecting with 0 as the op says; the tape
 * retains it (not copied, like a leaf's buffer: the host must not release its storage while the
 * tape may read it) until reset or free. scale, causal and mask_fill as tlrt_flash_attention_fwd,
 * with its domains (TLRT_ERR_INVALID_ARGUMENT: d > 256; scale NaN, +-inf or rounding to +-inf in
 * float32; mask_fill NaN, +inf or a finite value rounding to +-inf: -inf is accepted).
 * The forward's lse (bh * n floats) is kept as workspace; gradients (q, k, v) from one
 * tlrt_flash_attention_bwd call (it computes all three; those of nodes without a gradient are
 * dropped). One node may be q, k and v at once (its gradient is the sum of the three).
 * Record-time errors besides the common ones: TLRT_ERR_SHAPE (q, k or v not of rank 3 or not of
 * one shape; mask of another size); TLRT_ERR_RELEASED and TLRT_ERR_DEVICE_MISMATCH (mask).
 * Numeric class: the op's (library against float64, but bitwise identical between CPU and CUDA,
 * values and gradients). */
TLRT_API tlrt_status tlrt_tape_flash_attention(tlrt_tape *tape, uint64_t q, uint64_t k, uint64_t v,
                                               const tlrt_buffer *mask, double scale, bool causal,
                                               double mask_fill, uint64_t *out);

/* attention_qkv (ABI 1.4): self-attention read in place from a fused projection, the node qkv of
 * rank 3 (B, T, (heads_q + 2 heads_kv) d): each token's row holds its heads_q query heads, then
 * its heads_kv key heads, then its heads_kv value heads, each of d = last axis / (heads_q +
 * 2 heads_kv) features (usually linear(x, W_qkv) reshaped to rank 3). Output (B, T, heads_q d),
 * token-major: the input of the output projection, with no split or permute node. One node:
 * tlrt_attention_fwd on the views of qkv (abi/tlrt_attention.h, grouped heads: query head h reads
 * key / value head h / (heads_q / heads_kv); causal aligned as there, here with len_q = len_k = T
 * the usual causal mask; no mask; mask_fill -inf), keeping its lse (B heads_q T floats) as
 * workspace; the backward is one tlrt_attention_bwd writing the whole gradient of qkv, its three
 * views of one fresh buffer, in one call. scale as tlrt_attention_fwd (usually 1 / sqrt(d)).
 * attention (ABI 1.4): the same for separate nodes q (B, Tq, heads_q d), k and v (B, Tk,
 * heads_kv d) of rank 3 (cross-attention, a KV cache: Tk != Tq, causal then aligned bottom-right
 * as tlrt_attention_fwd states), d = q's last axis / heads_q; output (B, Tq, heads_q d).
 * Gradients of q, k, v from one tlrt_attention_bwd, each into a fresh buffer (the same node may be
 * q, k and v: its gradient is the sum). Record-time errors besides the common ones:
 * TLRT_ERR_INVALID_ARGUMENT (heads_q not a positive multiple of heads_kv, checked first; from the
 * op: d > 256, B heads_q or T beyond 2^31 - 1, scale not finite in float32); TLRT_ERR_SHAPE (a
 * node not of rank 3; qkv's last axis not a multiple of heads_q + 2 heads_kv; q's not a multiple
 * of heads_q; k not (B, Tk, heads_kv d); v not of k's shape). Numeric class: the op's (library
 * against float64, but bitwise identical between CPU and CUDA with the determinism switch on). */
TLRT_API tlrt_status tlrt_tape_attention_qkv(tlrt_tape *tape, uint64_t qkv, uint64_t heads_q,
                                             uint64_t heads_kv, bool causal, double scale,
                                             uint64_t *out);
TLRT_API tlrt_status tlrt_tape_attention(tlrt_tape *tape, uint64_t q, uint64_t k, uint64_t v,
                                         uint64_t heads_q, uint64_t heads_kv, bool causal,
                                         double scale, uint64_t *out);

/* ---- composites ------------------------------------------------------------------------------ */
/* Composites record several primitive nodes (so ids advance by more than one) and return the id of
 * the last; gradients follow from the primitives. The nodes before the last are released at once
 * (MEMORY above: tlrt_tape_value of them fails with TLRT_ERR_RELEASED).
 *
 * linear: y = x W^T + b, PyTorch's nn.Linear layout: x (batch, in), W (out, in) (one row per
 * output feature), b (out) or TLRT_TAPE_NONE for no bias; y (batch, out). One node (not a
 * composite): tlrt_linear_fwd with TLRT_ACT_NONE (abi/tlrt_blas.h), backward tlrt_linear_bwd
 * (dx, dw and db as needed). It keeps no workspace (no broadcast bias): its backward reads x
 * and W.
 * linear_gelu: y = gelu(x W^T + b) (tlrt_gelu's tanh approximation), one node: tlrt_linear_fwd
 * with TLRT_ACT_GELU; keeps pre = x W^T + b as its workspace (what gelu's backward reads), the
 * same memory as linear followed by gelu minus one buffer, and one node instead of two.
 *
 * mse_loss: mean((pred - target)^2) over all elements, a scalar; pred and target of the same
 * shape (target usually a leaf without gradient). Recorded as sub, mul, reduce_mean. An empty
 * pred gives NaN (0 / 0).
 *
 * cross_entropy: mean over the batch of -log_softmax(logits)[i, labels[i]]; logits (batch,
 * classes) of rank 2, labels[0..batch) host class indices (copied), each < classes
 * (TLRT_ERR_INDEX naming labels otherwise: a wrong label would silently give a wrong loss).
 * labels may be NULL when batch == 0 (the loss is then NaN). A scalar. Recorded as log_softmax,
 * gather_vec (flat indices i * classes + labels[i]), reduce_mean, neg.
 *
 * batchnorm: batch-first, training mode: x (N, C), gamma and beta (C); per channel c the batch
 * statistics mean_c and the biased variance var_c over the N rows, y = (x - mean_c) /
 * sqrt(var_c + eps) * gamma_c + beta_c (PyTorch's BatchNorm1d in training mode, without running
 * statistics: the host keeps those if it wants them). eps as tlrt_layer_norm_fwd. Recorded as
 * transpose2d, layer_norm over the N axis with constant unit scale and zero shift, transpose2d,
 * mul by broadcast gamma, add broadcast beta; the statistics are layer norm's (its numerics).
 *
 * multi_head_attention: self-attention of x (batch, n, d_model) (rank 3) with num_heads heads of
 * d_head = d_model / num_heads features (PyTorch's nn.MultiheadAttention with batch_first and
 * separate projection weights, no dropout): w_q, w_k, w_v, w_o of shape (d_model, d_model) in
 * nn.Linear's layout, biases b_q, b_k, b_v, b_o of shape (d_model), each TLRT_TAPE_NONE for none.
 *   Q = x w_q^T + b_q, K and V likewise (rows of x: batch * n tokens), each split into heads
 *   (batch * num_heads, n, d_head) (head h holds features h * d_head .. (h + 1) * d_head - 1);
 *   A = flash_attention(Q, K, V, no mask, scale = 1 / sqrt(d_head), causal, mask_fill = -inf)
 *   (causal: token i attends to tokens j <= i of its sequence);
 *   heads merged back to (batch * n, d_model); out = A w_o^T + b_o, reshaped to
 *   (batch, n, d_model).
 * Recorded as reshape, three linear, reshape / permute / reshape per projection,
 * flash_attention, reshape / permute / reshape, linear, reshape (19 nodes).
 * Errors: TLRT_ERR_SHAPE (x not of rank 3; a weight not (d_model, d_model); a bias not (d_model));
 * TLRT_ERR_INVALID_ARGUMENT (num_heads 0 or not dividing d_model; from the attention op:
 * d_head > 256, batch * num_heads or n > 2^31 - 1). Numeric class: library (products and
 * attention). */
TLRT_API tlrt_status tlrt_tape_linear(tlrt_tape *tape, uint64_t x, uint64_t w, uint64_t b,
                                      uint64_t *out);
TLRT_API tlrt_status tlrt_tape_linear_gelu(tlrt_tape *tape, uint64_t x, uint64_t w, uint64_t b,
                                           uint64_t *out);
TLRT_API tlrt_status tlrt_tape_mse_loss(tlrt_tape *tape, uint64_t pred, uint64_t target,
                                        uint64_t *out);
TLRT_API tlrt_status tlrt_tape_cross_entropy(tlrt_tape *tape, uint64_t logits,
                                             const uint64_t *labels, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_batchnorm(tlrt_tape *tape, uint64_t x, uint64_t gamma,
                                         uint64_t beta, double eps, uint64_t *out);
TLRT_API tlrt_status tlrt_tape_multi_head_attention(tlrt_tape *tape, uint64_t x, uint64_t w_q,
                                                    uint64_t w_k, uint64_t w_v, uint64_t w_o,
                                                    uint64_t b_q, uint64_t b_k, uint64_t b_v,
                                                    uint64_t b_o, uint64_t num_heads, bool causal,
                                                    uint64_t *out);
/* cross_entropy with the labels in an index buffer (int32 or int64, batch elements, on the
 * tape's device; the tape holds a reference until reset): the same loss, bit for bit the value and
 * gradient of log_softmax, gather of the labels' entries, reduce_mean, neg; one node
 * (tlrt_tape_cross_entropy_ignore with TLRT_CROSS_ENTROPY_NO_IGNORE) that keeps 2 floats per row. A label outside
 * [0, classes) cannot fail the call without a device wait: its sample contributes 0 to the sum
 * (the mean still divides by batch) and it is counted by tlrt_index_faults (abi/tlrt_index.h).
 * Errors: TLRT_ERR_NULL_ARGUMENT (labels, out); TLRT_ERR_STALE_HANDLE; TLRT_ERR_RELEASED;
 * TLRT_ERR_DTYPE (labels not int32 / int64); TLRT_ERR_DEVICE_MISMATCH (labels on another device
 * than the tape); TLRT_ERR_SHAPE (logits not of rank 2; labels without batch elements). */
TLRT_API tlrt_status tlrt_tape_cross_entropy_ibuf(tlrt_tape *tape, uint64_t logits,
                                                  const tlrt_buffer *labels, uint64_t *out);

/* cross_entropy with ignore_index (PyTorch's F.cross_entropy(logits, labels,
 * ignore_index=ignore_index), reduction 'mean'): labels as tlrt_tape_cross_entropy_ibuf; a row
 * whose label equals ignore_index takes no part in the sum nor in the mean's denominator (the
 * count is taken on the device); all rows ignored gives NaN. TLRT_CROSS_ENTROPY_NO_IGNORE gives
 * exactly tlrt_tape_cross_entropy_ibuf. One node (tlrt_cross_entropy_fwd / _bwd, whose header
 * states the numbers, the fault convention and the numeric class); the node keeps the labels and
 * 2 floats per row. Errors: as tlrt_tape_cross_entropy_ibuf. */
TLRT_API tlrt_status tlrt_tape_cross_entropy_ignore(tlrt_tape *tape, uint64_t logits,
                                                    const tlrt_buffer *labels,
                                                    int ignore_index, uint64_t *out);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_TAPE_H */
