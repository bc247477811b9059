/* ABI check: the public headers are plain C99. Built with -std=c99 -Wall -Wextra -Werror -pedantic;
 * compiling at all is most of the test. At run time it checks that the library it is linked with
 * has the ABI version of the header, and that the device macros pack and unpack as documented. */
#include "torchlean_rt.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* C99 has no static_assert: a negative array size fails the build. */
#define HDR_STATIC_ASSERT(cond, name) typedef char hdr_static_assert_##name[(cond) ? 1 : -1]

HDR_STATIC_ASSERT(sizeof(tlrt_device) == 4, device_is_u32);
HDR_STATIC_ASSERT(TLRT_OK == 0, ok_is_zero);
HDR_STATIC_ASSERT(TLRT_ABI_VERSION == ((TLRT_ABI_VERSION_MAJOR << 16) | TLRT_ABI_VERSION_MINOR), abi);
HDR_STATIC_ASSERT(TLRT_MAX_ELEMENTS == ((uint64_t)1 << 60), max_elements);
HDR_STATIC_ASSERT(offsetof(tlrt_allocator_stats, struct_size) == 0, struct_size_first);

/* Every function type is usable as a C function pointer (what an FFI loader stores). */
typedef tlrt_status (*binary_fn)(const tlrt_buffer *, const tlrt_buffer *, tlrt_buffer **);
static const binary_fn k_binary[] = {tlrt_add, tlrt_sub, tlrt_mul, tlrt_div, tlrt_max, tlrt_min};

static int failures = 0;
#define CHECK(cond)                                                  \
  do {                                                               \
    if (!(cond)) {                                                   \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                    \
    }                                                                \
  } while (0)

int main(void) {
  tlrt_allocator_stats stats;
  tlrt_buffer *buf = NULL;
  tlrt_device dev = TLRT_DEVICE_CUDA(3);
  uint32_t count = 0;
  bool det;
  size_t i;

  CHECK(tlrt_abi_version() == TLRT_ABI_VERSION);
  CHECK((tlrt_abi_version() >> 16) == TLRT_ABI_VERSION_MAJOR);
  CHECK(TLRT_DEVICE_KIND(dev) == TLRT_DEVICE_KIND_CUDA);
  CHECK(TLRT_DEVICE_ORDINAL(dev) == 3u);
  CHECK(TLRT_DEVICE_KIND(TLRT_DEVICE_CPU) == TLRT_DEVICE_KIND_CPU);
  CHECK(strcmp(tlrt_status_string(TLRT_ERR_RELEASED), "TLRT_ERR_RELEASED") == 0);
  CHECK(tlrt_device_count(TLRT_DEVICE_KIND_CPU, &count) == TLRT_OK && count == 1u);

  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  CHECK(tlrt_allocator_stats_get(TLRT_DEVICE_CPU, &stats) == TLRT_OK);

  det = tlrt_get_deterministic();
  (void)det;
  CHECK(tlrt_buffer_zeros(TLRT_DEVICE_CPU, 4, &buf) == TLRT_OK && buf != NULL);
  tlrt_buffer_free(buf);
  for (i = 0; i < sizeof k_binary / sizeof k_binary[0]; ++i) CHECK(k_binary[i] != NULL);

  if (failures) return 1;
  printf("header_c99: ABI version 0x%05x, build: %s\n", (unsigned)tlrt_abi_version(),
         tlrt_build_info());
  return 0;
}
