// The autograd tape: recording calls and their backward rules (abi/tlrt_tape.h). Each recording
// call checks the shapes of its nodes, runs the op of the same name on the nodes' values, and
// appends a node whose backward rule is a composition of public tlrt_* calls. Public headers only
// (see tape_internal.hpp).
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tape/tape_internal.hpp"

namespace tlrt {
namespace tape {
namespace {

using ull = unsigned long long;

// A snapshot of an input node: its id, value, shape and requires_grad (safe to keep while nodes
// are appended). A released node cannot be recorded with (TLRT_ERR_RELEASED).
struct In {
  uint64_t id;
  const tlrt_buffer *v;
  Shape s;
  bool rg;
};
In in(const Tape &t, uint64_t id, const char *arg) {
  const Node &n = node_at(t, id, arg);
  if (n.released)
    fail(TLRT_ERR_RELEASED, "argument %s: node id %#llx (index %llu) was released "
         "(tlrt_tape_release, or an inner node of a composite)", arg, (ull)id,
         (ull)(id & 0xFFFFFFFFull));
  return In{id, n.value.get(), n.shape, n.requires_grad};
}

Shape shape1(uint64_t a) {
  Shape s;
  s.rank = 1;
  s.d[0] = a;
  return s;
}
Shape shape2(uint64_t a, uint64_t b) {
  Shape s;
  s.rank = 2;
  s.d[0] = a;
  s.d[1] = b;
  return s;
}

void need_rank(const In &x, const char *arg, uint32_t rank) {
  if (x.s.rank != rank)
    fail(TLRT_ERR_SHAPE, "argument %s must have rank %u, has shape %s", arg, rank,
         x.s.str().c_str());
}
void need_rank_at_least(const In &x, const char *arg, uint32_t rank) {
  if (x.s.rank < rank)
    fail(TLRT_ERR_SHAPE, "argument %s must have rank >= %u, has shape %s", arg, rank,
         x.s.str().c_str());
}
void need_same(const In &a, const char *an, const In &b, const char *bn) {
  if (a.s != b.s)
    fail(TLRT_ERR_SHAPE, "shapes differ: argument %s has shape %s, argument %s has shape %s", an,
         a.s.str().c_str(), bn, b.s.str().c_str());
}

// Product of dims[from..to).
uint64_t prod(const Shape &s, uint32_t from, uint32_t to) {
  uint64_t p = 1;
  for (uint32_t i = from; i < to; ++i) p *= s.d[i];
  return p;
}

// Rows and columns of the last-axis view: (prod of leading dims, last dim); rank 0 is (1, 1).
void last_axis(const Shape &s, uint64_t *rows, uint64_t *cols) {
  if (s.rank == 0) {
    *rows = 1;
    *cols = 1;
    return;
  }
  *cols = s.d[s.rank - 1];
  *rows = prod(s, 0, s.rank - 1);
}

// ---- elementwise ----------------------------------------------------------------------------

enum class Bin { Add, Sub, Mul, Div, Max, Min };

uint64_t rec_binary(Tape &t, Bin op, uint64_t ai, uint64_t bi) {
  const In a = in(t, ai, "a"), b = in(t, bi, "b");
  need_same(a, "a", b, "b");
  Buf y;
  BackwardFn bw;
  Reads rd = kReadsNothing;
  switch (op) {
    case Bin::Add:
      y = TAPE_CALL(tlrt_add, a.v, b.v);
      bw = [](const Tape &t, const Node &n, const tlrt_buffer *g, std::vector<Buf> &o) {
        if (need(t, n, 0)) o[0] = share(g);
        if (need(t, n, 1)) o[1] = share(g);
      };
      break;
    case Bin::Sub:
      y = TAPE_CALL(tlrt_sub, a.v, b.v);
      bw = [](const Tape &t, const Node &n, const tlrt_buffer *g, std::vector<Buf> &o) {
        if (need(t, n, 0)) o[0] = share(g);
        if (need(t, n, 1)) o[1] = TAPE_CALL(tlrt_neg, g);
      };
      break;
    case Bin::Mul:
      y = TAPE_CALL(tlrt_mul, a.v, b.v);
      rd = (a.rg ? reads_parent(1) : 0) | (b.rg ? reads_parent(0) : 0);
      bw = [](const Tape &t, const Node &n, const tlrt_buffer *g, std::vector<Buf> &o) {
        if (need(t, n, 0)) o[0] = TAPE_CALL(tlrt_mul, g, parent_value(t, n, 1));
        if (need(t, n, 1)) o[1] = TAPE_CALL(tlrt_mul, g, parent_value(t, n, 0));
      };
      break;
    case Bin::Div:
      y = TAPE_CALL(tlrt_div, a.v, b.v);
      rd = reads_parent(1) | (b.rg ? kReadsSelf : 0);
      // d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b: with q = g / b, (q, -(q * y)).
      bw = [](const Tape &t, const Node &n, const tlrt_buffer *g, std::vector<Buf> &o) {
        Buf q = TAPE_CALL(tlrt_div, g, parent_value(t, n, 1));
        if (need(t, n, 1)) {
          Buf qy = TAPE_CALL(tlrt_mul, q.get(), own_value(n));
          o[1] = TAPE_CALL(tlrt_neg, qy.get());
        }
        if (need(t, n, 0)) o[0] = std::move(q);
      };
      break;
    case Bin::Max:
    case Bin::Min: {
      const bool mx = op == Bin::Max;
      y = mx ? TAPE_CALL(tlrt_max, a.v, b.v) : TAPE_CALL(tlrt_min, a.v, b.v);
      rd = reads_parent(0) | reads_parent(1);
      bw = [mx](const Tape &t, const Node &n, const tlrt_buffer *g, std::vector<Buf> &o) {
        tlrt_buffer *da = nullptr, *db = nullptr;
        const tlrt_status s =
            mx ? tlrt_max_bwd(parent_value(t, n, 0), parent_value(t, n, 1), g, &da, &db)
               : tlrt_min_bwd(parent_value(t, n, 0), parent_value(t, n, 1), g, &da, &db);
        Buf A(da), B(db);
        check(s);
        if (need(t, n, 0)) o[0] = std::move(A);
        if (need(t, n, 1)) o[1] = std::move(B);
      };
      break;
    }
  }
  return push(t, std::move(y), a.s, {ai, bi}, rd, std::move(bw));
}

uint64_t rec_axpy(Tape &t, uint64_t ai, uint64_t bi, double c) {
  const In a = in(t, ai, "a"), b = in(t, bi, "b");
  need_same(a, "a", b, "b");
  Buf y = TAPE_CALL(tlrt_axpy, a.v, b.v, c);
  return push(t, std::move(y), a.s, {ai, bi}, kReadsNothing,
              [c](const Tape &t, const Node &n, const tlrt_buffer *g, std::vector<Buf> &o) {
                if (need(t, n, 0)) o[0] = share(g);
                if (need(t, n, 1)) o[1] = TAPE_CALL(tlrt_scale, g, c);
              });
}

// Unary ops whose gradient is tlrt_<op>_bwd(x, g).
using FwdFn = tlrt_status (*)(const tlrt_buffer *, tlrt_buffer **);
using BwdFn = tlrt_status (*)(const tlrt_buffer *, const tlrt_buffer *, tlrt_buffer **);

uint64_t rec_unary(Tape &t, uint64_t xi, FwdFn f, BwdFn b) {
  const In x = in(t, xi, "x");
  Buf y = TAPE_CALL(f, x.v);
  return push(t, std::move(y), x.s, {xi}, reads_parent(0),
              [b](const Tape &t, const Node &n, const tlrt_buffer *g, std::vector<Buf> &o) {
                o[0] = TAPE_CALL(b, parent_value(t, n, 0), g);
              });
}

uint64_t rec_neg(Tape &t, uint64_t xi) {
  const In x = in(t, xi, "x");
  Buf y = TAPE_CALL(tlrt_neg, x.v);
  return push(t, std::move(y), x.s, {xi}, kReadsNothing,
              [](const Tape &, const Node &, const tlrt_buffer *g, std::vector<Buf> &o) {
                o[0] = TAPE_CALL(tlrt_neg, g);
              });
}

uint64_t rec_scale(Tape &t, uint64_t xi, double c) {
  const In x = in(t, xi, "x");
  Buf y = TAPE_CALL(tlrt_scale, x.v, c);
  return push(t, std::move(y), x.s, {xi}, kReadsNothing,
              [c](const Tape &, const Node &, const tlrt_buffer *g, std::vector<Buf> &o) {
                o[0] = TAPE_CALL(tlrt_scale, g, c);
              });
}

uint64_t rec_clamp(Tape &t, uint64_t xi, double lo, double hi) {
  const In x = in(t, xi, "x");
  Buf y = TAPE_CALL(tlrt_clamp, x.v, lo, hi);
  return push(t, std::move(y), x.s, {xi}, reads_parent(0),
              [lo, hi](const Tape &t, const Node &n, const tlrt_buffer *g,
                       std::vector<Buf> &o) {
                o[0] = TAPE_CALL(tlrt_clamp_bwd, parent_value(t, n, 0), g, lo, hi);
              });
}

uint64_t rec_safe_log(Tape &t, uint64_t xi, double eps) {
  const In x = in(t, xi, "x");
  Buf y = TAPE_CALL(tlrt_safe_log, x.v, eps);
  return push(t, std::move(y), x.s, {xi}, reads_parent(0),
              [eps](const Tape &t, const Node &n, const tlrt_buffer *g, std::vector<Buf> &o) {
                o[0] = TAPE_CALL(tlrt_safe_log_bwd, parent_value(t, n, 0), g, eps);
              });
}

// Dropout (abi/tlrt_tape.h): m = bernoulli_mask(keep = 1 - pf, key) scaled by 1 / keep, y = x * m,
// dx = g * m. The backward recomputes m with the same two calls (no workspace).
Buf dropout_mask(tlrt_device dev, uint64_t n, double keep, uint64_t key) {
  Buf mask = TAPE_CALL(tlrt_bernoulli_mask, dev, n, keep, key);
  return TAPE_CALL(tlrt_scale, mask.get(), 1.0 / keep);
}

uint64_t rec_dropout(Tape &t, uint64_t xi, double p, uint64_t key) {
  const In x = in(t, xi, "x");
  const float pf = host_scalar(p, "p");
  if (!(p >= 0.0 && pf < 1.0f))  // (-0 is 0; a p below 1 that rounds to 1 is refused)
    fail(TLRT_ERR_INVALID_ARGUMENT,
         "argument p = %.17g (%.9g in float32) must be a probability in [0, 1)", p, (double)pf);
  if (pf == 0.0f)  // the identity: x's value itself
    return push(t, share(x.v), x.s, {xi}, kReadsNothing,
                [](const Tape &, const Node &, const tlrt_buffer *g, std::vector<Buf> &o) {
                  o[0] = share(g);
                });
  const double keep = 1.0 - (double)pf;
  const tlrt_device dev = t.device;
  const uint64_t n = x.s.numel();
  Buf m = dropout_mask(dev, n, keep, key);
  Buf y = TAPE_CALL(tlrt_mul, x.v, m.get());
  return push(t, std::move(y), x.s, {xi}, kReadsNothing,
              [dev, n, keep, key](const Tape &, const Node &, const tlrt_buffer *g,
                                  std::vector<Buf> &o) {
                Buf mb = dropout_mask(dev, n, keep, key);
                o[0] = TAPE_CALL(tlrt_mul, g, mb.get());
              });
}

// ---- reductions ----------------------------------------------------------------------------

// g (of shape `from`) broadcast to `to` along the axes marked 0 in map (others map in order).
Buf broadcast(const tlrt_buffer *g, const Shape &from, const Shape &to, const uint32_t *map) {
  return TAPE_CALL(tlrt_broadcast_to, g, from.d, from.rank, to.d, to.rank, map);
}

uint64_t rec_reduce_all(Tape &t, uint64_t xi, bool mean) {
  const In x = in(t, xi, "x");
  Buf y = mean ? TAPE_CALL(tlrt_reduce_mean, x.v) : TAPE_CALL(tlrt_reduce_sum, x.v);
  const Shape xs = x.s;
  return push(t, std::move(y), Shape{}, {xi}, kReadsNothing,
              [xs, mean](const Tape &, const Node &n, const tlrt_buffer *g,
                         std::vector<Buf> &o) {
                const uint32_t map[TLRT_TAPE_MAX_RANK] = {};  // every output axis is inserted
                Buf b = broadcast(g, n.shape, xs, map);
                if (mean) {
                  const uint64_t cnt = xs.numel();
                  b = TAPE_CALL(tlrt_scale, b.get(), cnt ? 1.0 / (double)cnt : 0.0);
                }
                o[0] = std::move(b);
              });
}

uint64_t rec_sum_axis01(Tape &t, uint64_t xi, int axis) {
  const In x = in(t, xi, "x");
  need_rank(x, "x", 2);
  const uint64_t r = x.s.d[0], c = x.s.d[1];
  Buf y = axis == 0 ? TAPE_CALL(tlrt_reduce_sum_axis0, x.v, r, c)
                    : TAPE_CALL(tlrt_reduce_sum_axis1, x.v, r, c);
  return push(t, std::move(y), shape1(axis == 0 ? c : r), {xi}, kReadsNothing,
              [r, c, axis](const Tape &, const Node &, const tlrt_buffer *g,
                           std::vector<Buf> &o) {
                o[0] = axis == 0 ? TAPE_CALL(tlrt_broadcast_vec_to_rows, g, r, c)
                                 : TAPE_CALL(tlrt_broadcast_vec_to_cols, g, r, c);
              });
}

uint64_t rec_sum_axis(Tape &t, uint64_t xi, uint32_t axis) {
  const In x = in(t, xi, "x");
  if (axis >= x.s.rank)
    fail(TLRT_ERR_INDEX, "argument axis is %u, node x has shape %s (rank %u)", axis,
         x.s.str().c_str(), x.s.rank);
  Buf y = TAPE_CALL(tlrt_reduce_sum_axis, x.v, x.s.d, x.s.rank, axis);
  Shape ys;
  ys.rank = x.s.rank - 1;
  for (uint32_t i = 0, j = 0; i < x.s.rank; ++i)
    if (i != axis) ys.d[j++] = x.s.d[i];
  const Shape xs = x.s;
  return push(t, std::move(y), ys, {xi}, kReadsNothing,
              [xs, axis](const Tape &, const Node &n, const tlrt_buffer *g,
                         std::vector<Buf> &o) {
                uint32_t map[TLRT_TAPE_MAX_RANK] = {};
                for (uint32_t i = 0, k = 0; i < xs.rank; ++i) map[i] = i == axis ? 0 : ++k;
                o[0] = broadcast(g, n.shape, xs, map);
              });
}

// Max over an axis of a (rows, cols) matrix. Backward (abi/tlrt_tape.h): the elements equal to
// their maximum share g equally. With m the maximum broadcast back, tlrt_max_bwd(x, m, 1) is 0.5
// exactly where x ties m (1 where x is NaN: a NaN operand wins), 0 where x loses; c = its sum
// along the axis is half the number of winners k; dx = tie * broadcast(g / c) = g / k, with
// every scaling by 0.5 and 2 exact.
uint64_t rec_max_axis01(Tape &t, uint64_t xi, int axis) {
  const In x = in(t, xi, "x");
  need_rank(x, "x", 2);
  const uint64_t r = x.s.d[0], c = x.s.d[1];
  Buf y = axis == 0 ? TAPE_CALL(tlrt_reduce_max_axis0, x.v, r, c)
                    : TAPE_CALL(tlrt_reduce_max_axis1, x.v, r, c);
  return push(t, std::move(y), shape1(axis == 0 ? c : r), {xi}, reads_parent(0) | kReadsSelf,
              [r, c, axis](const Tape &t, const Node &n, const tlrt_buffer *g,
                           std::vector<Buf> &o) {
                auto spread = [&](const tlrt_buffer *v) {
                  return axis == 0 ? TAPE_CALL(tlrt_broadcast_vec_to_rows, v, r, c)
                                   : TAPE_CALL(tlrt_broadcast_vec_to_cols, v, r, c);
                };
                Buf mb = spread(own_value(n));
                Buf ones = TAPE_CALL(tlrt_buffer_full, t.device, r * c, 1.0);
                tlrt_buffer *da = nullptr, *db = nullptr;
                const tlrt_status s = tlrt_max_bwd(parent_value(t, n, 0), mb.get(), ones.get(),
                                                   &da, &db);
                Buf tie(da), unused(db);
                check(s);
                unused.reset();
                mb.reset();
                ones.reset();
                Buf half = axis == 0 ? TAPE_CALL(tlrt_reduce_sum_axis0, tie.get(), r, c)
                                     : TAPE_CALL(tlrt_reduce_sum_axis1, tie.get(), r, c);
                Buf q = TAPE_CALL(tlrt_div, g, half.get());
                half.reset();
                Buf qb = spread(q.get());
                o[0] = TAPE_CALL(tlrt_mul, tie.get(), qb.get());
              });
}

// ---- layout --------------------------------------------------------------------------------

Shape make_shape(const uint64_t *dims, uint32_t rank, const char *darg, const char *rarg) {
  if (rank > TLRT_TAPE_MAX_RANK)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s is %u, at most %u", rarg, rank,
         TLRT_TAPE_MAX_RANK);
  if (rank > 0 && dims == nullptr)
    fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL with %s %u", darg, rarg, rank);
  Shape s;
  s.rank = rank;
  for (uint32_t i = 0; i < rank; ++i) s.d[i] = dims[i];
  return s;
}

// Exact product of a shape's dims; false when it does not fit in 64 bits (a zero dim gives 0).
bool exact_numel(const Shape &s, uint64_t *n) {
  for (uint32_t i = 0; i < s.rank; ++i)
    if (s.d[i] == 0) {
      *n = 0;
      return true;
    }
  uint64_t p = 1;
  for (uint32_t i = 0; i < s.rank; ++i)
    if (__builtin_mul_overflow(p, s.d[i], &p)) return false;
  *n = p;
  return true;
}

uint64_t rec_reshape(Tape &t, uint64_t xi, const uint64_t *dims, uint32_t rank) {
  const In x = in(t, xi, "x");
  const Shape s = make_shape(dims, rank, "dims", "rank");
  uint64_t n = 0;
  if (!exact_numel(s, &n) || n != x.s.numel())
    fail(TLRT_ERR_SHAPE, "argument dims %s does not have the element count of node x, shape %s",
         s.str().c_str(), x.s.str().c_str());
  return push(t, share(x.v), s, {xi}, kReadsNothing,
              [](const Tape &, const Node &, const tlrt_buffer *g, std::vector<Buf> &o) {
                o[0] = share(g);  // buffers are flat: the gradient's layout is the same
              });
}

uint64_t rec_transpose2d(Tape &t, uint64_t xi) {
  const In x = in(t, xi, "x");
  need_rank(x, "x", 2);
  const uint64_t r = x.s.d[0], c = x.s.d[1];
  Buf y = TAPE_CALL(tlrt_transpose2d, x.v, r, c);
  return push(t, std::move(y), shape2(c, r), {xi}, kReadsNothing,
              [r, c](const Tape &, const Node &, const tlrt_buffer *g, std::vector<Buf> &o) {
                o[0] = TAPE_CALL(tlrt_transpose2d, g, c, r);
              });
}

uint64_t rec_permute(Tape &t, uint64_t xi, const uint32_t *perm) {
  const In x = in(t, xi, "x");
  Buf y = TAPE_CALL(tlrt_permute, x.v, x.s.d, x.s.rank, perm);  // validates perm
  Shape ys;
  ys.rank = x.s.rank;
  uint32_t inv[TLRT_TAPE_MAX_RANK] = {};
  for (uint32_t i = 0; i < x.s.rank; ++i) {
    ys.d[i] = x.s.d[perm[i]];
    inv[perm[i]] = i;
  }
  return push(t, std::move(y), ys, {xi}, kReadsNothing,
              [inv](const Tape &, const Node &n, const tlrt_buffer *g, std::vector<Buf> &o) {
                o[0] = TAPE_CALL(tlrt_permute, g, n.shape.d, n.shape.rank, inv);
              });
}

uint64_t rec_swap(Tape &t, uint64_t xi, uint32_t depth) {
  const In x = in(t, xi, "x");
  Buf y = TAPE_CALL(tlrt_swap_adjacent_at_depth, x.v, x.s.d, x.s.rank, depth);  // validates
  Shape ys = x.s;
  std::swap(ys.d[depth], ys.d[depth + 1]);
  return push(t, std::move(y), ys, {xi}, kReadsNothing,
              [depth](const Tape &, const Node &n, const tlrt_buffer *g,
                      std::vector<Buf> &o) {
                o[0] = TAPE_CALL(tlrt_swap_adjacent_at_depth, g, n.shape.d, n.shape.rank, depth);
              });
}

uint64_t rec_broadcast_to(Tape &t, uint64_t xi, const uint64_t *out_dims, uint32_t out_rank,
                          const uint32_t *axis_map) {
  const In x = in(t, xi, "x");
  const Shape ys = make_shape(out_dims, out_rank, "out_dims", "out_rank");
  if (out_rank > 0 && axis_map == nullptr)
    fail(TLRT_ERR_NULL_ARGUMENT, "argument axis_map is NULL with out_rank %u", out_rank);
  Buf y = TAPE_CALL(tlrt_broadcast_to, x.v, x.s.d, x.s.rank, ys.d, ys.rank, axis_map);
  uint32_t map[TLRT_TAPE_MAX_RANK] = {};
  for (uint32_t i = 0; i < out_rank; ++i) map[i] = axis_map[i];
  const Shape xs = x.s;
  return push(t, std::move(y), ys, {xi}, kReadsNothing,
              [xs, map](const Tape &, const Node &n, const tlrt_buffer *g,
                        std::vector<Buf> &o) {
                o[0] = TAPE_CALL(tlrt_reduce_from_broadcast, g, xs.d, xs.rank, n.shape.d,
                                 n.shape.rank, map);
              });
}

uint64_t rec_vec_bcast(Tape &t, uint64_t vi, uint64_t other, bool to_rows) {
  const In v = in(t, vi, "v");
  need_rank(v, "v", 1);
  const uint64_t r = to_rows ? other : v.s.d[0], c = to_rows ? v.s.d[0] : other;
  Buf y = to_rows ? TAPE_CALL(tlrt_broadcast_vec_to_rows, v.v, r, c)
                  : TAPE_CALL(tlrt_broadcast_vec_to_cols, v.v, r, c);
  return push(t, std::move(y), shape2(r, c), {vi}, kReadsNothing,
              [r, c, to_rows](const Tape &, const Node &, const tlrt_buffer *g,
                              std::vector<Buf> &o) {
                o[0] = to_rows ? TAPE_CALL(tlrt_reduce_sum_axis0, g, r, c)
                               : TAPE_CALL(tlrt_reduce_sum_axis1, g, r, c);
              });
}

uint64_t rec_concat1d(Tape &t, uint64_t ai, uint64_t bi) {
  const In a = in(t, ai, "a"), b = in(t, bi, "b");
  need_rank(a, "a", 1);
  need_rank(b, "b", 1);
  const uint64_t n = a.s.d[0], m = b.s.d[0];
  Buf y = TAPE_CALL(tlrt_concat1d, a.v, b.v, n, m);
  return push(t, std::move(y), shape1(n + m), {ai, bi}, kReadsNothing,
              [n, m](const Tape &t, const Node &nd, const tlrt_buffer *g,
                     std::vector<Buf> &o) {
                if (need(t, nd, 0)) o[0] = TAPE_CALL(tlrt_slice1d, g, n + m, 0, n);
                if (need(t, nd, 1)) o[1] = TAPE_CALL(tlrt_slice1d, g, n + m, n, m);
              });
}

uint64_t rec_concat_axis0(Tape &t, uint64_t ai, uint64_t bi) {
  const In a = in(t, ai, "a"), b = in(t, bi, "b");
  need_rank_at_least(a, "a", 1);
  bool same = a.s.rank == b.s.rank;
  for (uint32_t i = 1; same && i < a.s.rank; ++i) same = a.s.d[i] == b.s.d[i];
  if (!same)
    fail(TLRT_ERR_SHAPE,
         "trailing dimensions differ: argument a has shape %s, argument b has shape %s",
         a.s.str().c_str(), b.s.str().c_str());
  const uint64_t ra = a.s.d[0], rb = b.s.d[0], inner = prod(a.s, 1, a.s.rank);
  Buf y = TAPE_CALL(tlrt_concat_axis0, a.v, b.v, ra, rb, inner);
  Shape ys = a.s;
  ys.d[0] = ra + rb;  // the op checked that the output exists
  return push(t, std::move(y), ys, {ai, bi}, kReadsNothing,
              [ra, rb, inner](const Tape &t, const Node &nd, const tlrt_buffer *g,
                              std::vector<Buf> &o) {
                if (need(t, nd, 0)) o[0] = TAPE_CALL(tlrt_slice_axis0, g, ra + rb, inner, 0, ra);
                if (need(t, nd, 1)) o[1] = TAPE_CALL(tlrt_slice_axis0, g, ra + rb, inner, ra, rb);
              });
}

// g (len rows of `inner`) placed at rows start.. of a zero (rows, inner) array.
Buf pad_rows(const Tape &t, const tlrt_buffer *g, uint64_t rows, uint64_t inner,
             uint64_t start, uint64_t len) {
  const uint64_t after = rows - start - len;
  Buf z0 = TAPE_CALL(tlrt_buffer_zeros, t.device, start * inner);
  Buf head = TAPE_CALL(tlrt_concat_axis0, z0.get(), g, start, len, inner);
  z0.reset();
  Buf z1 = TAPE_CALL(tlrt_buffer_zeros, t.device, after * inner);
  return TAPE_CALL(tlrt_concat_axis0, head.get(), z1.get(), start + len, after, inner);
}

uint64_t rec_slice1d(Tape &t, uint64_t xi, uint64_t start, uint64_t len) {
  const In x = in(t, xi, "x");
  need_rank(x, "x", 1);
  const uint64_t n = x.s.d[0];
  Buf y = TAPE_CALL(tlrt_slice1d, x.v, n, start, len);  // checks start + len <= n
  return push(t, std::move(y), shape1(len), {xi}, kReadsNothing,
              [n, start, len](const Tape &t, const Node &, const tlrt_buffer *g,
                              std::vector<Buf> &o) { o[0] = pad_rows(t, g, n, 1, start, len); });
}

uint64_t rec_slice_axis0(Tape &t, uint64_t xi, uint64_t start, uint64_t len) {
  const In x = in(t, xi, "x");
  need_rank_at_least(x, "x", 1);
  const uint64_t rows = x.s.d[0], inner = prod(x.s, 1, x.s.rank);
  Buf y = TAPE_CALL(tlrt_slice_axis0, x.v, rows, inner, start, len);
  Shape ys = x.s;
  ys.d[0] = len;
  return push(t, std::move(y), ys, {xi}, kReadsNothing,
              [rows, inner, start, len](const Tape &t, const Node &, const tlrt_buffer *g,
                                        std::vector<Buf> &o) {
                o[0] = pad_rows(t, g, rows, inner, start, len);
              });
}

// ---- indexing ------------------------------------------------------------------------------

using Index = std::shared_ptr<const std::vector<uint64_t>>;
Index copy_index(const uint64_t *idx, uint64_t k) {  // after the op validated idx and k
  return std::make_shared<const std::vector<uint64_t>>(idx, idx + k);
}

uint64_t rec_gather_vec(Tape &t, uint64_t vi, const uint64_t *idx, uint64_t k) {
  const In v = in(t, vi, "v");
  const uint64_t n = v.s.numel();
  Buf y = TAPE_CALL(tlrt_gather_vec, v.v, n, idx, k);
  Index ix = copy_index(idx, k);
  return push(t, std::move(y), shape1(k), {vi}, kReadsNothing,
              [n, ix](const Tape &t, const Node &, const tlrt_buffer *g,
                      std::vector<Buf> &o) {
                Buf z = TAPE_CALL(tlrt_buffer_zeros, t.device, n);
                o[0] = TAPE_CALL(tlrt_scatter_add, z.get(), g, n, ix->data(), ix->size());
              });
}

uint64_t rec_gather_rows(Tape &t, uint64_t mi, const uint64_t *idx, uint64_t k) {
  const In m = in(t, mi, "mat");
  need_rank(m, "mat", 2);
  const uint64_t rows = m.s.d[0], cols = m.s.d[1];
  Buf y = TAPE_CALL(tlrt_gather_rows, m.v, rows, cols, idx, k);
  Index ix = copy_index(idx, k);
  return push(t, std::move(y), shape2(k, cols), {mi}, kReadsNothing,
              [rows, cols, ix](const Tape &t, const Node &, const tlrt_buffer *g,
                               std::vector<Buf> &o) {
                Buf z = TAPE_CALL(tlrt_buffer_zeros, t.device, rows * cols);
                o[0] = TAPE_CALL(tlrt_scatter_add_rows, z.get(), g, rows, cols, ix->data(),
                                 ix->size());
              });
}

uint64_t rec_scatter_add(Tape &t, uint64_t xi, uint64_t vi, const uint64_t *idx,
                         uint64_t k) {
  const In x = in(t, xi, "x"), v = in(t, vi, "vals");
  need_rank(v, "vals", 1);
  if (v.s.d[0] != k)
    fail(TLRT_ERR_SHAPE, "argument vals has shape %s, argument k is %llu", v.s.str().c_str(),
         (ull)k);
  const uint64_t n = x.s.numel();
  Buf y = TAPE_CALL(tlrt_scatter_add, x.v, v.v, n, idx, k);
  Index ix = copy_index(idx, k);
  return push(t, std::move(y), x.s, {xi, vi}, kReadsNothing,
              [n, ix](const Tape &t, const Node &nd, const tlrt_buffer *g,
                      std::vector<Buf> &o) {
                if (need(t, nd, 0)) o[0] = share(g);
                if (need(t, nd, 1))
                  o[1] = TAPE_CALL(tlrt_gather_vec, g, n, ix->data(), ix->size());
              });
}

uint64_t rec_scatter_add_rows(Tape &t, uint64_t mi, uint64_t vi, const uint64_t *idx,
                              uint64_t k) {
  const In m = in(t, mi, "mat"), v = in(t, vi, "vals");
  need_rank(m, "mat", 2);
  need_rank(v, "vals", 2);
  const uint64_t rows = m.s.d[0], cols = m.s.d[1];
  if (v.s.d[0] != k || v.s.d[1] != cols)
    fail(TLRT_ERR_SHAPE, "argument vals has shape %s, expected (k, cols) = (%llu, %llu) for "
         "argument mat of shape %s", v.s.str().c_str(), (ull)k, (ull)cols, m.s.str().c_str());
  Buf y = TAPE_CALL(tlrt_scatter_add_rows, m.v, v.v, rows, cols, idx, k);
  Index ix = copy_index(idx, k);
  return push(t, std::move(y), m.s, {mi, vi}, kReadsNothing,
              [rows, cols, ix](const Tape &t, const Node &nd, const tlrt_buffer *g,
                               std::vector<Buf> &o) {
                if (need(t, nd, 0)) o[0] = share(g);
                if (need(t, nd, 1))
                  o[1] = TAPE_CALL(tlrt_gather_rows, g, rows, cols, ix->data(), ix->size());
              });
}

// An index buffer recorded on the tape: checked (int32 / int64, on the tape's device) and shared
// with the backward closures, which read it after the host may have freed its handle.
struct IndexBuf {
  std::shared_ptr<Buf> b;
  uint64_t k = 0;
  const tlrt_buffer *get() const { return b->get(); }
};

IndexBuf index_buffer(const Tape &t, const tlrt_buffer *idx, const char *name) {
  if (idx == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL", name);
  tlrt_dtype dt = TLRT_DTYPE_F32;
  if (tlrt_buffer_dtype(idx, &dt) != TLRT_OK)  // the one failure with a non-NULL handle
    fail(TLRT_ERR_STALE_HANDLE, "argument %s is not a live tlrt_buffer (freed, or never one)",
         name);
  bool released = false;
  check(tlrt_buffer_is_released(idx, &released));
  if (released)
    fail(TLRT_ERR_RELEASED, "argument %s: its storage was released", name);
  if (dt != TLRT_DTYPE_I32 && dt != TLRT_DTYPE_I64)
    fail(TLRT_ERR_DTYPE, "argument %s holds %s values, int32 or int64 indices are expected", name,
         dt == TLRT_DTYPE_F32 ? "float32" : "unknown");
  tlrt_device dev = TLRT_DEVICE_CPU;
  check(tlrt_buffer_device(idx, &dev));
  if (dev != t.device)
    fail(TLRT_ERR_DEVICE_MISMATCH, "argument %s is on another device than the tape", name);
  IndexBuf r;
  check(tlrt_buffer_size(idx, &r.k));
  r.b = std::make_shared<Buf>(share(idx));
  return r;
}

uint64_t rec_gather_vec_ibuf(Tape &t, uint64_t vi, const tlrt_buffer *idx) {
  const IndexBuf ix = index_buffer(t, idx, "idx");
  const In v = in(t, vi, "v");
  const uint64_t n = v.s.numel();
  Buf y = TAPE_CALL(tlrt_gather_vec_ibuf, v.v, n, ix.get());
  return push(t, std::move(y), shape1(ix.k), {vi}, kReadsNothing,
              [n, ix](const Tape &, const Node &, const tlrt_buffer *g, std::vector<Buf> &o) {
                o[0] = TAPE_CALL(tlrt_scatter_add_ibuf, nullptr, g, n, ix.get());
              });
}

uint64_t rec_gather_rows_ibuf(Tape &t, uint64_t mi, const tlrt_buffer *idx) {
  const IndexBuf ix = index_buffer(t, idx, "idx");
  const In m = in(t, mi, "mat");
  need_rank(m, "mat", 2);
  const uint64_t rows = m.s.d[0], cols = m.s.d[1];
  Buf y = TAPE_CALL(tlrt_gather_rows_ibuf, m.v, rows, cols, ix.get());
  return push(t, std::move(y), shape2(ix.k, cols), {mi}, kReadsNothing,
              [rows, cols, ix](const Tape &, const Node &, const tlrt_buffer *g,
                               std::vector<Buf> &o) {
                o[0] = TAPE_CALL(tlrt_scatter_add_rows_ibuf, nullptr, g, rows, cols, ix.get());
              });
}

uint64_t rec_scatter_add_ibuf(Tape &t, uint64_t xi, uint64_t vi, const tlrt_buffer *idx) {
  const IndexBuf ix = index_buffer(t, idx, "idx");
  const In x = in(t, xi, "x"), v = in(t, vi, "vals");
  need_rank(v, "vals", 1);
  if (v.s.d[0] != ix.k)
    fail(TLRT_ERR_SHAPE, "argument vals has shape %s, argument idx has %llu elements",
         v.s.str().c_str(), (ull)ix.k);
  const uint64_t n = x.s.numel();
  Buf y = TAPE_CALL(tlrt_scatter_add_ibuf, x.v, v.v, n, ix.get());
  return push(t, std::move(y), x.s, {xi, vi}, kReadsNothing,
              [n, ix](const Tape &t, const Node &nd, const tlrt_buffer *g,
                      std::vector<Buf> &o) {
                if (need(t, nd, 0)) o[0] = share(g);
                if (need(t, nd, 1)) o[1] = TAPE_CALL(tlrt_gather_vec_ibuf, g, n, ix.get());
              });
}

uint64_t rec_scatter_add_rows_ibuf(Tape &t, uint64_t mi, uint64_t vi, const tlrt_buffer *idx) {
  const IndexBuf ix = index_buffer(t, idx, "idx");
  const In m = in(t, mi, "mat"), v = in(t, vi, "vals");
  need_rank(m, "mat", 2);
  need_rank(v, "vals", 2);
  const uint64_t rows = m.s.d[0], cols = m.s.d[1];
  if (v.s.d[0] != ix.k || v.s.d[1] != cols)
    fail(TLRT_ERR_SHAPE, "argument vals has shape %s, expected (k, cols) = (%llu, %llu) for "
         "argument idx of %llu elements and argument mat of shape %s", v.s.str().c_str(),
         (ull)ix.k, (ull)cols, (ull)ix.k, m.s.str().c_str());
  Buf y = TAPE_CALL(tlrt_scatter_add_rows_ibuf, m.v, v.v, rows, cols, ix.get());
  return push(t, std::move(y), m.s, {mi, vi}, kReadsNothing,
              [rows, cols, ix](const Tape &t, const Node &nd, const tlrt_buffer *g,
                               std::vector<Buf> &o) {
                if (need(t, nd, 0)) o[0] = share(g);
                if (need(t, nd, 1))
                  o[1] = TAPE_CALL(tlrt_gather_rows_ibuf, g, rows, cols, ix.get());
              });
}

// ---- softmax, layer norm, products --------------------------------------------------------

uint64_t rec_softmax(Tape &t, uint64_t xi, bool log) {
  const In x = in(t, xi, "x");
  uint64_t r, c;
  last_axis(x.s, &r, &c);
  Buf y = log ? TAPE_CALL(tlrt_log_softmax, x.v, r, c) : TAPE_CALL(tlrt_softmax, x.v, r, c);
  return push(t, std::move(y), x.s, {xi}, kReadsSelf,
              [r, c, log](const Tape &, const Node &n, const tlrt_buffer *g,
                          std::vector<Buf> &o) {
                o[0] = log ? TAPE_CALL(tlrt_log_softmax_bwd, own_value(n), g, r, c)
                           : TAPE_CALL(tlrt_softmax_bwd, own_value(n), g, r, c);
              });
}

uint64_t rec_layer_norm(Tape &t, uint64_t xi, uint64_t gi, uint64_t bi, double eps) {
  const In x = in(t, xi, "x"), gm = in(t, gi, "gamma"), bt = in(t, bi, "beta");
  need_rank_at_least(x, "x", 1);
  const uint64_t c = x.s.d[x.s.rank - 1], r = prod(x.s, 0, x.s.rank - 1);
  if (gm.s != shape1(c))
    fail(TLRT_ERR_SHAPE, "argument gamma has shape %s, expected (%llu) for argument x of shape %s",
         gm.s.str().c_str(), (ull)c, x.s.str().c_str());
  if (bt.s != shape1(c))
    fail(TLRT_ERR_SHAPE, "argument beta has shape %s, expected (%llu) for argument x of shape %s",
         bt.s.str().c_str(), (ull)c, x.s.str().c_str());
  tlrt_buffer *y = nullptr, *mean = nullptr, *istd = nullptr;
  const tlrt_status s = tlrt_layer_norm_fwd(x.v, gm.v, bt.v, r, c, eps, &y, &mean, &istd);
  Buf Y(y), M(mean), I(istd);
  check(s);
  std::vector<Buf> saved;
  saved.push_back(std::move(M));
  saved.push_back(std::move(I));
  return push(t, std::move(Y), x.s, {xi, gi, bi}, reads_parent(0) | reads_parent(1),
              [r, c](const Tape &t, const Node &n, const tlrt_buffer *g,
                     std::vector<Buf> &o) {
                tlrt_buffer *dx = nullptr, *dg = nullptr, *db = nullptr;
                const tlrt_status s = tlrt_layer_norm_bwd(
                    g, parent_value(t, n, 0), n.saved[0].get(), n.saved[1].get(),
                    parent_value(t, n, 1), r, c, &dx, &dg, &db);
                Buf DX(dx), DG(dg), DB(db);
                check(s);
                if (need(t, n, 0)) o[0] = std::move(DX);
                if (need(t, n, 1)) o[1] = std::move(DG);
                if (need(t, n, 2)) o[2] = std::move(DB);
              },
              std::move(saved));
}

uint64_t rec_rms_norm(Tape &t, uint64_t xi, uint64_t gi, double eps) {
  const In x = in(t, xi, "x");
  const bool has_g = gi != TLRT_TAPE_NONE;
  In gm{};
  if (has_g) gm = in(t, gi, "gamma");
  need_rank_at_least(x, "x", 1);
  const uint64_t c = x.s.d[x.s.rank - 1], r = prod(x.s, 0, x.s.rank - 1);
  if (has_g && gm.s != shape1(c))
    fail(TLRT_ERR_SHAPE, "argument gamma has shape %s, expected (%llu) for argument x of shape %s",
         gm.s.str().c_str(), (ull)c, x.s.str().c_str());
  tlrt_buffer *y = nullptr, *inv = nullptr;
  const tlrt_status s = tlrt_rms_norm_fwd(x.v, has_g ? gm.v : nullptr, r, c, eps, &y, &inv);
  Buf Y(y), I(inv);
  check(s);
  std::vector<Buf> saved;
  saved.push_back(std::move(I));
  std::vector<uint64_t> parents = {xi};
  if (has_g) parents.push_back(gi);
  return push(t, std::move(Y), x.s, std::move(parents),
              has_g ? reads_parent(0) | reads_parent(1) : reads_parent(0),
              [r, c, has_g](const Tape &t, const Node &n, const tlrt_buffer *g,
                            std::vector<Buf> &o) {
                // dgamma is required with a gamma (and computed even when gamma needs no
                // gradient, as layer norm's); without one, no column sums.
                tlrt_buffer *dx = nullptr, *dg = nullptr;
                const tlrt_status s = tlrt_rms_norm_bwd(
                    g, parent_value(t, n, 0), has_g ? parent_value(t, n, 1) : nullptr,
                    n.saved[0].get(), r, c, &dx, has_g ? &dg : nullptr);
                Buf DX(dx), DG(dg);
                check(s);
                if (need(t, n, 0)) o[0] = std::move(DX);
                if (has_g && need(t, n, 1)) o[1] = std::move(DG);
              },
              std::move(saved));
}

// C (m, p) = A (m, n) B (n, p) per batch, operands stored transposed when their flag is set.
// With G = dC: dA = G B^T and dB = A^T G; for a stored-transposed operand its gradient is the
// transpose of that, which is again one product of the stored buffers with suitable flags.
uint64_t rec_product(Tape &t, uint64_t ai, uint64_t bi, bool ta, bool tb, bool batched) {
  const In a = in(t, ai, "a"), b = in(t, bi, "b");
  const uint32_t rk = batched ? 3 : 2, o = batched ? 1 : 0;
  need_rank(a, "a", rk);
  need_rank(b, "b", rk);
  if (batched && a.s.d[0] != b.s.d[0])
    fail(TLRT_ERR_SHAPE, "batches differ: argument a has shape %s, argument b has shape %s",
         a.s.str().c_str(), b.s.str().c_str());
  const uint64_t batch = batched ? a.s.d[0] : 1;
  const uint64_t m = ta ? a.s.d[o + 1] : a.s.d[o], n = ta ? a.s.d[o] : a.s.d[o + 1];
  const uint64_t nb = tb ? b.s.d[o + 1] : b.s.d[o], p = tb ? b.s.d[o] : b.s.d[o + 1];
  if (n != nb)
    fail(TLRT_ERR_SHAPE,
         "inner dimensions differ: argument a has shape %s (trans_a = %s), argument b has shape "
         "%s (trans_b = %s)", a.s.str().c_str(), ta ? "true" : "false", b.s.str().c_str(),
         tb ? "true" : "false");
  Buf y = TAPE_CALL(tlrt_bmm, a.v, b.v, batch, m, n, p, ta, tb);
  Shape ys;
  ys.rank = rk;
  if (batched) ys.d[0] = batch;
  ys.d[o] = m;
  ys.d[o + 1] = p;
  return push(
      t, std::move(y), ys, {ai, bi}, (a.rg ? reads_parent(1) : 0) | (b.rg ? reads_parent(0) : 0),
      [batch, m, n, p, ta, tb](const Tape &t, const Node &nd, const tlrt_buffer *g,
                               std::vector<Buf> &out) {
        // dA reads only b, dB only a (each saved only when that gradient is needed).
        if (need(t, nd, 0)) {
          const tlrt_buffer *B = parent_value(t, nd, 1);
          if (!ta)  // dA (m, n) = G (m, p) B^T; B^T is b read transposed unless b is stored so
            out[0] = TAPE_CALL(tlrt_bmm, g, B, batch, m, p, n, false, !tb);
          else  // stored (n, m): dA^T = B G^T (B is b stored transposed when tb)
            out[0] = TAPE_CALL(tlrt_bmm, B, g, batch, n, p, m, tb, true);
        }
        if (need(t, nd, 1)) {
          const tlrt_buffer *A = parent_value(t, nd, 0);
          if (!tb)  // dB (n, p) = A^T G
            out[1] = TAPE_CALL(tlrt_bmm, A, g, batch, n, m, p, !ta, false);
          else  // stored (p, n): dB^T = G^T A
            out[1] = TAPE_CALL(tlrt_bmm, g, A, batch, p, m, n, true, ta);
        }
      });
}

// ---- spectral convolution, selective scan -------------------------------------------------

uint64_t rec_spectral(Tape &t, uint64_t xi, uint64_t ri, uint64_t ii) {
  const In x = in(t, xi, "x"), wr = in(t, ri, "w_re"), wi = in(t, ii, "w_im");
  need_rank(x, "x", 2);
  need_rank(wr, "w_re", 3);
  need_same(wr, "w_re", wi, "w_im");
  const uint64_t grid = x.s.d[0], width = x.s.d[1], modes = wr.s.d[0];
  if (wr.s.d[1] != width || wr.s.d[2] != width)
    fail(TLRT_ERR_SHAPE, "argument w_re has shape %s, expected (modes, %llu, %llu) for argument x "
         "of shape %s", wr.s.str().c_str(), (ull)width, (ull)width, x.s.str().c_str());
  Buf y = TAPE_CALL(tlrt_spectral_conv1d_rfft_fwd, x.v, wr.v, wi.v, grid, width, modes);
  return push(t, std::move(y), x.s, {xi, ri, ii},
              reads_parent(0) | reads_parent(1) | reads_parent(2),
              [grid, width, modes](const Tape &t, const Node &n, const tlrt_buffer *g,
                                   std::vector<Buf> &o) {
                const tlrt_buffer *X = parent_value(t, n, 0), *R = parent_value(t, n, 1),
                                  *I = parent_value(t, n, 2);
                if (need(t, n, 0))
                  o[0] = TAPE_CALL(tlrt_spectral_conv1d_rfft_bwd_x, X, R, I, g, grid, width, modes);
                if (need(t, n, 1) || need(t, n, 2)) {
                  tlrt_buffer *dr = nullptr, *di = nullptr;
                  const tlrt_status s = tlrt_spectral_conv1d_rfft_bwd_w(X, R, I, g, grid, width,
                                                                        modes, &dr, &di);
                  Buf DR(dr), DI(di);
                  check(s);
                  if (need(t, n, 1)) o[1] = std::move(DR);
                  if (need(t, n, 2)) o[2] = std::move(DI);
                }
              });
}

uint64_t rec_scan(Tape &t, uint64_t ai, uint64_t bi, uint64_t xi, uint64_t hi, bool var) {
  const In A = in(t, ai, "A"), B = in(t, bi, "B"), X = in(t, xi, "X"), h = in(t, hi, "h0");
  need_rank(X, "X", 2);
  const uint64_t T = X.s.d[0], D = X.s.d[1];
  if (var) {
    need_same(A, "A", X, "X");
    need_same(B, "B", X, "X");
  } else {
    if (A.s != shape1(D))
      fail(TLRT_ERR_SHAPE, "argument A has shape %s, expected (%llu) for argument X of shape %s",
           A.s.str().c_str(), (ull)D, X.s.str().c_str());
    if (B.s != shape1(D))
      fail(TLRT_ERR_SHAPE, "argument B has shape %s, expected (%llu) for argument X of shape %s",
           B.s.str().c_str(), (ull)D, X.s.str().c_str());
  }
  if (h.s != shape1(D))
    fail(TLRT_ERR_SHAPE, "argument h0 has shape %s, expected (%llu) for argument X of shape %s",
         h.s.str().c_str(), (ull)D, X.s.str().c_str());
  Buf y = var ? TAPE_CALL(tlrt_selective_scan_diag_var_fwd, A.v, B.v, X.v, h.v, T, D)
              : TAPE_CALL(tlrt_selective_scan_diag_fwd, A.v, B.v, X.v, h.v, T, D);
  return push(t, std::move(y), X.s, {ai, bi, xi, hi},
              reads_parent(0) | reads_parent(1) | reads_parent(2) | reads_parent(3) | kReadsSelf,
              [T, D, var](const Tape &t, const Node &n, const tlrt_buffer *g,
                          std::vector<Buf> &o) {
                tlrt_buffer *r[4] = {nullptr, nullptr, nullptr, nullptr};
                const tlrt_buffer *a = parent_value(t, n, 0), *b = parent_value(t, n, 1),
                                  *x = parent_value(t, n, 2), *h0 = parent_value(t, n, 3);
                const tlrt_status s =
                    var ? tlrt_selective_scan_diag_var_bwd(a, b, x, h0, own_value(n), g, T, D,
                                                           &r[0], &r[1], &r[2], &r[3])
                        : tlrt_selective_scan_diag_bwd(a, b, x, h0, own_value(n), g, T, D, &r[0],
                                                       &r[1], &r[2], &r[3]);
                Buf R[4] = {Buf(r[0]), Buf(r[1]), Buf(r[2]), Buf(r[3])};
                check(s);
                for (size_t i = 0; i < 4; ++i)
                  if (need(t, n, i)) o[i] = std::move(R[i]);
              });
}

// ---- convolution, pooling, attention ------------------------------------------------------

// Output extent of a window of k cells dilated by dil (extent dil (k - 1) + 1) sliding with
// stride s over `in` cells padded with p cells on both sides: floor((in + 2 p - extent) / s) + 1,
// or 0 when the window exceeds the padded axis (the GEOMETRY of tlrt_conv.h and tlrt_pool.h).
// Evaluated only after the op accepted the geometry (k, s >= 1; the extent fits in 64 bits), in
// 128 bits so that nothing wraps.
uint64_t window_extent(uint64_t in, uint64_t k, uint64_t dil, uint64_t s, uint64_t p) {
  using u128 = unsigned __int128;
  const u128 padded = (u128)in + 2 * (u128)p, ext = (u128)dil * (k - 1) + 1;
  return padded < ext ? 0 : (uint64_t)((padded - ext) / s + 1);
}

// The shape the tape derived for an op's output must describe the op's buffer (the node
// invariant of abi/tlrt_tape.h); a disagreement is a bug here, never the host's.
void expect_numel(const Buf &y, const Shape &s) {
  uint64_t size = 0, n = 0;
  check(tlrt_buffer_size(y.get(), &size));
  if (!exact_numel(s, &n) || n != size)
    fail(TLRT_ERR_INTERNAL, "derived output shape %s does not match the op's %llu elements",
         s.str().c_str(), (ull)size);
}

// A recorded convolution's geometry, in the terms of tlrt_conv_fwd; two_d records the 2-D entry
// points instead (same results; their messages use tlrt_tape_conv2d's argument names).
struct ConvGeo {
  bool two_d = false;
  uint32_t r = 0;  // spatial axes
  uint64_t N = 0, C = 0, Cout = 0, groups = 0;
  uint64_t in[TLRT_TAPE_MAX_RANK] = {}, k[TLRT_TAPE_MAX_RANK] = {}, s[TLRT_TAPE_MAX_RANK] = {},
           p[TLRT_TAPE_MAX_RANK] = {}, dil[TLRT_TAPE_MAX_RANK] = {};
};

tlrt_status conv_fwd(const ConvGeo &g, const tlrt_buffer *w, const tlrt_buffer *b,
                     const tlrt_buffer *x, tlrt_buffer **out) {
  if (g.two_d)
    return tlrt_conv2d_fwd(w, b, x, g.N, g.C, g.in[0], g.in[1], g.Cout, g.k[0], g.k[1], g.s[0],
                           g.s[1], g.p[0], g.p[1], g.dil[0], g.dil[1], g.groups, out);
  return tlrt_conv_fwd(w, b, x, g.N, g.C, g.Cout, g.in, g.r, g.k, g.s, g.p, g.dil, g.groups, out);
}

tlrt_status conv_bwd(const ConvGeo &g, const tlrt_buffer *w, const tlrt_buffer *x,
                     const tlrt_buffer *gy, tlrt_buffer **dw, tlrt_buffer **db,
                     tlrt_buffer **dx) {
  if (g.two_d)
    return tlrt_conv2d_bwd(w, x, gy, g.N, g.C, g.in[0], g.in[1], g.Cout, g.k[0], g.k[1], g.s[0],
                           g.s[1], g.p[0], g.p[1], g.dil[0], g.dil[1], g.groups, dw, db, dx);
  return tlrt_conv_bwd(w, x, gy, g.N, g.C, g.Cout, g.in, g.r, g.k, g.s, g.p, g.dil, g.groups, dw,
                       db, dx);
}

// x (N, C, spatial...), w (C_out, C / groups, kernel...), optional b (C_out); parents (x, w[, b]).
uint64_t rec_conv(Tape &t, uint64_t xi, uint64_t wi, uint64_t bi, const uint64_t *stride,
                  const uint64_t *padding, const uint64_t *dilation, uint64_t groups,
                  bool two_d) {
  const In x = in(t, xi, "x"), w = in(t, wi, "w");
  if (two_d) {
    need_rank(x, "x", 4);
    need_rank(w, "w", 4);
  } else {
    need_rank_at_least(x, "x", 3);
    if (w.s.rank != x.s.rank)
      fail(TLRT_ERR_SHAPE, "ranks differ: argument w has shape %s, argument x has shape %s",
           w.s.str().c_str(), x.s.str().c_str());
  }
  if (stride == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument stride is NULL");
  if (padding == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument padding is NULL");
  ConvGeo g;
  g.two_d = two_d;
  g.r = x.s.rank - 2;
  g.N = x.s.d[0];
  g.C = x.s.d[1];
  g.Cout = w.s.d[0];
  g.groups = groups;
  for (uint32_t i = 0; i < g.r; ++i) {
    g.in[i] = x.s.d[i + 2];
    g.k[i] = w.s.d[i + 2];
    g.s[i] = stride[i];
    g.p[i] = padding[i];
    g.dil[i] = dilation ? dilation[i] : 1;
  }
  // groups == 0 and channels not divisible by groups are the op's INVALID_ARGUMENT.
  if (groups != 0 && g.C % groups == 0 && w.s.d[1] != g.C / groups)
    fail(TLRT_ERR_SHAPE, "argument w has shape %s, expected (C_out, %llu, ...) for argument x of "
         "shape %s and groups = %llu", w.s.str().c_str(), (ull)(g.C / groups), x.s.str().c_str(),
         (ull)groups);
  std::vector<uint64_t> parents = {xi, wi};
  const tlrt_buffer *bias = nullptr;
  if (bi != TLRT_TAPE_NONE) {
    const In b = in(t, bi, "b");
    if (b.s != shape1(g.Cout))
      fail(TLRT_ERR_SHAPE, "argument b has shape %s, expected (%llu) for argument w of shape %s",
           b.s.str().c_str(), (ull)g.Cout, w.s.str().c_str());
    bias = b.v;
    parents.push_back(bi);
  }
  Buf y = call([&](tlrt_buffer **o) { return conv_fwd(g, w.v, bias, x.v, o); });
  Shape ys = x.s;
  ys.d[1] = g.Cout;
  for (uint32_t i = 0; i < g.r; ++i)
    ys.d[i + 2] = window_extent(g.in[i], g.k[i], g.dil[i], g.s[i], g.p[i]);
  expect_numel(y, ys);
  return push(t, std::move(y), ys, std::move(parents), reads_parent(0) | reads_parent(1),
              [g](const Tape &t, const Node &n, const tlrt_buffer *gy, std::vector<Buf> &o) {
                const bool nx = need(t, n, 0), nw = need(t, n, 1);
                const bool nb = n.parents.size() > 2 && need(t, n, 2);
                tlrt_buffer *dw = nullptr, *db = nullptr, *dx = nullptr;
                const tlrt_status s = conv_bwd(g, parent_value(t, n, 1), parent_value(t, n, 0), gy,
                                               nw ? &dw : nullptr, nb ? &db : nullptr,
                                               nx ? &dx : nullptr);
                Buf DW(dw), DB(db), DX(dx);
                check(s);
                o[0] = std::move(DX);
                o[1] = std::move(DW);
                if (nb) o[2] = std::move(DB);
              });
}

// 2-D max / average pool of x (N, C, H, W).
struct PoolGeo {
  uint64_t N, C, H, W, kh, kw, sh, sw, ph, pw;
  bool max, count_include_pad;
};

uint64_t rec_pool(Tape &t, uint64_t xi, PoolGeo g) {
  const In x = in(t, xi, "x");
  need_rank(x, "x", 4);
  g.N = x.s.d[0];
  g.C = x.s.d[1];
  g.H = x.s.d[2];
  g.W = x.s.d[3];
  Buf y = g.max ? TAPE_CALL(tlrt_maxpool2d_fwd, x.v, g.N, g.C, g.H, g.W, g.kh, g.kw, g.sh, g.sw,
                            g.ph, g.pw)
                : TAPE_CALL(tlrt_avgpool2d_fwd, x.v, g.N, g.C, g.H, g.W, g.kh, g.kw, g.sh, g.sw,
                            g.ph, g.pw, g.count_include_pad);
  Shape ys = x.s;  // pooling gives an empty axis for an empty input axis, whatever the padding
  ys.d[2] = g.H == 0 ? 0 : window_extent(g.H, g.kh, 1, g.sh, g.ph);
  ys.d[3] = g.W == 0 ? 0 : window_extent(g.W, g.kw, 1, g.sw, g.pw);
  expect_numel(y, ys);
  return push(t, std::move(y), ys, {xi}, g.max ? reads_parent(0) : kReadsNothing,
              [g](const Tape &t, const Node &n, const tlrt_buffer *gy, std::vector<Buf> &o) {
                o[0] = g.max ? TAPE_CALL(tlrt_maxpool2d_bwd, parent_value(t, n, 0), gy, g.N, g.C,
                                         g.H, g.W, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw)
                             : TAPE_CALL(tlrt_avgpool2d_bwd, gy, g.N, g.C, g.H, g.W, g.kh, g.kw,
                                         g.sh, g.sw, g.ph, g.pw, g.count_include_pad);
              });
}

// Fused attention of q, k, v (bh, len, d); workspace: saved[0] = the forward's lse, saved[1] =
// the retained mask (when there is one).
uint64_t rec_attention(Tape &t, uint64_t qi, uint64_t ki, uint64_t vi,
                       const tlrt_buffer *mask, double scale, bool causal, double fill) {
  const In q = in(t, qi, "q"), k = in(t, ki, "k"), v = in(t, vi, "v");
  need_rank(q, "q", 3);
  need_same(q, "q", k, "k");
  need_same(q, "q", v, "v");
  const uint64_t bh = q.s.d[0], len = q.s.d[1], d = q.s.d[2];
  std::vector<Buf> saved(1);
  if (mask != nullptr) {
    check_buffer(t, mask, "mask");
    saved.push_back(share(mask));
  }
  tlrt_buffer *o = nullptr, *lse = nullptr;
  const tlrt_status s =
      tlrt_flash_attention_fwd(q.v, k.v, v.v, mask, bh, len, d, scale, causal, fill, &o, &lse);
  Buf O(o), L(lse);
  check(s);
  saved[0] = std::move(L);
  return push(t, std::move(O), q.s, {qi, ki, vi},
              reads_parent(0) | reads_parent(1) | reads_parent(2) | kReadsSelf,
              [bh, len, d, scale, causal, fill](const Tape &t, const Node &n,
                                                const tlrt_buffer *g, std::vector<Buf> &out) {
                const tlrt_buffer *m = n.saved.size() > 1 ? n.saved[1].get() : nullptr;
                tlrt_buffer *dq = nullptr, *dk = nullptr, *dv = nullptr;
                const tlrt_status s = tlrt_flash_attention_bwd(
                    parent_value(t, n, 0), parent_value(t, n, 1), parent_value(t, n, 2), m, g,
                    own_value(n), n.saved[0].get(), bh, len, d, scale, causal, fill, &dq, &dk,
                    &dv);
                Buf DQ(dq), DK(dk), DV(dv);
                check(s);
                if (need(t, n, 0)) out[0] = std::move(DQ);
                if (need(t, n, 1)) out[1] = std::move(DK);
                if (need(t, n, 2)) out[2] = std::move(DV);
              },
              std::move(saved));
}

// Attention of the views of geometry g over parent nodes whose values hold q, k and v: one parent
// (a fused qkv node: q, k, v are its value) or three. Output shape os (token-major: (B, Tq,
// Hq d)); workspace: saved[0] = the forward's lse. The backward is one tlrt_attention_bwd writing
// through the same views into fresh zero buffers shaped like the parents, so a fused node gets
// its whole gradient from one call (its three views tile it).
uint64_t push_attention(Tape &t, std::vector<uint64_t> parents, const tlrt_buffer *qv,
                        const tlrt_buffer *kv, const tlrt_buffer *vv,
                        const tlrt_attention_geometry &g, bool causal, double scale,
                        const Shape &os) {
  const bool fused = parents.size() == 1;
  tlrt_buffer *o = nullptr, *lse = nullptr;
  const tlrt_status s =
      tlrt_attention_fwd(qv, kv, vv, nullptr, &g, scale, causal, -INFINITY, &o, &lse);
  Buf O(o), L(lse);
  check(s);
  std::vector<Buf> saved;
  saved.push_back(std::move(L));
  Reads reads = kReadsSelf;
  for (size_t i = 0; i < parents.size(); ++i) reads |= reads_parent(i);
  return push(t, std::move(O), os, std::move(parents), reads,
              [g, causal, scale, fused](const Tape &t, const Node &n, const tlrt_buffer *gy,
                                        std::vector<Buf> &out) {
                const size_t np = n.parents.size();
                tlrt_buffer *d[3] = {nullptr, nullptr, nullptr};
                for (size_t i = 0; i < np; ++i) {
                  if (!need(t, n, i)) continue;
                  out[i] = TAPE_CALL(tlrt_buffer_zeros, t.device,
                                     t.nodes[n.parents[i]].shape.numel());
                  d[i] = out[i].get();
                }
                if (fused) d[1] = d[2] = d[0];
                check(tlrt_attention_bwd(parent_value(t, n, 0), parent_value(t, n, fused ? 0 : 1),
                                         parent_value(t, n, fused ? 0 : 2), nullptr, gy,
                                         own_value(n), n.saved[0].get(), &g, scale, causal,
                                         -INFINITY, d[0], d[1], d[2], &g));
              },
              std::move(saved));
}

// A geometry of B sequences with every row of d elements: q, k, v each (B, len, heads d) rows of
// `width` elements per token starting at their offsets (strides batch = len width, token =
// width, head = d).
tlrt_attention_geometry attention_geometry(uint64_t batch, uint64_t hq, uint64_t hkv,
                                           uint64_t tq, uint64_t tk, uint64_t d) {
  tlrt_attention_geometry g{};
  g.struct_size = sizeof g;
  g.batch = batch;
  g.heads_q = hq;
  g.heads_kv = hkv;
  g.len_q = tq;
  g.len_k = tk;
  g.d = d;
  g.q_stride_head = g.k_stride_head = g.v_stride_head = d;
  return g;
}

void check_heads(uint64_t hq, uint64_t hkv) {
  if (hkv == 0 || hq == 0 || hq % hkv != 0)
    fail(TLRT_ERR_INVALID_ARGUMENT,
         "argument heads_q = %llu must be a positive multiple of argument heads_kv = %llu",
         (ull)hq, (ull)hkv);
}

// Self-attention of a fused projection qkv (B, T, (Hq + 2 Hkv) d): per token Hq query heads,
// then Hkv key heads, then Hkv value heads; out (B, T, Hq d).
uint64_t rec_attention_qkv(Tape &t, uint64_t qi, uint64_t hq, uint64_t hkv, bool causal,
                           double scale) {
  const In x = in(t, qi, "qkv");
  check_heads(hq, hkv);
  need_rank(x, "qkv", 3);
  uint64_t heads = 0;
  if (__builtin_mul_overflow(hkv, 2, &heads) || __builtin_add_overflow(heads, hq, &heads) ||
      x.s.d[2] % heads != 0)
    fail(TLRT_ERR_SHAPE,
         "argument qkv has shape %s: its last axis must hold heads_q + 2 heads_kv = %llu + 2 * "
         "%llu heads of equal width",
         x.s.str().c_str(), (ull)hq, (ull)hkv);
  const uint64_t B = x.s.d[0], T = x.s.d[1], W = x.s.d[2], d = W / heads;
  tlrt_attention_geometry g = attention_geometry(B, hq, hkv, T, T, d);
  g.q_stride_batch = g.k_stride_batch = g.v_stride_batch = T * W;
  g.q_stride_token = g.k_stride_token = g.v_stride_token = W;
  g.k_offset = hq * d;
  g.v_offset = (hq + hkv) * d;
  Shape os = x.s;
  os.d[2] = hq * d;
  return push_attention(t, {qi}, x.v, x.v, x.v, g, causal, scale, os);
}

// Attention of q (B, Tq, Hq d) over k and v (B, Tk, Hkv d); out (B, Tq, Hq d).
uint64_t rec_attention_heads(Tape &t, uint64_t qi, uint64_t ki, uint64_t vi, uint64_t hq,
                             uint64_t hkv, bool causal, double scale) {
  const In q = in(t, qi, "q"), k = in(t, ki, "k"), v = in(t, vi, "v");
  check_heads(hq, hkv);
  need_rank(q, "q", 3);
  need_rank(k, "k", 3);
  need_same(k, "k", v, "v");
  const uint64_t B = q.s.d[0], Tq = q.s.d[1], Cq = q.s.d[2], Tk = k.s.d[1], Ck = k.s.d[2];
  if (Cq % hq != 0)
    fail(TLRT_ERR_SHAPE, "argument q has shape %s: its last axis is not argument heads_q = %llu "
         "heads of equal width", q.s.str().c_str(), (ull)hq);
  const uint64_t d = Cq / hq;
  uint64_t ck = 0;
  if (k.s.d[0] != B || __builtin_mul_overflow(hkv, d, &ck) || Ck != ck)
    fail(TLRT_ERR_SHAPE,
         "argument k has shape %s, expected (%llu, len_k, heads_kv * %llu) for argument q of "
         "shape %s and argument heads_kv = %llu",
         k.s.str().c_str(), (ull)B, (ull)d, q.s.str().c_str(), (ull)hkv);
  tlrt_attention_geometry g = attention_geometry(B, hq, hkv, Tq, Tk, d);
  g.q_stride_batch = Tq * Cq;
  g.q_stride_token = Cq;
  g.k_stride_batch = g.v_stride_batch = Tk * Ck;
  g.k_stride_token = g.v_stride_token = Ck;
  return push_attention(t, {qi, ki, vi}, q.v, k.v, v.v, g, causal, scale, q.s);
}

// A constant leaf made inside a composite (no gradient).// A constant leaf made inside a composite (no gradient).
uint64_t const_leaf(Tape &t, Buf v, const Shape &s) { return push_leaf(t, std::move(v), s, false); }

// ---- composites ----------------------------------------------------------------------------

// One node: tlrt_linear_fwd (product, bias, activation); the backward is
// tlrt_linear_bwd, which reads x, w and (GELU) pre, kept as the node's workspace.
uint64_t rec_linear(Tape &t, uint64_t xi, uint64_t wi, uint64_t bi, uint32_t act) {
  const In x = in(t, xi, "x"), w = in(t, wi, "w");
  need_rank(x, "x", 2);
  need_rank(w, "w", 2);
  if (w.s.d[1] != x.s.d[1])
    fail(TLRT_ERR_SHAPE, "in features differ: argument x has shape %s (batch, in), argument w "
         "has shape %s (out, in)", x.s.str().c_str(), w.s.str().c_str());
  const tlrt_buffer *bv = nullptr;
  if (bi != TLRT_TAPE_NONE) {
    const In b = in(t, bi, "b");
    if (b.s != shape1(w.s.d[0]))
      fail(TLRT_ERR_SHAPE, "argument b has shape %s, expected (%llu) for argument w of shape %s",
           b.s.str().c_str(), (ull)w.s.d[0], w.s.str().c_str());
    bv = b.v;
  }
  const uint64_t rows = x.s.d[0], nin = x.s.d[1], nout = w.s.d[0];
  tlrt_buffer *y = nullptr, *pre = nullptr;
  const tlrt_status s = tlrt_linear_fwd(x.v, w.v, bv, rows, nin, nout, act, &y,
                                        act == TLRT_ACT_NONE ? nullptr : &pre);
  Buf Y(y), P(pre);
  check(s);
  std::vector<Buf> saved;
  if (P) saved.push_back(std::move(P));
  std::vector<uint64_t> parents = {xi, wi};
  if (bi != TLRT_TAPE_NONE) parents.push_back(bi);
  return push(t, std::move(Y), shape2(rows, nout), std::move(parents),
              reads_parent(0) | reads_parent(1),
              [rows, nin, nout, act](const Tape &t, const Node &n, const tlrt_buffer *g,
                                     std::vector<Buf> &out) {
                const bool has_b = n.parents.size() == 3;
                tlrt_buffer *dx = nullptr, *dw = nullptr, *db = nullptr;
                const tlrt_status s = tlrt_linear_bwd(
                    g, parent_value(t, n, 0), parent_value(t, n, 1),
                    n.saved.empty() ? nullptr : n.saved[0].get(), rows, nin, nout, act,
                    need(t, n, 0) ? &dx : nullptr, need(t, n, 1) ? &dw : nullptr,
                    has_b && need(t, n, 2) ? &db : nullptr);
                Buf DX(dx), DW(dw), DB(db);
                check(s);
                out[0] = std::move(DX);
                out[1] = std::move(DW);
                if (has_b) out[2] = std::move(DB);
              },
              std::move(saved));
}

uint64_t rec_mse(Tape &t, uint64_t pi, uint64_t ti) {
  const In p = in(t, pi, "pred"), q = in(t, ti, "target");
  need_same(p, "pred", q, "target");
  const uint64_t d = rec_binary(t, Bin::Sub, pi, ti);
  const uint64_t sq = rec_binary(t, Bin::Mul, d, d);
  return rec_reduce_all(t, sq, true);
}

uint64_t rec_cross_entropy(Tape &t, uint64_t li, const uint64_t *labels) {
  const In l = in(t, li, "logits");
  need_rank(l, "logits", 2);
  const uint64_t batch = l.s.d[0], classes = l.s.d[1];
  if (batch > 0 && labels == nullptr)
    fail(TLRT_ERR_NULL_ARGUMENT, "argument labels is NULL with batch %llu", (ull)batch);
  std::vector<uint64_t> flat(batch);
  for (uint64_t i = 0; i < batch; ++i) {
    if (labels[i] >= classes)
      fail(TLRT_ERR_INDEX, "argument labels: labels[%llu] = %llu is not < classes = %llu", (ull)i,
           (ull)labels[i], (ull)classes);
    flat[i] = i * classes + labels[i];
  }
  const uint64_t lsm = rec_softmax(t, li, true);
  const uint64_t picked = rec_gather_vec(t, lsm, flat.data(), batch);
  const uint64_t mean = rec_reduce_all(t, picked, true);
  return rec_neg(t, mean);
}

// One node (tlrt_cross_entropy_fwd / _bwd, abi/tlrt_softmax.h): the loss of log_softmax,
// gather of the labels' entries, mean, neg, bit for bit, values and gradients (a label outside
// [0, classes) picks +0 and is counted by tlrt_index_faults), with rows whose label equals
// ignore_index left out of the sum and of the mean's denominator. Saves the per-row statistics
// (m, log s) only; the logits are the parent's value.
uint64_t rec_cross_entropy_fused(Tape &t, uint64_t li, const tlrt_buffer *labels,
                                 int ignore) {
  const IndexBuf lb = index_buffer(t, labels, "labels");
  const In l = in(t, li, "logits");
  need_rank(l, "logits", 2);
  const uint64_t batch = l.s.d[0], classes = l.s.d[1];
  if (lb.k != batch)
    fail(TLRT_ERR_SHAPE, "argument labels has %llu elements, argument logits has shape %s",
         (ull)lb.k, l.s.str().c_str());
  tlrt_buffer *lo = nullptr, *st = nullptr;
  const tlrt_status s = tlrt_cross_entropy_fwd(l.v, lb.get(), batch, classes, ignore, &lo, &st);
  Buf loss(lo), stats(st);
  check(s);
  std::vector<Buf> saved;
  saved.push_back(std::move(stats));
  return push(t, std::move(loss), Shape{}, {li}, reads_parent(0),
              [lb, batch, classes, ignore](const Tape &t, const Node &n, const tlrt_buffer *g,
                                           std::vector<Buf> &o) {
                o[0] = TAPE_CALL(tlrt_cross_entropy_bwd, parent_value(t, n, 0), lb.get(),
                                 n.saved[0].get(), g, batch, classes, ignore);
              },
              std::move(saved));
}

uint64_t rec_batchnorm(Tape &t, uint64_t xi, uint64_t gi, uint64_t bi, double eps) {
  const In x = in(t, xi, "x"), gm = in(t, gi, "gamma"), bt = in(t, bi, "beta");
  need_rank(x, "x", 2);
  const uint64_t N = x.s.d[0], C = x.s.d[1];
  if (gm.s != shape1(C))
    fail(TLRT_ERR_SHAPE, "argument gamma has shape %s, expected (%llu) for argument x of shape %s",
         gm.s.str().c_str(), (ull)C, x.s.str().c_str());
  if (bt.s != shape1(C))
    fail(TLRT_ERR_SHAPE, "argument beta has shape %s, expected (%llu) for argument x of shape %s",
         bt.s.str().c_str(), (ull)C, x.s.str().c_str());
  // Per-channel statistics over the batch = layer norm of the rows of x^T (C, N).
  const uint64_t xt = rec_transpose2d(t, xi);
  const uint64_t one = const_leaf(t, TAPE_CALL(tlrt_buffer_full, t.device, N, 1.0), shape1(N));
  const uint64_t zero = const_leaf(t, TAPE_CALL(tlrt_buffer_zeros, t.device, N), shape1(N));
  const uint64_t ln = rec_layer_norm(t, xt, one, zero, eps);
  const uint64_t xh = rec_transpose2d(t, ln);
  const uint64_t gb = rec_vec_bcast(t, gi, N, true);
  const uint64_t y1 = rec_binary(t, Bin::Mul, xh, gb);
  const uint64_t bb = rec_vec_bcast(t, bi, N, true);
  return rec_binary(t, Bin::Add, y1, bb);
}

// Rows (batch * len, heads * dh) of a projection -> (batch * heads, len, dh), head h holding
// columns h * dh .. (h + 1) * dh - 1; merge_heads is its inverse.
uint64_t split_heads(Tape &t, uint64_t xi, uint64_t batch, uint64_t len, uint64_t heads,
                     uint64_t dh) {
  const uint64_t d4[4] = {batch, len, heads, dh}, d3[3] = {batch * heads, len, dh};
  const uint32_t perm[4] = {0, 2, 1, 3};
  return rec_reshape(t, rec_permute(t, rec_reshape(t, xi, d4, 4), perm), d3, 3);
}
uint64_t merge_heads(Tape &t, uint64_t ai, uint64_t batch, uint64_t len, uint64_t heads,
                     uint64_t dh) {
  const uint64_t d4[4] = {batch, heads, len, dh}, d2[2] = {batch * len, heads * dh};
  const uint32_t perm[4] = {0, 2, 1, 3};
  return rec_reshape(t, rec_permute(t, rec_reshape(t, ai, d4, 4), perm), d2, 2);
}

uint64_t rec_mha(Tape &t, uint64_t xi, const uint64_t w[4], const uint64_t b[4],
                 uint64_t heads, bool causal) {
  static const char *const wn[4] = {"w_q", "w_k", "w_v", "w_o"}, *const bn[4] = {"b_q", "b_k",
                                                                                 "b_v", "b_o"};
  const In x = in(t, xi, "x");
  need_rank(x, "x", 3);
  const uint64_t batch = x.s.d[0], len = x.s.d[1], dm = x.s.d[2];
  for (int i = 0; i < 4; ++i) {
    const In wi = in(t, w[i], wn[i]);
    if (wi.s != shape2(dm, dm))
      fail(TLRT_ERR_SHAPE, "argument %s has shape %s, expected (%llu, %llu) for argument x of "
           "shape %s", wn[i], wi.s.str().c_str(), (ull)dm, (ull)dm, x.s.str().c_str());
    if (b[i] == TLRT_TAPE_NONE) continue;
    const In bi = in(t, b[i], bn[i]);
    if (bi.s != shape1(dm))
      fail(TLRT_ERR_SHAPE, "argument %s has shape %s, expected (%llu) for argument x of shape %s",
           bn[i], bi.s.str().c_str(), (ull)dm, x.s.str().c_str());
  }
  if (heads == 0 || dm == 0 || dm % heads != 0)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument num_heads = %llu does not divide d_model = %llu "
         "(argument x has shape %s)", (ull)heads, (ull)dm, x.s.str().c_str());
  const uint64_t dh = dm / heads;
  uint64_t bh = 0;  // beyond 2^31 - 1 the attention op refuses it anyway; here it must not wrap
  if (__builtin_mul_overflow(batch, heads, &bh))
    fail(TLRT_ERR_INVALID_ARGUMENT, "batch * num_heads (%llu * %llu) is beyond 64 bits",
         (ull)batch, (ull)heads);
  const uint64_t rows[2] = {batch * len, dm};
  const uint64_t x2 = rec_reshape(t, xi, rows, 2);
  uint64_t qkv[3];
  for (int i = 0; i < 3; ++i)
    qkv[i] = split_heads(t, rec_linear(t, x2, w[i], b[i], TLRT_ACT_NONE), batch, len, heads,
                         dh);
  const uint64_t a = rec_attention(t, qkv[0], qkv[1], qkv[2], nullptr,
                                   1.0 / std::sqrt((double)dh), causal, -INFINITY);
  const uint64_t y =
      rec_linear(t, merge_heads(t, a, batch, len, heads, dh), w[3], b[3], TLRT_ACT_NONE);
  return rec_reshape(t, y, x.s.d, 3);
}

// Runs one recording body under the entry-point guard: out cleared first, the tape checked, and
// every node appended by a failing body removed again.
template <class Body>
tlrt_status record(const char *fn, tlrt_tape *tape, uint64_t *out, Body &&body) {
  return guarded(fn, [&] {
    clear_out_value(out, "out");
    Tape &t = tape_ref(tape);
    Rollback rb(t);
    ensure_room(t, 32);  // a composite appends at most 19 nodes (multi_head_attention)
    const size_t first = t.nodes.size();
    const uint64_t id = body(t);
    rb.commit();
    // The inner nodes of a composite were never given to the host: they are released at once,
    // so their values live only as long as a rule reads them (abi/tlrt_tape.h, MEMORY).
    const uint64_t last = id & 0xFFFFFFFFull;
    for (size_t i = first; i < t.nodes.size(); ++i)
      if (i != last) release_node(t, i);
    *out = id;
  });
}

}  // namespace
}  // namespace tape
}  // namespace tlrt

using namespace tlrt;
using namespace tlrt::tape;

#define TAPE_REC(name, ...) \
  record("tlrt_tape_" #name, tape, out, [&](Tape &t) { return __VA_ARGS__; })

extern "C" {

// elementwise
TLRT_API tlrt_status tlrt_tape_add(tlrt_tape *tape, uint64_t a, uint64_t b, uint64_t *out) {
  return TAPE_REC(add, rec_binary(t, Bin::Add, a, b));
}
TLRT_API tlrt_status tlrt_tape_sub(tlrt_tape *tape, uint64_t a, uint64_t b, uint64_t *out) {
  return TAPE_REC(sub, rec_binary(t, Bin::Sub, a, b));
}
TLRT_API tlrt_status tlrt_tape_mul(tlrt_tape *tape, uint64_t a, uint64_t b, uint64_t *out) {
  return TAPE_REC(mul, rec_binary(t, Bin::Mul, a, b));
}
TLRT_API tlrt_status tlrt_tape_div(tlrt_tape *tape, uint64_t a, uint64_t b, uint64_t *out) {
  return TAPE_REC(div, rec_binary(t, Bin::Div, a, b));
}
TLRT_API tlrt_status tlrt_tape_max(tlrt_tape *tape, uint64_t a, uint64_t b, uint64_t *out) {
  return TAPE_REC(max, rec_binary(t, Bin::Max, a, b));
}
TLRT_API tlrt_status tlrt_tape_min(tlrt_tape *tape, uint64_t a, uint64_t b, uint64_t *out) {
  return TAPE_REC(min, rec_binary(t, Bin::Min, a, b));
}
TLRT_API tlrt_status tlrt_tape_axpy(tlrt_tape *tape, uint64_t a, uint64_t b, double c,
                                    uint64_t *out) {
  return TAPE_REC(axpy, rec_axpy(t, a, b, c));
}
TLRT_API tlrt_status tlrt_tape_neg(tlrt_tape *tape, uint64_t x, uint64_t *out) {
  return TAPE_REC(neg, rec_neg(t, x));
}
TLRT_API tlrt_status tlrt_tape_scale(tlrt_tape *tape, uint64_t x, double c, uint64_t *out) {
  return TAPE_REC(scale, rec_scale(t, x, c));
}
#define TAPE_UNARY(name)                                                                  \
  TLRT_API tlrt_status tlrt_tape_##name(tlrt_tape *tape, uint64_t x, uint64_t *out) {     \
    return TAPE_REC(name, rec_unary(t, x, tlrt_##name, tlrt_##name##_bwd));               \
  }
TAPE_UNARY(abs)
TAPE_UNARY(sqrt)
TAPE_UNARY(inv)
TAPE_UNARY(relu)
TAPE_UNARY(exp)
TAPE_UNARY(log)
TAPE_UNARY(sigmoid)
TAPE_UNARY(tanh)
TAPE_UNARY(softplus)
TAPE_UNARY(gelu)
TAPE_UNARY(silu)
#undef TAPE_UNARY
TLRT_API tlrt_status tlrt_tape_dropout(tlrt_tape *tape, uint64_t x, double p, uint64_t key,
                                       uint64_t *out) {
  return TAPE_REC(dropout, rec_dropout(t, x, p, key));
}
TLRT_API tlrt_status tlrt_tape_clamp(tlrt_tape *tape, uint64_t x, double lo, double hi,
                                     uint64_t *out) {
  return TAPE_REC(clamp, rec_clamp(t, x, lo, hi));
}
TLRT_API tlrt_status tlrt_tape_safe_log(tlrt_tape *tape, uint64_t x, double eps, uint64_t *out) {
  return TAPE_REC(safe_log, rec_safe_log(t, x, eps));
}

// reductions
TLRT_API tlrt_status tlrt_tape_reduce_sum(tlrt_tape *tape, uint64_t x, uint64_t *out) {
  return TAPE_REC(reduce_sum, rec_reduce_all(t, x, false));
}
TLRT_API tlrt_status tlrt_tape_reduce_mean(tlrt_tape *tape, uint64_t x, uint64_t *out) {
  return TAPE_REC(reduce_mean, rec_reduce_all(t, x, true));
}
TLRT_API tlrt_status tlrt_tape_reduce_sum_axis0(tlrt_tape *tape, uint64_t x, uint64_t *out) {
  return TAPE_REC(reduce_sum_axis0, rec_sum_axis01(t, x, 0));
}
TLRT_API tlrt_status tlrt_tape_reduce_sum_axis1(tlrt_tape *tape, uint64_t x, uint64_t *out) {
  return TAPE_REC(reduce_sum_axis1, rec_sum_axis01(t, x, 1));
}
TLRT_API tlrt_status tlrt_tape_reduce_sum_axis(tlrt_tape *tape, uint64_t x, uint32_t axis,
                                               uint64_t *out) {
  return TAPE_REC(reduce_sum_axis, rec_sum_axis(t, x, axis));
}
TLRT_API tlrt_status tlrt_tape_reduce_max_axis0(tlrt_tape *tape, uint64_t x, uint64_t *out) {
  return TAPE_REC(reduce_max_axis0, rec_max_axis01(t, x, 0));
}
TLRT_API tlrt_status tlrt_tape_reduce_max_axis1(tlrt_tape *tape, uint64_t x, uint64_t *out) {
  return TAPE_REC(reduce_max_axis1, rec_max_axis01(t, x, 1));
}

// layout
TLRT_API tlrt_status tlrt_tape_reshape(tlrt_tape *tape, uint64_t x, const uint64_t *dims,
                                       uint32_t rank, uint64_t *out) {
  return TAPE_REC(reshape, rec_reshape(t, x, dims, rank));
}
TLRT_API tlrt_status tlrt_tape_transpose2d(tlrt_tape *tape, uint64_t x, uint64_t *out) {
  return TAPE_REC(transpose2d, rec_transpose2d(t, x));
}
TLRT_API tlrt_status tlrt_tape_permute(tlrt_tape *tape, uint64_t x, const uint32_t *perm,
                                       uint64_t *out) {
  return TAPE_REC(permute, rec_permute(t, x, perm));
}
TLRT_API tlrt_status tlrt_tape_swap_adjacent_at_depth(tlrt_tape *tape, uint64_t x, uint32_t depth,
                                                      uint64_t *out) {
  return TAPE_REC(swap_adjacent_at_depth, rec_swap(t, x, depth));
}
TLRT_API tlrt_status tlrt_tape_broadcast_to(tlrt_tape *tape, uint64_t x, const uint64_t *out_dims,
                                            uint32_t out_rank, const uint32_t *axis_map,
                                            uint64_t *out) {
  return TAPE_REC(broadcast_to, rec_broadcast_to(t, x, out_dims, out_rank, axis_map));
}
TLRT_API tlrt_status tlrt_tape_broadcast_vec_to_rows(tlrt_tape *tape, uint64_t v, uint64_t rows,
                                                     uint64_t *out) {
  return TAPE_REC(broadcast_vec_to_rows, rec_vec_bcast(t, v, rows, true));
}
TLRT_API tlrt_status tlrt_tape_broadcast_vec_to_cols(tlrt_tape *tape, uint64_t v, uint64_t cols,
                                                     uint64_t *out) {
  return TAPE_REC(broadcast_vec_to_cols, rec_vec_bcast(t, v, cols, false));
}
TLRT_API tlrt_status tlrt_tape_concat1d(tlrt_tape *tape, uint64_t a, uint64_t b, uint64_t *out) {
  return TAPE_REC(concat1d, rec_concat1d(t, a, b));
}
TLRT_API tlrt_status tlrt_tape_concat_axis0(tlrt_tape *tape, uint64_t a, uint64_t b,
                                            uint64_t *out) {
  return TAPE_REC(concat_axis0, rec_concat_axis0(t, a, b));
}
TLRT_API tlrt_status tlrt_tape_slice1d(tlrt_tape *tape, uint64_t x, uint64_t start, uint64_t len,
                                       uint64_t *out) {
  return TAPE_REC(slice1d, rec_slice1d(t, x, start, len));
}
TLRT_API tlrt_status tlrt_tape_slice_axis0(tlrt_tape *tape, uint64_t x, uint64_t start,
                                           uint64_t len, uint64_t *out) {
  return TAPE_REC(slice_axis0, rec_slice_axis0(t, x, start, len));
}

// indexing
TLRT_API tlrt_status tlrt_tape_gather_vec(tlrt_tape *tape, uint64_t v, const uint64_t *idx,
                                          uint64_t k, uint64_t *out) {
  return TAPE_REC(gather_vec, rec_gather_vec(t, v, idx, k));
}
TLRT_API tlrt_status tlrt_tape_gather_rows(tlrt_tape *tape, uint64_t mat, const uint64_t *idx,
                                           uint64_t k, uint64_t *out) {
  return TAPE_REC(gather_rows, rec_gather_rows(t, mat, idx, k));
}
TLRT_API tlrt_status tlrt_tape_scatter_add(tlrt_tape *tape, uint64_t x, uint64_t vals,
                                           const uint64_t *idx, uint64_t k, uint64_t *out) {
  return TAPE_REC(scatter_add, rec_scatter_add(t, x, vals, idx, k));
}
TLRT_API tlrt_status tlrt_tape_gather_vec_ibuf(tlrt_tape *tape, uint64_t v,
                                               const tlrt_buffer *idx, uint64_t *out) {
  return TAPE_REC(gather_vec_ibuf, rec_gather_vec_ibuf(t, v, idx));
}
TLRT_API tlrt_status tlrt_tape_gather_rows_ibuf(tlrt_tape *tape, uint64_t mat,
                                                const tlrt_buffer *idx, uint64_t *out) {
  return TAPE_REC(gather_rows_ibuf, rec_gather_rows_ibuf(t, mat, idx));
}
TLRT_API tlrt_status tlrt_tape_scatter_add_ibuf(tlrt_tape *tape, uint64_t x, uint64_t vals,
                                                const tlrt_buffer *idx, uint64_t *out) {
  return TAPE_REC(scatter_add_ibuf, rec_scatter_add_ibuf(t, x, vals, idx));
}
TLRT_API tlrt_status tlrt_tape_scatter_add_rows_ibuf(tlrt_tape *tape, uint64_t mat,
                                                     uint64_t vals, const tlrt_buffer *idx,
                                                     uint64_t *out) {
  return TAPE_REC(scatter_add_rows_ibuf, rec_scatter_add_rows_ibuf(t, mat, vals, idx));
}
TLRT_API tlrt_status tlrt_tape_scatter_add_rows(tlrt_tape *tape, uint64_t mat, uint64_t vals,
                                                const uint64_t *idx, uint64_t k, uint64_t *out) {
  return TAPE_REC(scatter_add_rows, rec_scatter_add_rows(t, mat, vals, idx, k));
}

// softmax, layer norm, products
TLRT_API tlrt_status tlrt_tape_softmax(tlrt_tape *tape, uint64_t x, uint64_t *out) {
  return TAPE_REC(softmax, rec_softmax(t, x, false));
}
TLRT_API tlrt_status tlrt_tape_log_softmax(tlrt_tape *tape, uint64_t x, uint64_t *out) {
  return TAPE_REC(log_softmax, rec_softmax(t, x, true));
}
TLRT_API tlrt_status tlrt_tape_layer_norm(tlrt_tape *tape, uint64_t x, uint64_t gamma,
                                          uint64_t beta, double eps, uint64_t *out) {
  return TAPE_REC(layer_norm, rec_layer_norm(t, x, gamma, beta, eps));
}
TLRT_API tlrt_status tlrt_tape_rms_norm(tlrt_tape *tape, uint64_t x, uint64_t gamma, double eps,
                                        uint64_t *out) {
  return TAPE_REC(rms_norm, rec_rms_norm(t, x, gamma, eps));
}
TLRT_API tlrt_status tlrt_tape_matmul(tlrt_tape *tape, uint64_t a, uint64_t b, bool trans_a,
                                      bool trans_b, uint64_t *out) {
  return TAPE_REC(matmul, rec_product(t, a, b, trans_a, trans_b, false));
}
TLRT_API tlrt_status tlrt_tape_bmm(tlrt_tape *tape, uint64_t a, uint64_t b, bool trans_a,
                                   bool trans_b, uint64_t *out) {
  return TAPE_REC(bmm, rec_product(t, a, b, trans_a, trans_b, true));
}

// spectral convolution, selective scan
TLRT_API tlrt_status tlrt_tape_spectral_conv1d_rfft(tlrt_tape *tape, uint64_t x, uint64_t w_re,
                                                    uint64_t w_im, uint64_t *out) {
  return TAPE_REC(spectral_conv1d_rfft, rec_spectral(t, x, w_re, w_im));
}
TLRT_API tlrt_status tlrt_tape_selective_scan_diag(tlrt_tape *tape, uint64_t A, uint64_t B,
                                                   uint64_t X, uint64_t h0, uint64_t *out) {
  return TAPE_REC(selective_scan_diag, rec_scan(t, A, B, X, h0, false));
}
TLRT_API tlrt_status tlrt_tape_selective_scan_diag_var(tlrt_tape *tape, uint64_t A, uint64_t B,
                                                       uint64_t X, uint64_t h0, uint64_t *out) {
  return TAPE_REC(selective_scan_diag_var, rec_scan(t, A, B, X, h0, true));
}

// convolution, pooling, attention
TLRT_API tlrt_status tlrt_tape_conv2d(tlrt_tape *tape, uint64_t x, uint64_t w, uint64_t b,
                                      uint64_t stride_h, uint64_t stride_w, uint64_t pad_h,
                                      uint64_t pad_w, uint64_t dilation_h, uint64_t dilation_w,
                                      uint64_t groups, uint64_t *out) {
  const uint64_t st[2] = {stride_h, stride_w}, pd[2] = {pad_h, pad_w},
                 dl[2] = {dilation_h, dilation_w};
  return TAPE_REC(conv2d, rec_conv(t, x, w, b, st, pd, dl, groups, true));
}
TLRT_API tlrt_status tlrt_tape_conv(tlrt_tape *tape, uint64_t x, uint64_t w, uint64_t b,
                                    const uint64_t *stride, const uint64_t *padding,
                                    const uint64_t *dilation, uint64_t groups, uint64_t *out) {
  return TAPE_REC(conv, rec_conv(t, x, w, b, stride, padding, dilation, groups, false));
}
TLRT_API tlrt_status tlrt_tape_maxpool2d(tlrt_tape *tape, uint64_t x, uint64_t kernel_h,
                                         uint64_t kernel_w, uint64_t stride_h, uint64_t stride_w,
                                         uint64_t pad_h, uint64_t pad_w, uint64_t *out) {
  const PoolGeo g{0, 0, 0, 0, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, true, false};
  return TAPE_REC(maxpool2d, rec_pool(t, x, g));
}
TLRT_API tlrt_status tlrt_tape_avgpool2d(tlrt_tape *tape, uint64_t x, uint64_t kernel_h,
                                         uint64_t kernel_w, uint64_t stride_h, uint64_t stride_w,
                                         uint64_t pad_h, uint64_t pad_w, bool count_include_pad,
                                         uint64_t *out) {
  const PoolGeo g{0, 0, 0, 0, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, false,
                  count_include_pad};
  return TAPE_REC(avgpool2d, rec_pool(t, x, g));
}
TLRT_API tlrt_status tlrt_tape_flash_attention(tlrt_tape *tape, uint64_t q, uint64_t k, uint64_t v,
                                               const tlrt_buffer *mask, double scale, bool causal,
                                               double mask_fill, uint64_t *out) {
  return TAPE_REC(flash_attention, rec_attention(t, q, k, v, mask, scale, causal, mask_fill));
}

TLRT_API tlrt_status tlrt_tape_attention_qkv(tlrt_tape *tape, uint64_t qkv, uint64_t heads_q,
                                             uint64_t heads_kv, bool causal, double scale,
                                             uint64_t *out) {
  return TAPE_REC(attention_qkv, rec_attention_qkv(t, qkv, heads_q, heads_kv, causal, scale));
}
TLRT_API tlrt_status tlrt_tape_attention(tlrt_tape *tape, uint64_t q, uint64_t k, uint64_t v,
                                         uint64_t heads_q, uint64_t heads_kv, bool causal,
                                         double scale, uint64_t *out) {
  return TAPE_REC(attention,
                  rec_attention_heads(t, q, k, v, heads_q, heads_kv, causal, scale));
}

// composites
TLRT_API tlrt_status tlrt_tape_linear(tlrt_tape *tape, uint64_t x, uint64_t w, uint64_t b,
                                      uint64_t *out) {
  return TAPE_REC(linear, rec_linear(t, x, w, b, TLRT_ACT_NONE));
}

TLRT_API tlrt_status tlrt_tape_linear_gelu(tlrt_tape *tape, uint64_t x, uint64_t w, uint64_t b,
                                           uint64_t *out) {
  return TAPE_REC(linear_gelu, rec_linear(t, x, w, b, TLRT_ACT_GELU));
}
TLRT_API tlrt_status tlrt_tape_mse_loss(tlrt_tape *tape, uint64_t pred, uint64_t target,
                                        uint64_t *out) {
  return TAPE_REC(mse_loss, rec_mse(t, pred, target));
}
TLRT_API tlrt_status tlrt_tape_cross_entropy_ibuf(tlrt_tape *tape, uint64_t logits,
                                                  const tlrt_buffer *labels, uint64_t *out) {
  return TAPE_REC(cross_entropy_ibuf,
                  rec_cross_entropy_fused(t, logits, labels, TLRT_CROSS_ENTROPY_NO_IGNORE));
}
TLRT_API tlrt_status tlrt_tape_cross_entropy_ignore(tlrt_tape *tape, uint64_t logits,
                                                    const tlrt_buffer *labels,
                                                    int ignore_index, uint64_t *out) {
  return TAPE_REC(cross_entropy_ignore,
                  rec_cross_entropy_fused(t, logits, labels, ignore_index));
}
TLRT_API tlrt_status tlrt_tape_cross_entropy(tlrt_tape *tape, uint64_t logits,
                                             const uint64_t *labels, uint64_t *out) {
  return TAPE_REC(cross_entropy, rec_cross_entropy(t, logits, labels));
}
TLRT_API tlrt_status tlrt_tape_batchnorm(tlrt_tape *tape, uint64_t x, uint64_t gamma,
                                         uint64_t beta, double eps, uint64_t *out) {
  return TAPE_REC(batchnorm, rec_batchnorm(t, x, gamma, beta, eps));
}
TLRT_API tlrt_status tlrt_tape_multi_head_attention(tlrt_tape *tape, uint64_t x, uint64_t w_q,
                                                    uint64_t w_k, uint64_t w_v, uint64_t w_o,
                                                    uint64_t b_q, uint64_t b_k, uint64_t b_v,
                                                    uint64_t b_o, uint64_t num_heads, bool causal,
                                                    uint64_t *out) {
  const uint64_t w[4] = {w_q, w_k, w_v, w_o}, b[4] = {b_q, b_k, b_v, b_o};
  return TAPE_REC(multi_head_attention, rec_mha(t, x, w, b, num_heads, causal));
}

}  // extern "C"
