/* libtorchlean_rt: an embeddable float32 tensor runtime with a plain-C ABI.
 *
 * Include this umbrella header. Every exported symbol starts with tlrt_, every macro and enum
 * value with TLRT_. The headers are C99 and compile as C++ too.
 *
 * In short:
 *  - a tlrt_buffer is an opaque reference-counted handle to float32 values (or int32 / int64
 *    indices) on one device (tlrt_buffer.h); the CPU backend is always present, CUDA where
 *    compiled in and available; a handle that was freed, or never was one, is reported
 *    (TLRT_ERR_STALE_HANDLE), never dereferenced; DLPack shares buffers with other libraries
 *    without a copy (tlrt_dlpack.h); checkpoints are safetensors files (tlrt_checkpoint.h);
 *  - every fallible call returns a tlrt_status and writes results through trailing out-parameters
 *    (NULL / 0 on failure); tlrt_last_error() explains the failure (tlrt_runtime.h);
 *  - every op returns a fresh buffer on the device of its inputs; inputs on different devices are
 *    an error, never a silent copy;
 *  - each op states its numeric class: exact, shared math, ordered reduction or library;
 *  - HOST SCALARS (the rule every header refers to): a double argument that parametrises an op
 *    (a factor, a bound, an eps, a learning rate, a beta, a probability, a scale, a mask fill) is
 *    rounded once to float32 (nearest even; an op that first combines scalars in double says
 *    so) and must be finite, and finite after that rounding.
 *    NaN, +inf, -inf, and a finite value that rounds to +-inf in float32 (|v| >= 2^128 - 2^103,
 *    about 3.4028235e38) give TLRT_ERR_INVALID_ARGUMENT, whose message names the argument and its
 *    value; values too small for float32 round to a subnormal or to zero as usual. NaN is never
 *    a parameter. The exceptions are named in the op's header: an infinity to which the header
 *    gives a meaning is accepted as itself (tlrt_clamp's and tlrt_clamp_bwd's bounds may be +-inf;
 *    attention's mask_fill may be -inf), though a finite value that would round to it is still
 *    refused; and a value that is data, not a parameter (tlrt_buffer_full's fill value), may be
 *    anything. An op may narrow the domain further (eps >= 0, beta in [0, 1), ...). The tape's
 *    recording calls pass their scalars to the op, so the same rule holds at record time;
 *  - CUDA work is queued on one stream per device, the library's own or one the host sets, with
 *    events to order it against the host's own CUDA work (tlrt_stream.h).
 */
#ifndef TORCHLEAN_RT_H
#define TORCHLEAN_RT_H

#include "tlrt_runtime.h"
#include "tlrt_buffer.h"
#include "tlrt_stream.h"
#include "tlrt_dlpack.h"
#include "tlrt_checkpoint.h"
#include "tlrt_rng.h"
#include "tlrt_elementwise.h"
#include "tlrt_reduce.h"
#include "tlrt_layout.h"
#include "tlrt_index.h"
#include "tlrt_softmax.h"
#include "tlrt_layer_norm.h"
#include "tlrt_blas.h"
#include "tlrt_tape.h"
#include "tlrt_optim.h"
#include "tlrt_fft.h"
#include "tlrt_scan.h"
#include "tlrt_pool.h"
#include "tlrt_attention.h"
#include "tlrt_conv.h"

#endif /* TORCHLEAN_RT_H */
