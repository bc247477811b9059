// Errors inside the library: checks throw tlrt::Error, and the single guard around every exported
// entry point turns it (or any other exception) into a tlrt_status plus the thread-local message.
// Nothing thrown ever crosses the C ABI.
#pragma once

#include <new>
#include <string>
#include <utility>

#include "abi/tlrt_runtime.h"

namespace tlrt {

struct Error {
  tlrt_status status;
  std::string message;  // without the "function: " prefix; the guard adds it
};

// Throws Error{status, printf-formatted message}.
[[noreturn]] void fail(tlrt_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Records "fn: message" as the calling thread's last error.
void set_last_error(const char *fn, const std::string &message) noexcept;

// Runs body() and maps what it throws to a status. body must leave every out-parameter NULL
// unless it succeeds (entry points clear them first and assign only at the very end).
template <class Body>
tlrt_status guarded(const char *fn, Body &&body) noexcept {
  try {
    body();
    return TLRT_OK;
  } catch (const Error &e) {
    set_last_error(fn, e.message);
    return e.status;
  } catch (const std::bad_alloc &) {
    set_last_error(fn, "out of host memory");
    return TLRT_ERR_OUT_OF_MEMORY;
  } catch (const std::exception &e) {
    set_last_error(fn, std::string("internal error: ") + e.what());
    return TLRT_ERR_INTERNAL;
  } catch (...) {
    set_last_error(fn, "internal error: unknown exception");
    return TLRT_ERR_INTERNAL;
  }
}

// Checks that an out-parameter pointer is non-NULL and clears it, so it is NULL on every failure.
template <class T>
void clear_out(T **out, const char *name) {
  if (out == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL", name);
  *out = nullptr;
}
template <class T>
void clear_out_value(T *out, const char *name) {
  if (out == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL", name);
  *out = T{};
}

// Overflow-checked arithmetic on element counts and byte sizes.
uint64_t checked_mul(uint64_t a, uint64_t b, const char *what);
uint64_t checked_add(uint64_t a, uint64_t b, const char *what);

// Rounds a double to float32 once (nearest even; beyond the float32 range to +-inf, NaN to NaN),
// unchecked: for data (tlrt_buffer_full's value) and for float32 values derived in core from
// host scalars already checked by host_scalar. A host scalar itself goes through host_scalar.
inline float to_f32(double v) { return static_cast<float>(v); }

// The infinities a host scalar accepts as themselves: the exceptions its header names.
enum class HostInf {
  None,      // neither (the rule)
  Negative,  // -inf only (attention's mask_fill)
  Both,      // -inf and +inf (tlrt_clamp's bounds)
};

// The host-scalar rule (abi/torchlean_rt.h, DESIGN section 4), the one check every entry point
// that takes a double parameter applies to it: NaN is refused; an infinity is refused unless
// `inf` admits it; a finite v must stay finite when rounded to float32 (|v| < 2^128 - 2^103).
// A refusal throws TLRT_ERR_INVALID_ARGUMENT naming argument `name` and its value. Returns
// to_f32(v). Domains narrower than the rule (eps >= 0, ...) are the caller's to check after it.
float host_scalar(double v, const char *name, HostInf inf = HostInf::None);

}  // namespace tlrt
