/* libtorchlean_rt: the testing surface, declared apart from the product ABI.
 *
 * torchlean_rt.h does not include this header: a host includes it only to test its own error
 * paths (or a binding's). The functions here are exported and versioned like the rest (the
 * linker map lists them), so a test built against one 1.x library runs against any later 1.x;
 * they are not meant for production use. Installed beside the other headers:
 * #include <torchlean_rt/tlrt_testing.h>. */
#ifndef TLRT_TESTING_H
#define TLRT_TESTING_H

#include "tlrt_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Testing hook (fault injection), for tests of the error paths of a host or binding; not for
 * production use. Arms a process-wide countdown: the n-th allocation from now on fails as if
 * memory were exhausted (payload allocations on every device and buffer-handle allocations
 * count; scratch memory of the backends does not), once; the call that meets it returns
 * TLRT_ERR_OUT_OF_MEMORY, leaves its out-parameters NULL and leaks nothing, and later calls work
 * again. n = 0 disarms. Returns the allocations that were still to come before the armed failure
 * (0 if it already happened or nothing was armed), so a test can tell whether a call met it. */
TLRT_API uint64_t tlrt_debug_fail_nth_allocation(uint64_t n);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_TESTING_H */
