#include "core/error.hpp"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace tlrt {

namespace {
// The message of the thread's last failure, in storage that lives as long as the thread, so that a
// pointer from tlrt_last_error() stays readable whatever the caller evaluates first: only a
// failing call rewrites it (truncated to fit).
constexpr size_t kLastErrorBytes = 1024;
thread_local char t_last_error[kLastErrorBytes] = "";
}

void fail(tlrt_status status, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  throw Error{status, std::string(buf)};
}

void set_last_error(const char *fn, const std::string &message) noexcept {
  std::snprintf(t_last_error, kLastErrorBytes, "%s: %s", fn, message.c_str());
}

const char *last_error() noexcept { return t_last_error; }

uint64_t checked_mul(uint64_t a, uint64_t b, const char *what) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(TLRT_ERR_OVERFLOW, "%s overflows 64 bits (%llu * %llu)", what, (unsigned long long)a,
         (unsigned long long)b);
  return r;
}

float host_scalar(double v, const char *name, HostInf inf) {
  if (std::isnan(v))
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s = NaN: a host scalar must not be NaN", name);
  if (std::isinf(v)) {
    const bool admitted = inf == HostInf::Both || (inf == HostInf::Negative && v < 0.0);
    if (!admitted)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s = %s is not accepted: %s", name,
           v > 0.0 ? "+inf" : "-inf",
           inf == HostInf::Negative ? "it must be -inf or finite" : "a host scalar must be finite");
    return to_f32(v);
  }
  const float f = to_f32(v);
  if (std::isinf(f))
    fail(TLRT_ERR_INVALID_ARGUMENT,
         "argument %s = %.9g rounds to %s in float32: a finite host scalar must stay finite "
         "(|value| < 2^128 - 2^103, about 3.4028235e38)%s",
         name, v, f > 0.0f ? "+inf" : "-inf",
         inf == HostInf::None ? "" : "; pass the infinity itself to mean it");
  return f;
}

uint64_t checked_add(uint64_t a, uint64_t b, const char *what) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r))
    fail(TLRT_ERR_OVERFLOW, "%s overflows 64 bits (%llu + %llu)", what, (unsigned long long)a,
         (unsigned long long)b);
  return r;
}

}  // namespace tlrt

extern "C" {

TLRT_API const char *tlrt_last_error(void) { return tlrt::last_error(); }

TLRT_API const char *tlrt_status_string(tlrt_status status) {
  // Callers may pass any int; read it as one (a typed load of an out-of-range enum value is UB).
  int code;
  std::memcpy(&code, &status, sizeof code);
  switch (code) {
#define TLRT_NAME(s) \
  case s:            \
    return #s;
    TLRT_NAME(TLRT_OK)
    TLRT_NAME(TLRT_ERR_NULL_ARGUMENT)
    TLRT_NAME(TLRT_ERR_INVALID_ARGUMENT)
    TLRT_NAME(TLRT_ERR_SHAPE)
    TLRT_NAME(TLRT_ERR_OVERFLOW)
    TLRT_NAME(TLRT_ERR_INDEX)
    TLRT_NAME(TLRT_ERR_RELEASED)
    TLRT_NAME(TLRT_ERR_DEVICE_MISMATCH)
    TLRT_NAME(TLRT_ERR_STALE_HANDLE)
    TLRT_NAME(TLRT_ERR_DTYPE)
    TLRT_NAME(TLRT_ERR_FORMAT)
    TLRT_NAME(TLRT_ERR_OUT_OF_MEMORY)
    TLRT_NAME(TLRT_ERR_IO)
    TLRT_NAME(TLRT_ERR_BACKEND_UNAVAILABLE)
    TLRT_NAME(TLRT_ERR_NO_DEVICE)
    TLRT_NAME(TLRT_ERR_CUDA)
    TLRT_NAME(TLRT_ERR_DEVICE_LOST)
    TLRT_NAME(TLRT_ERR_LIBRARY)
    TLRT_NAME(TLRT_ERR_UNSUPPORTED)
    TLRT_NAME(TLRT_ERR_INTERNAL)
#undef TLRT_NAME
  }
  return "TLRT_UNKNOWN_STATUS";
}

}  // extern "C"
