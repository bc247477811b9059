// ABI check: the public headers are valid C++ (built with -std=c++11 -Wall -Wextra -Werror
// -pedantic). tlrt_elementwise.h is included first to check that it brings in what it uses; then
// the umbrella header (include guards make the second inclusion a no-op). At run time it checks
// the ABI version of the linked library and that the declarations have C linkage.
#include "tlrt_elementwise.h"
#include "torchlean_rt.h"

#include <cstdio>
#include <cstring>
#include <type_traits>

static_assert(sizeof(tlrt_device) == 4, "a device is one uint32_t");
static_assert(TLRT_OK == 0, "TLRT_OK is 0");
static_assert(std::is_enum<tlrt_status>::value, "tlrt_status is an enum");
static_assert(std::is_standard_layout<tlrt_allocator_stats>::value, "stats is a C struct");
static_assert(TLRT_MAX_ELEMENTS == (uint64_t(1) << 60), "TLRT_MAX_ELEMENTS");
static_assert(std::is_same<decltype(&tlrt_abi_version), uint32_t (*)()>::value, "signature");
static_assert(std::is_same<decltype(&tlrt_add),
                           tlrt_status (*)(const tlrt_buffer *, const tlrt_buffer *,
                                           tlrt_buffer **)>::value,
              "signature of tlrt_add");

// extern "C" linkage: the function pointer type of a C-linkage function, taken through a C
// declaration, must match the header's declaration (a C++-linkage declaration would be a
// different, overloadable entity and this redeclaration would not link).
extern "C" uint32_t tlrt_abi_version(void);

int main() {
  int failures = 0;
#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                                \
    }                                                                            \
  } while (0)

  CHECK(tlrt_abi_version() == TLRT_ABI_VERSION);
  CHECK((tlrt_abi_version() >> 16) == TLRT_ABI_VERSION_MAJOR);
  constexpr tlrt_device dev = TLRT_DEVICE_CUDA(7);
  static_assert(TLRT_DEVICE_KIND(dev) == TLRT_DEVICE_KIND_CUDA, "device kind");
  static_assert(TLRT_DEVICE_ORDINAL(dev) == 7u, "device ordinal");
  CHECK(std::strcmp(tlrt_status_string(TLRT_OK), "TLRT_OK") == 0);

  tlrt_buffer *buf = nullptr;
  CHECK(tlrt_buffer_full(TLRT_DEVICE_CPU, 3, 1.5, &buf) == TLRT_OK && buf != nullptr);
  float v[3] = {0, 0, 0};
  CHECK(tlrt_buffer_to_f32(buf, v, 3) == TLRT_OK && v[0] == 1.5f && v[2] == 1.5f);
  tlrt_buffer_free(buf);

  if (failures) return 1;
  std::printf("header_cpp: ABI version 0x%05x\n", static_cast<unsigned>(tlrt_abi_version()));
  return 0;
}
