/* libtorchlean_rt: softmax, log-softmax and the hard-masked row softmax, with backward kernels. */
#ifndef TLRT_SOFTMAX_H
#define TLRT_SOFTMAX_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif /* TLRT_SOFTMAX_H */
