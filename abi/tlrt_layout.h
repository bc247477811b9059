/* libtorchlean_rt: layout: concatenation, slices, broadcasts, transposes and permutations. */
#ifndef TLRT_LAYOUT_H
#define TLRT_LAYOUT_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif /* TLRT_LAYOUT_H */
