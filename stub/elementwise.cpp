// CPU backend, elementwise ops: a plain loop per op over the shared per-element definitions in
// core/numerics/elementwise_ops.hpp (the op is a template argument, so each loop is specialised).
//
// Vectorisation: the loops are built -O3 -fno-trapping-math (so selects on floats if-convert;
// values are unchanged, only the assumption that FP exception flags are observed is dropped) and
// cloned for x86-64-v3 (AVX2 + FMA) and x86-64-v4 (AVX-512), chosen at load time. Without FMA
// hardware the shared math's fma is a libm call and those loops stay scalar; with it they
// vectorise 8 or 16 wide. Every clone performs the same IEEE operations in the same order
// (-ffp-contract=off, no reassociation), so all clones and the CUDA backend agree bit for bit.
//
// Threads: unary and binary ops run on the CPU pool (core/backend/parallel.hpp) in pieces of
// kPiece elements (the element-wise results do not depend on the pieces at all).
#include "core/backend/elementwise.hpp"
#include "core/backend/parallel.hpp"
#include "stub/cpu_clones.hpp"

namespace tlrt {
namespace stub {

namespace {

// 64K floats (256 KiB per operand): a piece streams long enough to hide the hand-off to a worker.
constexpr uint64_t kPiece = uint64_t{1} << 16;

template <ew::Unary OP>
TLRT_CPU_CLONES void unary_loop(const float *__restrict x, float *__restrict y, uint64_t n, ew::Params p) {
  for (uint64_t i = 0; i < n; ++i) y[i] = ew::unary<OP>(x[i], p);
}

template <ew::Binary OP>
TLRT_CPU_CLONES void binary_loop(const float *__restrict a, const float *__restrict b, float *__restrict y,
                 uint64_t n, ew::Params p) {
  for (uint64_t i = 0; i < n; ++i) y[i] = ew::binary<OP>(a[i], b[i], p);
}

}  // namespace

void unary(int, ew::Unary op, const float *x, float *y, uint64_t n, ew::Params p) {
  switch (op) {
#define TLRT_CASE(name)                                                        \
  case ew::Unary::name:                                                        \
    cpu_pool::for_pieces(n, kPiece, [&](uint64_t b, uint64_t e) {              \
      unary_loop<ew::Unary::name>(x + b, y + b, e - b, p);                     \
    });                                                                        \
    break;
    TLRT_UNARY_OPS(TLRT_CASE)
#undef TLRT_CASE
  }
}

void binary(int, ew::Binary op, const float *a, const float *b, float *y, uint64_t n,
            ew::Params p) {
  switch (op) {
#define TLRT_CASE(name)                                                        \
  case ew::Binary::name:                                                       \
    cpu_pool::for_pieces(n, kPiece, [&](uint64_t s, uint64_t e) {              \
      binary_loop<ew::Binary::name>(a + s, b + s, y + s, e - s, p);            \
    });                                                                        \
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
