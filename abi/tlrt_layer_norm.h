/* libtorchlean_rt: fused layer normalisation, forward and backward. */
#ifndef TLRT_LAYER_NORM_H
#define TLRT_LAYER_NORM_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif /* TLRT_LAYER_NORM_H */
