/* libtorchlean_rt: an embeddable float32 tensor runtime with a plain-C ABI.
 *
 * Include this umbrella header. Every exported symbol starts with tlrt_, every macro and enum
 * value with TLRT_. The headers are C99 and compile as C++ too.
 *
 * In short:
 *  - a tlrt_buffer is an opaque reference-counted handle to float32 values on one device
 *    (tlrt_buffer.h); the CPU backend is always present, CUDA where compiled in and available;
 *  - every fallible call returns a tlrt_status and writes results through trailing out-parameters
 *    (NULL / 0 on failure); tlrt_last_error() explains the failure (tlrt_runtime.h);
 *  - every op returns a fresh buffer on the device of its inputs; inputs on different devices are
 *    an error, never a silent copy;
 *  - each op states its numeric class: exact, shared math, ordered reduction or library.
 */
#ifndef TORCHLEAN_RT_H
#define TORCHLEAN_RT_H

#include "tlrt_runtime.h"
#include "tlrt_buffer.h"
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
