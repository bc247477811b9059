// Size arithmetic and shape checks shared by the entry points: exact products that report
// overflow, the wording of a count in messages, and the rows * cols check of a matrix argument.
#pragma once

#include <cstdint>
#include <string>

#include "core/buffer.hpp"
#include "core/error.hpp"

namespace tlrt {

// x * y * z exactly: false when it does not fit in 64 bits (a zero factor gives 0, true).
inline bool product3(uint64_t x, uint64_t y, uint64_t z, uint64_t *r) {
  *r = 0;
  if (x == 0 || y == 0 || z == 0) return true;
  uint64_t t;
  if (__builtin_mul_overflow(x, y, &t) || __builtin_mul_overflow(t, z, &t)) return false;
  *r = t;
  return true;
}

// A product for messages: its value, or "beyond 64 bits".
inline std::string count_str(uint64_t n, bool fits) {
  return fits ? std::to_string(n) : std::string("beyond 64 bits");
}

// Buffer X (argument `name`) must hold exactly rows * cols elements, rows and cols being the
// arguments named rn and cn: TLRT_ERR_SHAPE otherwise (a product beyond 64 bits matches no
// buffer). Returns rows * cols.
inline uint64_t check_matrix(const Buffer &X, const char *name, uint64_t rows, uint64_t cols,
                             const char *rn = "rows", const char *cn = "cols") {
  uint64_t n = 0;
  const bool fits = product3(1, rows, cols, &n);
  if (!fits || n != X.size)
    fail(TLRT_ERR_SHAPE,
         "argument %s has %llu elements, but argument %s * argument %s = %llu * %llu = %s", name,
         (unsigned long long)X.size, rn, cn, (unsigned long long)rows, (unsigned long long)cols,
         count_str(n, fits).c_str());
  return n;
}

}  // namespace tlrt
