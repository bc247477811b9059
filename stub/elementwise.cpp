// CPU backend, elementwise ops: a plain loop per op over the shared per-element definitions in
// core/numerics/elementwise_ops.hpp (the op is a template argument, so each loop is specialised
// and the exact ops vectorise). Built with -ffp-contract=off: no contraction.
#include "core/backend/elementwise.hpp"

namespace tlrt {
namespace stub {

namespace {

template <ew::Unary OP>
void unary_loop(const float *__restrict x, float *__restrict y, uint64_t n, ew::Params p) {
  for (uint64_t i = 0; i < n; ++i) y[i] = ew::unary<OP>(x[i], p);
}

template <ew::Binary OP>
void binary_loop(const float *__restrict a, const float *__restrict b, float *__restrict y,
                 uint64_t n, ew::Params p) {
  for (uint64_t i = 0; i < n; ++i) y[i] = ew::binary<OP>(a[i], b[i], p);
}

}  // namespace

void unary(int, ew::Unary op, const float *x, float *y, uint64_t n, ew::Params p) {
  switch (op) {
#define TLRT_CASE(name)                          \
  case ew::Unary::name:                          \
    unary_loop<ew::Unary::name>(x, y, n, p);     \
    break;
    TLRT_UNARY_OPS(TLRT_CASE)
#undef TLRT_CASE
  }
}

void binary(int, ew::Binary op, const float *a, const float *b, float *y, uint64_t n,
            ew::Params p) {
  switch (op) {
#define TLRT_CASE(name)                              \
  case ew::Binary::name:                             \
    binary_loop<ew::Binary::name>(a, b, y, n, p);    \
    break;
    TLRT_BINARY_OPS(TLRT_CASE)
#undef TLRT_CASE
  }
}

void minmax_bwd(int, bool is_max, const float *a, const float *b, const float *g, float *da,
                float *db, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) ew::minmax_bwd(is_max, a[i], b[i], g[i], &da[i], &db[i]);
}

}  // namespace stub
}  // namespace tlrt
