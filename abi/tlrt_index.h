/* libtorchlean_rt: indexing: gather and scatter-add with host index lists. */
#ifndef TLRT_INDEX_H
#define TLRT_INDEX_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif /* TLRT_INDEX_H */
