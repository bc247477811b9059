// Bad input for every tlrt_tape_* entry point (abi/tlrt_tape.h): NULL tape and out-parameters,
// node ids not in the tape (also stale ids after a reset), shapes rejected at record time (the
// message names the recording call, the arguments and both shapes), released and foreign-device
// leaf and seed buffers, malformed and unavailable devices, out-of-domain scalars passed through
// from the op, index buffers (the _ibuf calls: NULL, freed, released, float32 or foreign-device
// idx / labels, and labels without batch elements); out-parameters cleared on failure, the tape
// unchanged, and nothing leaked.
#include <functional>
#include <string>
#include <vector>

#include "bad_input.hpp"

namespace {

using th::Buf;
// An id of the same tape and generation as `id` whose index (1000) is past every node here.
uint64_t beyond(uint64_t id) { return (id & ~0xFFFFFFFFull) | 1000; }
// The index of a node id (its low 32 bits).
uint64_t index(uint64_t id) { return id & 0xFFFFFFFFull; }
// A live node id of another tape (set by main): stale for every other tape.
uint64_t g_foreign = 0;

struct Nodes {
  uint64_t m34, m34b, v4, v3, m43, s, t234, pos;
};

uint64_t leaf(tlrt_tape *t, std::vector<uint64_t> dims, bool rg = true, float lo = -1.0f) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  Buf b(th::upload(th::Rng(n).vec(n, lo, 1.0f)));
  uint64_t id = UINT64_MAX;
  TH_OK(tlrt_tape_leaf(t, b.get(), dims.data(), (uint32_t)dims.size(), rg, &id));
  return id;
}

Nodes make_nodes(tlrt_tape *t) {
  Nodes n;
  n.m34 = leaf(t, {3, 4});
  n.m34b = leaf(t, {3, 4});
  n.v4 = leaf(t, {4});
  n.v3 = leaf(t, {3});
  n.m43 = leaf(t, {4, 3});
  n.s = leaf(t, {});
  n.t234 = leaf(t, {2, 3, 4});
  n.pos = leaf(t, {3, 4}, true, 0.5f);
  return n;
}

uint64_t count(tlrt_tape *t) {
  uint64_t c = 0;
  TH_OK(tlrt_tape_node_count(t, &c));
  return c;
}

// The three checks every recording call gets: NULL tape, NULL out, and each node argument
// replaced by an id that is not in the tape. `call(tape, ids, out)` records with the given ids.
template <class Call>
void common(const char *fn, tlrt_tape *t, std::vector<uint64_t> ids,
            std::initializer_list<const char *> names, Call call) {
  uint64_t out = 77;
  BAD(call(nullptr, ids, &out), TLRT_ERR_NULL_ARGUMENT, fn, "tape");
  TH_CHECK(out == 0);
  BAD(call(t, ids, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  const uint64_t before = count(t);
  size_t i = 0;
  for (const char *name : names) {
    std::vector<uint64_t> bad = ids;
    bad[i] = beyond(ids[0]);
    out = 77;
    BAD(call(t, bad, &out), TLRT_ERR_INDEX, fn, name);
    TH_CHECK(out == 0);
    bad[i++] = g_foreign;
    BAD(call(t, bad, &out), TLRT_ERR_STALE_HANDLE, fn, name);
    TH_CHECK(out == 0);
  }
  TH_CHECK(count(t) == before);
  // The call works with the good ids (so the failures above are about the bad argument); a
  // composite appends several nodes and returns the last.
  out = 77;
  const tlrt_status s = call(t, ids, &out);
  TH_CHECK_MSG(s == TLRT_OK && index(out) >= before && index(out) + 1 == count(t) &&
                   out >> 32 == ids[0] >> 32,
               "%s with valid ids: %s (%s)",
               fn, tlrt_status_string(s), tlrt_last_error());
}

using Unary = tlrt_status (*)(tlrt_tape *, uint64_t, uint64_t *);
using Binary = tlrt_status (*)(tlrt_tape *, uint64_t, uint64_t, uint64_t *);

void test_lifetime_and_leaves() {
  // tlrt_tape_new: NULL out, malformed device, unavailable CUDA.
  BAD(tlrt_tape_new(TLRT_DEVICE_CPU, nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_new", "out");
  tlrt_tape *t = reinterpret_cast<tlrt_tape *>(uintptr_t{1});
  BAD(tlrt_tape_new((tlrt_device)(7u << 16), &t), TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_new");
  TH_CHECK(t == nullptr);
  const uint32_t rs = tlrt_runtime_status();
  if (rs == TLRT_RUNTIME_CPU_ONLY) {
    BAD(tlrt_tape_new(TLRT_DEVICE_CUDA(0), &t), TLRT_ERR_BACKEND_UNAVAILABLE, "tlrt_tape_new");
    TH_CHECK(t == nullptr);
  } else if (rs == TLRT_RUNTIME_CUDA_NO_DEVICE) {
    BAD(tlrt_tape_new(TLRT_DEVICE_CUDA(0), &t), TLRT_ERR_NO_DEVICE, "tlrt_tape_new");
    TH_CHECK(t == nullptr);
  } else {
    BAD(tlrt_tape_new(TLRT_DEVICE_CUDA(0xFFFF), &t), TLRT_ERR_NO_DEVICE, "tlrt_tape_new");
    TH_CHECK(t == nullptr);
  }
  tlrt_tape_free(nullptr);  // a no-op
  TH_OK(tlrt_tape_free_checked(nullptr));

  // Misused tape handles: freed (use after free, double free) and never a tape.
  {
    tlrt_tape *gone = nullptr;
    TH_OK(tlrt_tape_new(TLRT_DEVICE_CPU, &gone));
    TH_OK(tlrt_tape_free_checked(gone));
    uint64_t c = 5;
    BAD(tlrt_tape_node_count(gone, &c), TLRT_ERR_STALE_HANDLE, "tlrt_tape_node_count", "tape");
    TH_CHECK(c == 0);
    BAD(tlrt_tape_reset(gone), TLRT_ERR_STALE_HANDLE, "tlrt_tape_reset", "tape");
    BAD(tlrt_tape_free_checked(gone), TLRT_ERR_STALE_HANDLE, "tlrt_tape_free_checked", "tape");
    tlrt_tape_free(gone);  // a no-op, as is any double free
    // A new tape (likely in the freed tape's slot) is not reachable through the old handle.
    tlrt_tape *fresh = nullptr;
    TH_OK(tlrt_tape_new(TLRT_DEVICE_CPU, &fresh));
    TH_CHECK(fresh != gone);
    BAD(tlrt_tape_reset(gone), TLRT_ERR_STALE_HANDLE, "tlrt_tape_reset", "tape");
    tlrt_tape_free(gone);
    TH_OK(tlrt_tape_node_count(fresh, &c));
    int local = 0;
    for (tlrt_tape *junk : {reinterpret_cast<tlrt_tape *>(uintptr_t{1}),
                            reinterpret_cast<tlrt_tape *>(&local),
                            reinterpret_cast<tlrt_tape *>(~uintptr_t{0})}) {
      BAD(tlrt_tape_node_count(junk, &c), TLRT_ERR_STALE_HANDLE, "tlrt_tape_node_count", "tape");
      BAD(tlrt_tape_free_checked(junk), TLRT_ERR_STALE_HANDLE, "tlrt_tape_free_checked", "tape");
    }
    TH_OK(tlrt_tape_free_checked(fresh));
  }

  TH_OK(tlrt_tape_new(TLRT_DEVICE_CPU, &t));
  Fixture f = make_fixture();
  const uint64_t d4[1] = {4}, d22[2] = {2, 2}, d9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 4};
  const uint64_t dbig[2] = {UINT64_MAX, 4}, dz[2] = {0, UINT64_MAX};
  uint64_t id = 77;
  BAD(tlrt_tape_leaf(nullptr, f.a, d4, 1, true, &id), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_leaf",
      "tape");
  TH_CHECK(id == 0);
  BAD(tlrt_tape_leaf(t, f.a, d4, 1, true, nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_leaf",
      "out");
  BAD(tlrt_tape_leaf(t, nullptr, d4, 1, true, &id), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_leaf",
      "buffer");
  BAD(tlrt_tape_leaf(t, f.a, nullptr, 1, true, &id), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_leaf",
      "dims");
  BAD(tlrt_tape_leaf(t, f.a, d9, 9, true, &id), TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_leaf",
      "rank");
  BAD(tlrt_tape_leaf(t, f.a, d22, 1, true, &id), TLRT_ERR_SHAPE, "tlrt_tape_leaf", "buffer",
      "dims");
  BAD(tlrt_tape_leaf(t, f.short3, d22, 2, true, &id), TLRT_ERR_SHAPE, "tlrt_tape_leaf", "buffer");
  BAD(tlrt_tape_leaf(t, f.a, dbig, 2, true, &id), TLRT_ERR_SHAPE, "tlrt_tape_leaf", "dims");
  BAD(tlrt_tape_leaf(t, f.a, nullptr, 0, true, &id), TLRT_ERR_SHAPE, "tlrt_tape_leaf");  // scalar
  TH_OK(tlrt_tape_leaf(t, f.empty, dz, 2, true, &id));  // a 0 dim makes any other dim fine
  BAD(tlrt_tape_leaf(t, f.released, d4, 1, true, &id), TLRT_ERR_RELEASED, "tlrt_tape_leaf",
      "buffer");
  TH_CHECK(id == 0);
  uint64_t c = 99;
  BAD(tlrt_tape_node_count(nullptr, &c), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_node_count", "tape");
  TH_CHECK(c == 0);
  BAD(tlrt_tape_node_count(t, nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_node_count", "count");
  tlrt_device dev = 99;
  BAD(tlrt_tape_device(nullptr, &dev), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_device", "tape");
  TH_CHECK(dev == 0);
  BAD(tlrt_tape_device(t, nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_device", "device");
  BAD(tlrt_tape_reset(nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_reset", "tape");

  // value / grad / shape.
  uint64_t a = 0, nog = 0, mid = 0;
  TH_OK(tlrt_tape_leaf(t, f.a, d4, 1, true, &a));
  TH_OK(tlrt_tape_leaf(t, f.b, d4, 1, false, &nog));
  TH_OK(tlrt_tape_exp(t, a, &mid));
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_tape_value(nullptr, a, &out), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_value", "tape");
  CLEARED(out);
  BAD(tlrt_tape_value(t, a, nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_value", "out");
  out = kSentinel;
  BAD(tlrt_tape_value(t, beyond(a), &out), TLRT_ERR_INDEX, "tlrt_tape_value", "node");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_tape_grad(nullptr, a, &out), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_grad", "tape");
  CLEARED(out);
  BAD(tlrt_tape_grad(t, a, nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_grad", "out");
  out = kSentinel;
  BAD(tlrt_tape_grad(t, beyond(a), &out), TLRT_ERR_INDEX, "tlrt_tape_grad", "node");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_tape_grad(t, nog, &out), TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_grad");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_tape_grad(t, mid, &out), TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_grad");
  CLEARED(out);
  TH_OK(tlrt_tape_grad(t, a, &out));  // no backward yet: zeros
  expect_result("tlrt_tape_grad", out, 4);
  uint64_t dims[8];
  uint32_t rank = 9;
  bool rg = true;
  BAD(tlrt_tape_shape(nullptr, a, dims, &rank, &rg), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_shape",
      "tape");
  TH_CHECK(rank == 0 && !rg);
  BAD(tlrt_tape_shape(t, a, nullptr, &rank, nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_shape",
      "dims");
  BAD(tlrt_tape_shape(t, a, dims, nullptr, nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_shape",
      "rank");
  rank = 9;
  BAD(tlrt_tape_shape(t, beyond(a), dims, &rank, nullptr), TLRT_ERR_INDEX, "tlrt_tape_shape", "node");
  TH_CHECK(rank == 0);

  // backward / backward_seed.
  BAD(tlrt_tape_backward(nullptr, mid), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_backward", "tape");
  BAD(tlrt_tape_backward(t, beyond(a)), TLRT_ERR_INDEX, "tlrt_tape_backward", "node");
  BAD(tlrt_tape_backward(t, mid), TLRT_ERR_SHAPE, "tlrt_tape_backward");  // 4 elements, no seed
  BAD(tlrt_tape_backward_seed(nullptr, mid, f.g), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_tape_backward_seed", "tape");
  BAD(tlrt_tape_backward_seed(t, mid, nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_backward_seed",
      "seed");
  BAD(tlrt_tape_backward_seed(t, beyond(a), f.g), TLRT_ERR_INDEX, "tlrt_tape_backward_seed", "node");
  BAD(tlrt_tape_backward_seed(t, mid, f.short3), TLRT_ERR_SHAPE, "tlrt_tape_backward_seed",
      "seed");
  BAD(tlrt_tape_backward_seed(t, mid, f.released), TLRT_ERR_RELEASED, "tlrt_tape_backward_seed",
      "seed");
  // Ids of another tape, and ids from before a reset, are stale (even once the index exists).
  BAD(tlrt_tape_value(t, g_foreign, &out), TLRT_ERR_STALE_HANDLE, "tlrt_tape_value", "node");
  CLEARED(out);
  TH_OK(tlrt_tape_reset(t));
  BAD(tlrt_tape_backward_seed(t, mid, f.g), TLRT_ERR_STALE_HANDLE, "tlrt_tape_backward_seed",
      "node");
  BAD(tlrt_tape_exp(t, a, &id), TLRT_ERR_STALE_HANDLE, "tlrt_tape_exp", "x");
  for (int k = 0; k < 3; ++k) TH_OK(tlrt_tape_leaf(t, f.a, d4, 1, true, &id));  // a's index exists
  BAD(tlrt_tape_exp(t, a, &id), TLRT_ERR_STALE_HANDLE, "tlrt_tape_exp", "x");
  BAD(tlrt_tape_shape(t, mid, dims, &rank, nullptr), TLRT_ERR_STALE_HANDLE, "tlrt_tape_shape",
      "node");

  // A leaf whose storage is released AFTER recording: the op reading it fails with RELEASED.
  Buf late(th::upload({1, 2, 3, 4}));
  uint64_t l = 0;
  TH_OK(tlrt_tape_leaf(t, late.get(), d4, 1, true, &l));
  TH_OK(tlrt_buffer_release_storage(late.get(), nullptr));
  BAD(tlrt_tape_exp(t, l, &id), TLRT_ERR_RELEASED, "tlrt_tape_exp");
  TH_CHECK(id == 0);

  // Mixed devices: a CPU buffer on a CUDA tape (needs a GPU).
  if (th::cuda_ready()) {
    tlrt_tape *g = nullptr;
    TH_OK(tlrt_tape_new(TLRT_DEVICE_CUDA(0), &g));
    BAD(tlrt_tape_leaf(g, f.a, d4, 1, true, &id), TLRT_ERR_DEVICE_MISMATCH, "tlrt_tape_leaf",
        "buffer");
    Buf cb;
    TH_OK(tlrt_buffer_to_device(f.a, TLRT_DEVICE_CUDA(0), cb.out()));
    TH_OK(tlrt_tape_leaf(g, cb.get(), d4, 1, true, &id));
    uint64_t e = 0;
    TH_OK(tlrt_tape_exp(g, id, &e));
    BAD(tlrt_tape_backward_seed(g, e, f.g), TLRT_ERR_DEVICE_MISMATCH, "tlrt_tape_backward_seed",
        "seed");
    BAD(tlrt_tape_leaf(t, cb.get(), d4, 1, true, &id), TLRT_ERR_DEVICE_MISMATCH, "tlrt_tape_leaf",
        "buffer");
    // An attention mask on the CPU for a CUDA tape: (1, 1, 4) nodes, a 1-element mask.
    const uint64_t d114[3] = {1, 1, 4};
    uint64_t q = 0, o = 7;
    TH_OK(tlrt_tape_leaf(g, cb.get(), d114, 3, true, &q));
    Buf m1(th::upload({1}));
    BAD(tlrt_tape_flash_attention(g, q, q, q, m1.get(), 0.5, false, -INFINITY, &o),
        TLRT_ERR_DEVICE_MISMATCH, "tlrt_tape_flash_attention", "mask");
    TH_CHECK(o == 0);
    tlrt_tape_free(g);
  } else {
    std::printf("no usable CUDA device: mixed-device checks skipped\n");
  }
  free_fixture(f);
  tlrt_tape_free(t);
}

void test_recording() {
  tlrt_tape *t = nullptr;
  TH_OK(tlrt_tape_new(TLRT_DEVICE_CPU, &t));
  const Nodes n = make_nodes(t);

  // ---- elementwise ----
  struct B { const char *fn; Binary f; };
  for (B b : {B{"tlrt_tape_add", tlrt_tape_add}, B{"tlrt_tape_sub", tlrt_tape_sub},
              B{"tlrt_tape_mul", tlrt_tape_mul}, B{"tlrt_tape_div", tlrt_tape_div},
              B{"tlrt_tape_max", tlrt_tape_max}, B{"tlrt_tape_min", tlrt_tape_min}}) {
    common(b.fn, t, {n.m34, n.m34b}, {"a", "b"},
           [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
             return b.f(tp, x[0], x[1], o);
           });
    uint64_t o = 77;
    BAD(b.f(t, n.m34, n.m43, &o), TLRT_ERR_SHAPE, b.fn, "a", "b");  // same count, other shape
    TH_CHECK(o == 0);
    const std::string msg = tlrt_last_error();
    TH_CHECK_MSG(msg.find("(3, 4)") != std::string::npos && msg.find("(4, 3)") != std::string::npos,
                 "message does not name both shapes: %s", msg.c_str());
    BAD(b.f(t, n.v4, n.v3, &o), TLRT_ERR_SHAPE, b.fn, "a", "b");
  }
  common("tlrt_tape_axpy", t, {n.m34, n.m34b}, {"a", "b"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_axpy(tp, x[0], x[1], 0.5, o);
         });
  uint64_t o = 77;
  BAD(tlrt_tape_axpy(t, n.v4, n.m34, 0.5, &o), TLRT_ERR_SHAPE, "tlrt_tape_axpy", "a", "b");
  struct U { const char *fn; Unary f; };
  for (U u : {U{"tlrt_tape_neg", tlrt_tape_neg}, U{"tlrt_tape_abs", tlrt_tape_abs},
              U{"tlrt_tape_sqrt", tlrt_tape_sqrt}, U{"tlrt_tape_inv", tlrt_tape_inv},
              U{"tlrt_tape_relu", tlrt_tape_relu}, U{"tlrt_tape_exp", tlrt_tape_exp},
              U{"tlrt_tape_log", tlrt_tape_log}, U{"tlrt_tape_sigmoid", tlrt_tape_sigmoid},
              U{"tlrt_tape_tanh", tlrt_tape_tanh}, U{"tlrt_tape_softplus", tlrt_tape_softplus},
              U{"tlrt_tape_gelu", tlrt_tape_gelu}, U{"tlrt_tape_silu", tlrt_tape_silu},
              U{"tlrt_tape_reduce_sum", tlrt_tape_reduce_sum},
              U{"tlrt_tape_reduce_mean", tlrt_tape_reduce_mean},
              U{"tlrt_tape_softmax", tlrt_tape_softmax},
              U{"tlrt_tape_log_softmax", tlrt_tape_log_softmax},
              U{"tlrt_tape_transpose2d", tlrt_tape_transpose2d},
              U{"tlrt_tape_reduce_sum_axis0", tlrt_tape_reduce_sum_axis0},
              U{"tlrt_tape_reduce_sum_axis1", tlrt_tape_reduce_sum_axis1},
              U{"tlrt_tape_reduce_max_axis0", tlrt_tape_reduce_max_axis0},
              U{"tlrt_tape_reduce_max_axis1", tlrt_tape_reduce_max_axis1}}) {
    common(u.fn, t, {n.pos}, {"x"},
           [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
             return u.f(tp, x[0], o);
           });
  }
  // Rank-2 only ops reject other ranks.
  for (U u : {U{"tlrt_tape_transpose2d", tlrt_tape_transpose2d},
              U{"tlrt_tape_reduce_sum_axis0", tlrt_tape_reduce_sum_axis0},
              U{"tlrt_tape_reduce_sum_axis1", tlrt_tape_reduce_sum_axis1},
              U{"tlrt_tape_reduce_max_axis0", tlrt_tape_reduce_max_axis0},
              U{"tlrt_tape_reduce_max_axis1", tlrt_tape_reduce_max_axis1}}) {
    BAD(u.f(t, n.t234, &o), TLRT_ERR_SHAPE, u.fn, "x");
    BAD(u.f(t, n.v4, &o), TLRT_ERR_SHAPE, u.fn, "x");
  }
  common("tlrt_tape_scale", t, {n.m34}, {"x"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_scale(tp, x[0], 2.0, o);
         });
  common("tlrt_tape_clamp", t, {n.m34}, {"x"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_clamp(tp, x[0], -0.5, 0.5, o);
         });
  BAD(tlrt_tape_clamp(t, n.m34, NAN, 0.5, &o), TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_clamp");
  common("tlrt_tape_safe_log", t, {n.m34}, {"x"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_safe_log(tp, x[0], 1e-3, o);
         });
  BAD(tlrt_tape_safe_log(t, n.m34, -1.0, &o), TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_safe_log");

  // ---- reductions ----
  common("tlrt_tape_reduce_sum_axis", t, {n.t234}, {"x"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_reduce_sum_axis(tp, x[0], 2, o);
         });
  BAD(tlrt_tape_reduce_sum_axis(t, n.t234, 3, &o), TLRT_ERR_INDEX, "tlrt_tape_reduce_sum_axis",
      "axis");
  BAD(tlrt_tape_reduce_sum_axis(t, n.s, 0, &o), TLRT_ERR_INDEX, "tlrt_tape_reduce_sum_axis",
      "axis");

  // ---- layout ----
  const uint64_t d12[1] = {12}, d5[1] = {5}, d9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 12};
  common("tlrt_tape_reshape", t, {n.m34}, {"x"},
         [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_reshape(tp, x[0], d12, 1, o);
         });
  BAD(tlrt_tape_reshape(t, n.m34, d5, 1, &o), TLRT_ERR_SHAPE, "tlrt_tape_reshape", "dims");
  BAD(tlrt_tape_reshape(t, n.m34, nullptr, 1, &o), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_reshape",
      "dims");
  BAD(tlrt_tape_reshape(t, n.m34, d9, 9, &o), TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_reshape",
      "rank");
  const uint32_t perm[3] = {2, 0, 1}, dup[3] = {0, 0, 1}, oob[3] = {0, 1, 3};
  common("tlrt_tape_permute", t, {n.t234}, {"x"},
         [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_permute(tp, x[0], perm, o);
         });
  BAD(tlrt_tape_permute(t, n.t234, dup, &o), TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_permute",
      "perm");
  BAD(tlrt_tape_permute(t, n.t234, oob, &o), TLRT_ERR_INDEX, "tlrt_tape_permute", "perm");
  BAD(tlrt_tape_permute(t, n.t234, nullptr, &o), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_permute",
      "perm");
  common("tlrt_tape_swap_adjacent_at_depth", t, {n.t234}, {"x"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_swap_adjacent_at_depth(tp, x[0], 1, o);
         });
  BAD(tlrt_tape_swap_adjacent_at_depth(t, n.t234, 2, &o), TLRT_ERR_INDEX,
      "tlrt_tape_swap_adjacent_at_depth", "depth");
  const uint64_t od[2] = {3, 4}, odbad[2] = {3, 5};
  const uint32_t map[2] = {0, 1}, mapbad[2] = {0, 2};
  common("tlrt_tape_broadcast_to", t, {n.v4}, {"x"},
         [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_broadcast_to(tp, x[0], od, 2, map, o);
         });
  BAD(tlrt_tape_broadcast_to(t, n.v4, odbad, 2, map, &o), TLRT_ERR_SHAPE, "tlrt_tape_broadcast_to",
      "in_dims");
  BAD(tlrt_tape_broadcast_to(t, n.v4, od, 2, mapbad, &o), TLRT_ERR_INDEX, "tlrt_tape_broadcast_to",
      "axis_map");
  BAD(tlrt_tape_broadcast_to(t, n.v4, od, 2, nullptr, &o), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_tape_broadcast_to", "axis_map");
  BAD(tlrt_tape_broadcast_to(t, n.v4, nullptr, 2, map, &o), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_tape_broadcast_to", "out_dims");
  common("tlrt_tape_broadcast_vec_to_rows", t, {n.v4}, {"v"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_broadcast_vec_to_rows(tp, x[0], 3, o);
         });
  BAD(tlrt_tape_broadcast_vec_to_rows(t, n.m34, 3, &o), TLRT_ERR_SHAPE,
      "tlrt_tape_broadcast_vec_to_rows", "v");
  BAD(tlrt_tape_broadcast_vec_to_rows(t, n.v4, UINT64_MAX, &o), TLRT_ERR_OVERFLOW,
      "tlrt_tape_broadcast_vec_to_rows");
  common("tlrt_tape_broadcast_vec_to_cols", t, {n.v3}, {"v"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_broadcast_vec_to_cols(tp, x[0], 4, o);
         });
  BAD(tlrt_tape_broadcast_vec_to_cols(t, n.s, 4, &o), TLRT_ERR_SHAPE,
      "tlrt_tape_broadcast_vec_to_cols", "v");
  common("tlrt_tape_concat1d", t, {n.v4, n.v3}, {"a", "b"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_concat1d(tp, x[0], x[1], o);
         });
  BAD(tlrt_tape_concat1d(t, n.v4, n.m34, &o), TLRT_ERR_SHAPE, "tlrt_tape_concat1d", "b");
  common("tlrt_tape_concat_axis0", t, {n.m34, n.m34b}, {"a", "b"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_concat_axis0(tp, x[0], x[1], o);
         });
  BAD(tlrt_tape_concat_axis0(t, n.m34, n.m43, &o), TLRT_ERR_SHAPE, "tlrt_tape_concat_axis0", "a",
      "b");
  BAD(tlrt_tape_concat_axis0(t, n.s, n.s, &o), TLRT_ERR_SHAPE, "tlrt_tape_concat_axis0", "a");
  common("tlrt_tape_slice1d", t, {n.v4}, {"x"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_slice1d(tp, x[0], 1, 2, o);
         });
  BAD(tlrt_tape_slice1d(t, n.v4, 3, 2, &o), TLRT_ERR_INDEX, "tlrt_tape_slice1d", "start", "len");
  BAD(tlrt_tape_slice1d(t, n.m34, 0, 1, &o), TLRT_ERR_SHAPE, "tlrt_tape_slice1d", "x");
  common("tlrt_tape_slice_axis0", t, {n.m34}, {"x"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_slice_axis0(tp, x[0], 1, 2, o);
         });
  BAD(tlrt_tape_slice_axis0(t, n.m34, UINT64_MAX, 2, &o), TLRT_ERR_INDEX, "tlrt_tape_slice_axis0",
      "start", "len");

  // ---- indexing ----
  const uint64_t idx[3] = {0, 2, 11}, badidx[2] = {0, TLRT_MAX_ELEMENTS};
  common("tlrt_tape_gather_vec", t, {n.m34}, {"v"},
         [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_gather_vec(tp, x[0], idx, 3, o);
         });
  BAD(tlrt_tape_gather_vec(t, n.m34, badidx, 2, &o), TLRT_ERR_INDEX, "tlrt_tape_gather_vec", "idx");
  BAD(tlrt_tape_gather_vec(t, n.m34, nullptr, 2, &o), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_tape_gather_vec", "idx");
  common("tlrt_tape_gather_rows", t, {n.m34}, {"mat"},
         [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_gather_rows(tp, x[0], idx, 3, o);
         });
  BAD(tlrt_tape_gather_rows(t, n.t234, idx, 3, &o), TLRT_ERR_SHAPE, "tlrt_tape_gather_rows", "mat");
  BAD(tlrt_tape_gather_rows(t, n.m34, badidx, 2, &o), TLRT_ERR_INDEX, "tlrt_tape_gather_rows",
      "idx");
  common("tlrt_tape_scatter_add", t, {n.m34, n.v3}, {"x", "vals"},
         [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_scatter_add(tp, x[0], x[1], idx, 3, o);
         });
  BAD(tlrt_tape_scatter_add(t, n.m34, n.v4, idx, 3, &o), TLRT_ERR_SHAPE, "tlrt_tape_scatter_add",
      "vals");
  const uint64_t ridx[4] = {0, 2, 2, 9};
  common("tlrt_tape_scatter_add_rows", t, {n.m34, n.m34b}, {"mat", "vals"},
         [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_scatter_add_rows(tp, x[0], x[1], ridx, 3, o);
         });
  BAD(tlrt_tape_scatter_add_rows(t, n.m34, n.m43, ridx, 4, &o), TLRT_ERR_SHAPE,
      "tlrt_tape_scatter_add_rows", "vals");

  // ---- indexing through index buffers ----
  // The node arguments as above; idx NULL, a freed handle, released, of float32 values; entries
  // that are not an index (negative, >= 2^60) are recorded (no TLRT_ERR_INDEX); idx on another
  // device than the tape (CUDA only); shapes (vals against the size of idx).
  {
    Buf i3, r3, bad, rel, f3;
    const int64_t iv[3] = {0, 2, 11}, badv[3] = {-1, int64_t{1} << 60, 1};
    const int32_t rv[3] = {0, 2, 2};
    TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, iv, 3, i3.out()));
    TH_OK(tlrt_buffer_from_i32(TLRT_DEVICE_CPU, rv, 3, r3.out()));
    TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, badv, 3, bad.out()));
    TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, iv, 3, rel.out()));
    TH_OK(tlrt_buffer_release_storage(rel.get(), nullptr));
    f3 = Buf(th::upload({0, 1, 2}));
    tlrt_buffer *stale = nullptr;
    TH_OK(tlrt_buffer_from_i32(TLRT_DEVICE_CPU, rv, 3, &stale));
    tlrt_buffer_free(stale);
    // call(idx, out) records one of the four with valid nodes and the given index buffer.
    struct IbufCall {
      const char *fn;
      std::function<tlrt_status(const tlrt_buffer *, uint64_t *)> call;
    };
    const IbufCall calls[] = {
        {"tlrt_tape_gather_vec_ibuf",
         [&](const tlrt_buffer *ib, uint64_t *out) {
           return tlrt_tape_gather_vec_ibuf(t, n.m34, ib, out);
         }},
        {"tlrt_tape_gather_rows_ibuf",
         [&](const tlrt_buffer *ib, uint64_t *out) {
           return tlrt_tape_gather_rows_ibuf(t, n.m34, ib, out);
         }},
        {"tlrt_tape_scatter_add_ibuf",
         [&](const tlrt_buffer *ib, uint64_t *out) {
           return tlrt_tape_scatter_add_ibuf(t, n.m34, n.v3, ib, out);
         }},
        {"tlrt_tape_scatter_add_rows_ibuf",
         [&](const tlrt_buffer *ib, uint64_t *out) {
           return tlrt_tape_scatter_add_rows_ibuf(t, n.m34, n.m34b, ib, out);
         }},
    };
    for (const IbufCall &c : calls) {
      const uint64_t before = count(t);
      o = 77;
      BAD(c.call(nullptr, &o), TLRT_ERR_NULL_ARGUMENT, c.fn, "idx");
      TH_CHECK(o == 0);
      o = 77;
      BAD(c.call(stale, &o), TLRT_ERR_STALE_HANDLE, c.fn, "idx");
      TH_CHECK(o == 0);
      o = 77;
      BAD(c.call(rel.get(), &o), TLRT_ERR_RELEASED, c.fn, "idx");
      TH_CHECK(o == 0);
      o = 77;
      BAD(c.call(f3.get(), &o), TLRT_ERR_DTYPE, c.fn, "idx");
      TH_CHECK(o == 0);
      TH_CHECK_MSG(count(t) == before, "%s: a failing call changed the tape", c.fn);
      o = 77;
      TH_CHECK_MSG(c.call(bad.get(), &o) == TLRT_OK && index(o) + 1 == count(t),
                   "%s with entries that are not an index: %s", c.fn, tlrt_last_error());
    }
    common("tlrt_tape_gather_vec_ibuf", t, {n.m34}, {"v"},
           [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *out) {
             return tlrt_tape_gather_vec_ibuf(tp, x[0], i3.get(), out);
           });
    common("tlrt_tape_gather_rows_ibuf", t, {n.m34}, {"mat"},
           [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *out) {
             return tlrt_tape_gather_rows_ibuf(tp, x[0], r3.get(), out);
           });
    BAD(tlrt_tape_gather_rows_ibuf(t, n.t234, r3.get(), &o), TLRT_ERR_SHAPE,
        "tlrt_tape_gather_rows_ibuf", "mat");
    TH_CHECK(o == 0);
    common("tlrt_tape_scatter_add_ibuf", t, {n.m34, n.v3}, {"x", "vals"},
           [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *out) {
             return tlrt_tape_scatter_add_ibuf(tp, x[0], x[1], i3.get(), out);
           });
    BAD(tlrt_tape_scatter_add_ibuf(t, n.m34, n.v4, i3.get(), &o), TLRT_ERR_SHAPE,
        "tlrt_tape_scatter_add_ibuf", "vals");
    TH_CHECK(o == 0);
    common("tlrt_tape_scatter_add_rows_ibuf", t, {n.m34, n.m34b}, {"mat", "vals"},
           [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *out) {
             return tlrt_tape_scatter_add_rows_ibuf(tp, x[0], x[1], r3.get(), out);
           });
    BAD(tlrt_tape_scatter_add_rows_ibuf(t, n.m34, n.m43, r3.get(), &o), TLRT_ERR_SHAPE,
        "tlrt_tape_scatter_add_rows_ibuf", "vals");
    TH_CHECK(o == 0);
    BAD(tlrt_tape_scatter_add_rows_ibuf(t, n.m34, n.v4, r3.get(), &o), TLRT_ERR_SHAPE,
        "tlrt_tape_scatter_add_rows_ibuf", "vals");
    TH_CHECK(o == 0);
    if (th::cuda_ready()) {
      Buf gi;
      TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CUDA(0), iv, 3, gi.out()));
      for (const IbufCall &c : calls) {
        o = 77;
        BAD(c.call(gi.get(), &o), TLRT_ERR_DEVICE_MISMATCH, c.fn, "idx");
        TH_CHECK(o == 0);
      }
    }
  }

  // ---- layer norm, products ----
  common("tlrt_tape_layer_norm", t, {n.m34, n.v4, n.v4}, {"x", "gamma", "beta"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_layer_norm(tp, x[0], x[1], x[2], 1e-5, o);
         });
  BAD(tlrt_tape_layer_norm(t, n.m34, n.v3, n.v4, 1e-5, &o), TLRT_ERR_SHAPE, "tlrt_tape_layer_norm",
      "gamma", "x");
  BAD(tlrt_tape_layer_norm(t, n.m34, n.v4, n.m34, 1e-5, &o), TLRT_ERR_SHAPE,
      "tlrt_tape_layer_norm", "beta", "x");
  BAD(tlrt_tape_layer_norm(t, n.s, n.v4, n.v4, 1e-5, &o), TLRT_ERR_SHAPE, "tlrt_tape_layer_norm",
      "x");
  BAD(tlrt_tape_layer_norm(t, n.m34, n.v4, n.v4, -1.0, &o), TLRT_ERR_INVALID_ARGUMENT,
      "tlrt_tape_layer_norm");
  // rms norm: gamma a node of shape (cols) or TLRT_TAPE_NONE.
  common("tlrt_tape_rms_norm", t, {n.m34, n.v4}, {"x", "gamma"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_rms_norm(tp, x[0], x[1], 1e-5, o);
         });
  common("tlrt_tape_rms_norm", t, {n.m34}, {"x"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_rms_norm(tp, x[0], TLRT_TAPE_NONE, 1e-5, o);
         });
  for (uint64_t bad_gamma : {n.v3, n.m34}) {
    o = 77;
    BAD(tlrt_tape_rms_norm(t, n.m34, bad_gamma, 1e-5, &o), TLRT_ERR_SHAPE, "tlrt_tape_rms_norm",
        "gamma", "x");
    TH_CHECK(o == 0);
  }
  BAD(tlrt_tape_rms_norm(t, n.s, n.v4, 1e-5, &o), TLRT_ERR_SHAPE, "tlrt_tape_rms_norm", "x");
  BAD(tlrt_tape_rms_norm(t, n.s, TLRT_TAPE_NONE, 1e-5, &o), TLRT_ERR_SHAPE, "tlrt_tape_rms_norm",
      "x");
  BAD(tlrt_tape_rms_norm(t, n.m34, n.v4, -1.0, &o), TLRT_ERR_INVALID_ARGUMENT,
      "tlrt_tape_rms_norm", "eps");
  BAD(tlrt_tape_rms_norm(t, n.m34, TLRT_TAPE_NONE, NAN, &o), TLRT_ERR_INVALID_ARGUMENT,
      "tlrt_tape_rms_norm", "eps");
  // dropout: p in [0, 1) (after rounding to float32), any x.
  common("tlrt_tape_dropout", t, {n.m34}, {"x"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_dropout(tp, x[0], 0.5, 1, o);
         });
  common("tlrt_tape_dropout", t, {n.s}, {"x"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_dropout(tp, x[0], 0.0, 1, o);
         });
  for (double p : {1.0, -0.5, 1.5, 1.0 - 1e-9 /* rounds to 1 in float32 */, -1e-300, (double)NAN,
                   (double)INFINITY, -(double)INFINITY, 1e300}) {
    const uint64_t before = count(t);
    o = 77;
    BAD(tlrt_tape_dropout(t, n.m34, p, 3, &o), TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_dropout",
        "p");
    TH_CHECK(o == 0 && count(t) == before);
  }
  common("tlrt_tape_matmul", t, {n.m34, n.m43}, {"a", "b"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_matmul(tp, x[0], x[1], false, false, o);
         });
  BAD(tlrt_tape_matmul(t, n.m34, n.m34b, false, false, &o), TLRT_ERR_SHAPE, "tlrt_tape_matmul",
      "a", "b");
  {
    const std::string msg = tlrt_last_error();
    TH_CHECK_MSG(msg.find("inner dimensions") != std::string::npos &&
                     msg.find("(3, 4)") != std::string::npos,
                 "matmul message: %s", msg.c_str());
  }
  TH_OK(tlrt_tape_matmul(t, n.m34, n.m34b, false, true, &o));  // (3,4) x (4,3) stored (3,4)
  BAD(tlrt_tape_matmul(t, n.t234, n.m43, false, false, &o), TLRT_ERR_SHAPE, "tlrt_tape_matmul",
      "a");
  uint64_t b1 = 0, b2 = 0;
  const uint64_t r[3] = {2, 4, 3};
  TH_OK(tlrt_tape_reshape(t, n.t234, r, 3, &b2));  // (2, 4, 3)
  b1 = n.t234;                                     // (2, 3, 4)
  common("tlrt_tape_bmm", t, {b1, b2}, {"a", "b"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_bmm(tp, x[0], x[1], false, false, o);
         });
  BAD(tlrt_tape_bmm(t, b1, b1, false, false, &o), TLRT_ERR_SHAPE, "tlrt_tape_bmm", "a", "b");
  BAD(tlrt_tape_bmm(t, n.m34, n.m43, false, false, &o), TLRT_ERR_SHAPE, "tlrt_tape_bmm", "a");
  const uint64_t r3[3] = {3, 4, 2};
  uint64_t b3 = 0;
  TH_OK(tlrt_tape_reshape(t, n.t234, r3, 3, &b3));  // batch 3
  BAD(tlrt_tape_bmm(t, b1, b3, false, false, &o), TLRT_ERR_SHAPE, "tlrt_tape_bmm", "a", "b");

  // ---- spectral convolution, selective scan ----
  {
    const uint64_t w = leaf(t, {2, 4, 4}), w2 = leaf(t, {2, 4, 4}), x8 = leaf(t, {8, 4});
    const uint64_t wbig = leaf(t, {6, 4, 4}), wbig2 = leaf(t, {6, 4, 4});
    common("tlrt_tape_spectral_conv1d_rfft", t, {x8, w, w2}, {"x", "w_re", "w_im"},
           [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
             return tlrt_tape_spectral_conv1d_rfft(tp, x[0], x[1], x[2], o);
           });
    BAD(tlrt_tape_spectral_conv1d_rfft(t, x8, w, n.t234, &o), TLRT_ERR_SHAPE,
        "tlrt_tape_spectral_conv1d_rfft", "w_re", "w_im");
    BAD(tlrt_tape_spectral_conv1d_rfft(t, n.m43, w, w2, &o), TLRT_ERR_SHAPE,
        "tlrt_tape_spectral_conv1d_rfft", "w_re", "x");
    BAD(tlrt_tape_spectral_conv1d_rfft(t, x8, wbig, wbig2, &o), TLRT_ERR_INVALID_ARGUMENT,
        "tlrt_tape_spectral_conv1d_rfft");  // 6 modes > 8 / 2 + 1
    common("tlrt_tape_selective_scan_diag", t, {n.v4, n.v4, n.m34, n.v4}, {"A", "B", "X", "h0"},
           [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
             return tlrt_tape_selective_scan_diag(tp, x[0], x[1], x[2], x[3], o);
           });
    BAD(tlrt_tape_selective_scan_diag(t, n.v3, n.v4, n.m34, n.v4, &o), TLRT_ERR_SHAPE,
        "tlrt_tape_selective_scan_diag", "A", "X");
    BAD(tlrt_tape_selective_scan_diag(t, n.v4, n.v4, n.m34, n.v3, &o), TLRT_ERR_SHAPE,
        "tlrt_tape_selective_scan_diag", "h0", "X");
    common("tlrt_tape_selective_scan_diag_var", t, {n.m34, n.m34b, n.m34, n.v4},
           {"A", "B", "X", "h0"},
           [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
             return tlrt_tape_selective_scan_diag_var(tp, x[0], x[1], x[2], x[3], o);
           });
    BAD(tlrt_tape_selective_scan_diag_var(t, n.v4, n.m34b, n.m34, n.v4, &o), TLRT_ERR_SHAPE,
        "tlrt_tape_selective_scan_diag_var", "A", "X");
    BAD(tlrt_tape_selective_scan_diag_var(t, n.m34, n.m34b, n.t234, n.v4, &o), TLRT_ERR_SHAPE,
        "tlrt_tape_selective_scan_diag_var", "X");
  }

  // ---- convolution, pooling ----
  {
    const uint64_t x4 = leaf(t, {2, 3, 5, 5}), w4 = leaf(t, {4, 3, 3, 3}), b4 = leaf(t, {4});
    const uint64_t w6c = leaf(t, {6, 1, 3, 3});                        // one channel per group
    const uint64_t x0 = leaf(t, {1, 1, 0, 0}), w11 = leaf(t, {1, 1, 1, 1});  // empty input
    common("tlrt_tape_conv2d", t, {x4, w4, b4}, {"x", "w", "b"},
           [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
             return tlrt_tape_conv2d(tp, x[0], x[1], x[2], 2, 1, 1, 0, 1, 2, 1, o);
           });
    BAD(tlrt_tape_conv2d(t, n.t234, w4, b4, 1, 1, 0, 0, 1, 1, 1, &o), TLRT_ERR_SHAPE,
        "tlrt_tape_conv2d", "x");
    BAD(tlrt_tape_conv2d(t, x4, n.t234, b4, 1, 1, 0, 0, 1, 1, 1, &o), TLRT_ERR_SHAPE,
        "tlrt_tape_conv2d", "w");
    BAD(tlrt_tape_conv2d(t, x4, w6c, TLRT_TAPE_NONE, 1, 1, 0, 0, 1, 1, 1, &o), TLRT_ERR_SHAPE,
        "tlrt_tape_conv2d", "w", "x");  // 1 channel per group, 3 / groups = 3 expected
    BAD(tlrt_tape_conv2d(t, x4, w4, n.v3, 1, 1, 0, 0, 1, 1, 1, &o), TLRT_ERR_SHAPE,
        "tlrt_tape_conv2d", "b", "w");
    TH_OK(tlrt_tape_conv2d(t, x4, w6c, TLRT_TAPE_NONE, 1, 1, 1, 1, 1, 1, 3, &o));  // depthwise
    BAD(tlrt_tape_conv2d(t, x4, w4, b4, 0, 1, 0, 0, 1, 1, 1, &o), TLRT_ERR_INVALID_ARGUMENT,
        "tlrt_tape_conv2d", "stride_h");
    BAD(tlrt_tape_conv2d(t, x4, w4, b4, 1, 1, 0, 0, 1, 0, 1, &o), TLRT_ERR_INVALID_ARGUMENT,
        "tlrt_tape_conv2d", "dilation_w");
    BAD(tlrt_tape_conv2d(t, x4, w4, b4, 1, 1, 0, 0, 1, 1, 0, &o), TLRT_ERR_INVALID_ARGUMENT,
        "tlrt_tape_conv2d", "groups");
    BAD(tlrt_tape_conv2d(t, x4, w6c, TLRT_TAPE_NONE, 1, 1, 0, 0, 1, 1, 2, &o),
        TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_conv2d", "groups");  // 3 channels in 2 groups
    // 5 + 2 pad >= 2^62 (64-bit signed index arithmetic), with a stride that keeps the output
    // small (2 rows).
    BAD(tlrt_tape_conv2d(t, x4, w4, b4, uint64_t{1} << 62, 1, uint64_t{1} << 61, 0, 1, 1, 1, &o),
        TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_conv2d", "pad_h");
    // An empty input padded by 2^40 cells: windows everywhere, (2^41 + 1)^2 outputs.
    BAD(tlrt_tape_conv2d(t, x0, w11, TLRT_TAPE_NONE, 1, 1, uint64_t{1} << 40, uint64_t{1} << 40, 1,
                         1, 1, &o), TLRT_ERR_OVERFLOW, "tlrt_tape_conv2d");
    TH_CHECK(o == 0);

    const uint64_t x3 = leaf(t, {2, 3, 7}), w3 = leaf(t, {4, 3, 3});
    const uint64_t one[1] = {1}, zero[1] = {0}, two[2] = {1, 1};
    common("tlrt_tape_conv", t, {x3, w3, b4}, {"x", "w", "b"},
           [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
             return tlrt_tape_conv(tp, x[0], x[1], x[2], one, one, nullptr, 1, o);
           });
    BAD(tlrt_tape_conv(t, x3, w3, b4, nullptr, one, one, 1, &o), TLRT_ERR_NULL_ARGUMENT,
        "tlrt_tape_conv", "stride");
    BAD(tlrt_tape_conv(t, x3, w3, b4, one, nullptr, one, 1, &o), TLRT_ERR_NULL_ARGUMENT,
        "tlrt_tape_conv", "padding");
    BAD(tlrt_tape_conv(t, x3, w4, b4, one, one, nullptr, 1, &o), TLRT_ERR_SHAPE, "tlrt_tape_conv",
        "w", "x");  // rank 4 kernel for a 1-D input
    BAD(tlrt_tape_conv(t, n.m34, n.m34b, TLRT_TAPE_NONE, one, one, nullptr, 1, &o), TLRT_ERR_SHAPE,
        "tlrt_tape_conv", "x");  // no spatial axis
    BAD(tlrt_tape_conv(t, x3, w3, b4, zero, one, nullptr, 1, &o), TLRT_ERR_INVALID_ARGUMENT,
        "tlrt_tape_conv", "stride");
    BAD(tlrt_tape_conv(t, x3, w3, b4, one, one, zero, 1, &o), TLRT_ERR_INVALID_ARGUMENT,
        "tlrt_tape_conv", "dilation");
    TH_OK(tlrt_tape_conv(t, x4, w4, TLRT_TAPE_NONE, two, two, two, 1, &o));  // 2-D via N-D

    using Pool = std::function<tlrt_status(tlrt_tape *, uint64_t, uint64_t, uint64_t, uint64_t,
                                           uint64_t, uint64_t, uint64_t, uint64_t *)>;
    struct P { const char *fn; Pool f; };
    for (const P &pl : {P{"tlrt_tape_maxpool2d", tlrt_tape_maxpool2d},
                        P{"tlrt_tape_avgpool2d",
                          [](tlrt_tape *tp, uint64_t x, uint64_t kh, uint64_t kw, uint64_t sh,
                             uint64_t sw, uint64_t ph, uint64_t pw, uint64_t *o) {
                            return tlrt_tape_avgpool2d(tp, x, kh, kw, sh, sw, ph, pw, false, o);
                          }}}) {
      common(pl.fn, t, {x4}, {"x"},
             [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
               return pl.f(tp, x[0], 3, 2, 2, 2, 1, 1, o);
             });
      BAD(pl.f(t, n.t234, 2, 2, 2, 2, 0, 0, &o), TLRT_ERR_SHAPE, pl.fn, "x");
      BAD(pl.f(t, x4, 2, 0, 2, 2, 0, 0, &o), TLRT_ERR_INVALID_ARGUMENT, pl.fn, "kernel_w");
      BAD(pl.f(t, x4, 2, 2, 0, 2, 0, 0, &o), TLRT_ERR_INVALID_ARGUMENT, pl.fn, "stride_h");
      BAD(pl.f(t, x4, 3, 3, 1, 1, 2, 0, &o), TLRT_ERR_INVALID_ARGUMENT, pl.fn, "pad_h",
          "kernel_h");  // 2 pad > kernel
      TH_CHECK(o == 0);
    }
  }

  // ---- attention ----
  {
    const uint64_t q = leaf(t, {2, 3, 4}), k = leaf(t, {2, 3, 4}), v = leaf(t, {2, 3, 4});
    const uint64_t big = leaf(t, {1, 2, 257});
    Buf mask(th::upload({1, 0, 1, 1, 1, 0, 0, 1, 1})), mask4(th::upload({1, 1, 1, 1}));
    Buf gone(th::upload({1, 1, 1, 1, 1, 1, 1, 1, 1}));
    TH_OK(tlrt_buffer_release_storage(gone.get(), nullptr));
    common("tlrt_tape_flash_attention", t, {q, k, v}, {"q", "k", "v"},
           [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
             return tlrt_tape_flash_attention(tp, x[0], x[1], x[2], mask.get(), 0.5, true,
                                              -INFINITY, o);
           });
    BAD(tlrt_tape_flash_attention(t, q, n.t234, n.m34, nullptr, 0.5, false, -1e3, &o),
        TLRT_ERR_SHAPE, "tlrt_tape_flash_attention", "q", "v");
    BAD(tlrt_tape_flash_attention(t, n.m34, n.m34, n.m34, nullptr, 0.5, false, -1e3, &o),
        TLRT_ERR_SHAPE, "tlrt_tape_flash_attention", "q");
    const uint64_t k2 = leaf(t, {2, 4, 3});
    BAD(tlrt_tape_flash_attention(t, q, k2, v, nullptr, 0.5, false, -1e3, &o), TLRT_ERR_SHAPE,
        "tlrt_tape_flash_attention", "q", "k");
    BAD(tlrt_tape_flash_attention(t, q, k, v, mask4.get(), 0.5, false, -1e3, &o), TLRT_ERR_SHAPE,
        "tlrt_tape_flash_attention", "mask");
    BAD(tlrt_tape_flash_attention(t, q, k, v, gone.get(), 0.5, false, -1e3, &o), TLRT_ERR_RELEASED,
        "tlrt_tape_flash_attention", "mask");
    BAD(tlrt_tape_flash_attention(t, q, k, v, nullptr, NAN, false, -1e3, &o),
        TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_flash_attention", "scale");
    BAD(tlrt_tape_flash_attention(t, q, k, v, nullptr, 0.5, false, INFINITY, &o),
        TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_flash_attention", "mask_fill");
    BAD(tlrt_tape_flash_attention(t, big, big, big, nullptr, 0.5, false, -1e3, &o),
        TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_flash_attention", "d");
    TH_CHECK(o == 0);

    const uint64_t x = leaf(t, {2, 3, 4}), w = leaf(t, {4, 4}), w2 = leaf(t, {4, 4});
    const uint64_t b = leaf(t, {4});
    auto mha = [](tlrt_tape *tp, const std::vector<uint64_t> &a, uint64_t heads, uint64_t *o) {
      return tlrt_tape_multi_head_attention(tp, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7],
                                            a[8], heads, true, o);
    };
    const std::vector<uint64_t> ok = {x, w, w2, w, w2, b, b, TLRT_TAPE_NONE, b};
    common("tlrt_tape_multi_head_attention", t, ok,
           {"x", "w_q", "w_k", "w_v", "w_o", "b_q", "b_k"},  // b_v is none here
           [&](tlrt_tape *tp, const std::vector<uint64_t> &a, uint64_t *o) {
             return mha(tp, a, 2, o);
           });
    const char *const names[9] = {"x", "w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"};
    for (int i = 0; i < 9; ++i) {  // each argument with a wrong shape in turn
      std::vector<uint64_t> bad = ok;
      bad[i] = i == 0 ? n.m34 : i < 5 ? n.m43 : n.v3;
      BAD(mha(t, bad, 2, &o), TLRT_ERR_SHAPE, "tlrt_tape_multi_head_attention", names[i]);
    }
    BAD(mha(t, ok, 0, &o), TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_multi_head_attention",
        "num_heads");
    BAD(mha(t, ok, 3, &o), TLRT_ERR_INVALID_ARGUMENT, "tlrt_tape_multi_head_attention",
        "num_heads");
    TH_CHECK(o == 0);
    // d_head = 257 > 256: the attention op's INVALID_ARGUMENT after the projections (rolled back).
    const uint64_t xb = leaf(t, {1, 2, 257}), wb = leaf(t, {257, 257});
    const uint64_t before = count(t);
    BAD(mha(t, {xb, wb, wb, wb, wb, TLRT_TAPE_NONE, TLRT_TAPE_NONE, TLRT_TAPE_NONE,
                TLRT_TAPE_NONE}, 1, &o), TLRT_ERR_INVALID_ARGUMENT,
        "tlrt_tape_multi_head_attention", "d");
    TH_CHECK(count(t) == before);
  }

  // ---- attention of views: attention_qkv (one fused node), attention (grouped heads) ----
  {
    const char *fq = "tlrt_tape_attention_qkv", *fa = "tlrt_tape_attention";
    const uint64_t qkv = leaf(t, {2, 3, 12});  // heads_q 2 + 2 heads_kv 1 = 4 heads of d = 3
    common(fq, t, {qkv}, {"qkv"}, [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
      return tlrt_tape_attention_qkv(tp, x[0], 2, 1, true, 0.5, o);
    });
    BAD(tlrt_tape_attention_qkv(t, qkv, 3, 2, false, 0.5, &o), TLRT_ERR_INVALID_ARGUMENT, fq,
        "heads_q", "heads_kv");
    BAD(tlrt_tape_attention_qkv(t, qkv, 2, 0, false, 0.5, &o), TLRT_ERR_INVALID_ARGUMENT, fq,
        "heads_kv");
    BAD(tlrt_tape_attention_qkv(t, qkv, 0, 1, false, 0.5, &o), TLRT_ERR_INVALID_ARGUMENT, fq,
        "heads_q");
    BAD(tlrt_tape_attention_qkv(t, n.m34, 2, 1, false, 0.5, &o), TLRT_ERR_SHAPE, fq, "qkv");
    BAD(tlrt_tape_attention_qkv(t, qkv, 3, 1, false, 0.5, &o), TLRT_ERR_SHAPE, fq, "qkv");
    BAD(tlrt_tape_attention_qkv(t, qkv, 2, 1, false, NAN, &o), TLRT_ERR_INVALID_ARGUMENT, fq,
        "scale");
    const uint64_t wide = leaf(t, {1, 2, 3 * 257});  // d = 257
    BAD(tlrt_tape_attention_qkv(t, wide, 1, 1, false, 0.5, &o), TLRT_ERR_INVALID_ARGUMENT, fq,
        "geometry");
    const uint64_t q = leaf(t, {2, 3, 4}), k = leaf(t, {2, 5, 2}), v = leaf(t, {2, 5, 2});
    common(fa, t, {q, k, v}, {"q", "k", "v"},
           [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
             return tlrt_tape_attention(tp, x[0], x[1], x[2], 2, 1, true, 0.5, o);
           });
    const uint64_t k1 = leaf(t, {1, 5, 2}), k4 = leaf(t, {2, 5, 4}), v4 = leaf(t, {2, 4, 2});
    BAD(tlrt_tape_attention(t, q, k, v, 2, 3, false, 0.5, &o), TLRT_ERR_INVALID_ARGUMENT, fa,
        "heads_q", "heads_kv");
    BAD(tlrt_tape_attention(t, n.m34, k, v, 2, 1, false, 0.5, &o), TLRT_ERR_SHAPE, fa, "q");
    BAD(tlrt_tape_attention(t, q, n.m34, n.m34, 2, 1, false, 0.5, &o), TLRT_ERR_SHAPE, fa, "k");
    BAD(tlrt_tape_attention(t, q, k, v4, 2, 1, false, 0.5, &o), TLRT_ERR_SHAPE, fa, "k", "v");
    BAD(tlrt_tape_attention(t, q, k1, k1, 2, 1, false, 0.5, &o), TLRT_ERR_SHAPE, fa, "k", "q");
    BAD(tlrt_tape_attention(t, q, k4, k4, 2, 1, false, 0.5, &o), TLRT_ERR_SHAPE, fa, "k");
    BAD(tlrt_tape_attention(t, q, k, v, 4, 1, false, 0.5, &o), TLRT_ERR_SHAPE, fa, "k");
    BAD(tlrt_tape_attention(t, q, k, v, 3, 1, false, 0.5, &o), TLRT_ERR_SHAPE, fa, "q");
    BAD(tlrt_tape_attention(t, q, k, v, 2, 1, false, INFINITY, &o), TLRT_ERR_INVALID_ARGUMENT, fa,
        "scale");
    TH_CHECK(o == 0);
  }

  // ---- composites ----
  // linear: x (4, 3) (m43), W (4, 3) needs in = 3: W = m43 reshaped? use x = m34 (3, 4), W = m34b
  // (3, 4): y (3, 3), b (3).
  common("tlrt_tape_linear", t, {n.m34, n.m34b, n.v3}, {"x", "w", "b"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_linear(tp, x[0], x[1], x[2], o);
         });
  BAD(tlrt_tape_linear(t, n.m34, n.m43, TLRT_TAPE_NONE, &o), TLRT_ERR_SHAPE, "tlrt_tape_linear",
      "x", "w");
  BAD(tlrt_tape_linear(t, n.m34, n.m34b, n.v4, &o), TLRT_ERR_SHAPE, "tlrt_tape_linear", "b", "w");
  common("tlrt_tape_linear_gelu", t, {n.m34, n.m34b, n.v3}, {"x", "w", "b"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_linear_gelu(tp, x[0], x[1], x[2], o);
         });
  BAD(tlrt_tape_linear_gelu(t, n.m34, n.m43, TLRT_TAPE_NONE, &o), TLRT_ERR_SHAPE,
      "tlrt_tape_linear_gelu", "x", "w");
  BAD(tlrt_tape_linear_gelu(t, n.m34, n.m34b, n.v4, &o), TLRT_ERR_SHAPE, "tlrt_tape_linear_gelu",
      "b", "w");
  common("tlrt_tape_mse_loss", t, {n.m34, n.m34b}, {"pred", "target"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_mse_loss(tp, x[0], x[1], o);
         });
  BAD(tlrt_tape_mse_loss(t, n.m34, n.m43, &o), TLRT_ERR_SHAPE, "tlrt_tape_mse_loss", "pred",
      "target");
  const uint64_t labels[3] = {0, 3, 1}, badlabels[3] = {0, 4, 1};
  common("tlrt_tape_cross_entropy", t, {n.m34}, {"logits"},
         [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_cross_entropy(tp, x[0], labels, o);
         });
  BAD(tlrt_tape_cross_entropy(t, n.m34, badlabels, &o), TLRT_ERR_INDEX, "tlrt_tape_cross_entropy",
      "labels");
  BAD(tlrt_tape_cross_entropy(t, n.m34, nullptr, &o), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_tape_cross_entropy", "labels");
  BAD(tlrt_tape_cross_entropy(t, n.t234, labels, &o), TLRT_ERR_SHAPE, "tlrt_tape_cross_entropy",
      "logits");
  // Labels in an index buffer: NULL, a freed handle, released, of float32 values, on another
  // device (CUDA only), not batch elements; logits not of rank 2. Labels outside [0, classes)
  // are recorded (counted by tlrt_index_faults, no TLRT_ERR_INDEX).
  {
    const char *fn = "tlrt_tape_cross_entropy_ibuf";
    const int64_t lv[3] = {0, 3, 1}, lbad[3] = {0, 4, -1};
    const int32_t l32[4] = {0, 3, 1, 2};
    Buf lab, lab32_4, lab0, labbad, rel, f3;
    TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, lv, 3, lab.out()));
    TH_OK(tlrt_buffer_from_i32(TLRT_DEVICE_CPU, l32, 4, lab32_4.out()));
    TH_OK(tlrt_buffer_zeros_of(TLRT_DEVICE_CPU, TLRT_DTYPE_I64, 0, lab0.out()));
    TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, lbad, 3, labbad.out()));
    TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, lv, 3, rel.out()));
    TH_OK(tlrt_buffer_release_storage(rel.get(), nullptr));
    f3 = Buf(th::upload({0, 3, 1}));
    tlrt_buffer *stale = nullptr;
    TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, lv, 3, &stale));
    tlrt_buffer_free(stale);
    common(fn, t, {n.m34}, {"logits"},
           [&](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *out) {
             return tlrt_tape_cross_entropy_ibuf(tp, x[0], lab.get(), out);
           });
    const uint64_t before = count(t);
    o = 77;
    BAD(tlrt_tape_cross_entropy_ibuf(t, n.m34, nullptr, &o), TLRT_ERR_NULL_ARGUMENT, fn, "labels");
    TH_CHECK(o == 0);
    o = 77;
    BAD(tlrt_tape_cross_entropy_ibuf(t, n.m34, stale, &o), TLRT_ERR_STALE_HANDLE, fn, "labels");
    TH_CHECK(o == 0);
    o = 77;
    BAD(tlrt_tape_cross_entropy_ibuf(t, n.m34, rel.get(), &o), TLRT_ERR_RELEASED, fn, "labels");
    TH_CHECK(o == 0);
    o = 77;
    BAD(tlrt_tape_cross_entropy_ibuf(t, n.m34, f3.get(), &o), TLRT_ERR_DTYPE, fn, "labels");
    TH_CHECK(o == 0);
    for (const tlrt_buffer *l : {lab32_4.get(), lab0.get()}) {
      o = 77;
      BAD(tlrt_tape_cross_entropy_ibuf(t, n.m34, l, &o), TLRT_ERR_SHAPE, fn, "labels");
      TH_CHECK(o == 0);
    }
    for (uint64_t x : {n.t234, n.v3, n.s}) {
      o = 77;
      BAD(tlrt_tape_cross_entropy_ibuf(t, x, lab.get(), &o), TLRT_ERR_SHAPE, fn, "logits");
      TH_CHECK(o == 0);
    }
    if (th::cuda_ready()) {
      Buf gl;
      TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CUDA(0), lv, 3, gl.out()));
      o = 77;
      BAD(tlrt_tape_cross_entropy_ibuf(t, n.m34, gl.get(), &o), TLRT_ERR_DEVICE_MISMATCH, fn,
          "labels");
      TH_CHECK(o == 0);
    }
    TH_CHECK_MSG(count(t) == before, "%s: a failing call changed the tape", fn);
    o = 77;
    TH_CHECK_MSG(tlrt_tape_cross_entropy_ibuf(t, n.m34, labbad.get(), &o) == TLRT_OK &&
                     index(o) + 1 == count(t),
                 "%s with labels outside [0, classes): %s", fn, tlrt_last_error());
  }
  common("tlrt_tape_batchnorm", t, {n.m34, n.v4, n.v4}, {"x", "gamma", "beta"},
         [](tlrt_tape *tp, const std::vector<uint64_t> &x, uint64_t *o) {
           return tlrt_tape_batchnorm(tp, x[0], x[1], x[2], 1e-5, o);
         });
  BAD(tlrt_tape_batchnorm(t, n.m34, n.v3, n.v4, 1e-5, &o), TLRT_ERR_SHAPE, "tlrt_tape_batchnorm",
      "gamma");
  BAD(tlrt_tape_batchnorm(t, n.m34, n.v4, n.v4, NAN, &o), TLRT_ERR_INVALID_ARGUMENT,
      "tlrt_tape_batchnorm");
  tlrt_tape_free(t);
}

}  // namespace

// tlrt_tape_release and tlrt_tape_backward_ex (abi/tlrt_tape.h, MEMORY): NULL and stale tapes,
// ids not in the tape, of another tape or from before a reset; a repeated release and the inner
// node of a composite; use after release (recording, tlrt_tape_value); bad flags, seeds of the
// wrong size, released or of integer values, the one-element rule without a seed; a backward
// over a graph a freeing backward has freed. Failures change nothing (node count, gradients).
void test_release_and_backward_ex() {
  tlrt_tape *t = nullptr;
  TH_OK(tlrt_tape_new(TLRT_DEVICE_CPU, &t));
  Fixture f = make_fixture();
  const uint64_t d4[1] = {4}, d22[2] = {2, 2};
  uint64_t a = 0, e = 0, s = 0, id = 7;
  TH_OK(tlrt_tape_leaf(t, f.a, d4, 1, true, &a));
  TH_OK(tlrt_tape_exp(t, a, &e));
  TH_OK(tlrt_tape_reduce_sum(t, e, &s));

  // release
  BAD(tlrt_tape_release(nullptr, e), TLRT_ERR_NULL_ARGUMENT, "tlrt_tape_release", "tape");
  {
    tlrt_tape *gone = nullptr;
    TH_OK(tlrt_tape_new(TLRT_DEVICE_CPU, &gone));
    TH_OK(tlrt_tape_free_checked(gone));
    BAD(tlrt_tape_release(gone, e), TLRT_ERR_STALE_HANDLE, "tlrt_tape_release", "tape");
    BAD(tlrt_tape_backward_ex(gone, s, nullptr, 0), TLRT_ERR_STALE_HANDLE,
        "tlrt_tape_backward_ex", "tape");
  }
  BAD(tlrt_tape_release(t, beyond(a)), TLRT_ERR_INDEX, "tlrt_tape_release", "node");
  BAD(tlrt_tape_release(t, g_foreign), TLRT_ERR_STALE_HANDLE, "tlrt_tape_release", "node");
  TH_OK(tlrt_tape_release(t, e));
  BAD(tlrt_tape_release(t, e), TLRT_ERR_RELEASED, "tlrt_tape_release", "node");
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_tape_value(t, e, &out), TLRT_ERR_RELEASED, "tlrt_tape_value", "node");
  CLEARED(out);
  BAD(tlrt_tape_exp(t, e, &id), TLRT_ERR_RELEASED, "tlrt_tape_exp", "x");
  TH_CHECK(id == 0);
  BAD(tlrt_tape_add(t, a, e, &id), TLRT_ERR_RELEASED, "tlrt_tape_add", "b");
  BAD(tlrt_tape_reshape(t, e, d22, 2, &id), TLRT_ERR_RELEASED, "tlrt_tape_reshape", "x");
  uint64_t count = 0;
  TH_OK(tlrt_tape_node_count(t, &count));
  TH_CHECK(count == 3);
  // The inner nodes of a composite are released at once.
  uint64_t mse = 0;
  TH_OK(tlrt_tape_mse_loss(t, a, a, &mse));
  BAD(tlrt_tape_release(t, mse - 1), TLRT_ERR_RELEASED, "tlrt_tape_release", "node");
  out = kSentinel;
  BAD(tlrt_tape_value(t, mse - 2, &out), TLRT_ERR_RELEASED, "tlrt_tape_value", "node");
  CLEARED(out);

  // backward_ex
  BAD(tlrt_tape_backward_ex(nullptr, s, nullptr, 0), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_tape_backward_ex", "tape");
  BAD(tlrt_tape_backward_ex(t, beyond(a), nullptr, 0), TLRT_ERR_INDEX, "tlrt_tape_backward_ex",
      "node");
  BAD(tlrt_tape_backward_ex(t, g_foreign, nullptr, 0), TLRT_ERR_STALE_HANDLE,
      "tlrt_tape_backward_ex", "node");
  for (uint32_t flags : {2u, 0x80000000u, TLRT_TAPE_BACKWARD_FREE | 4u})
    BAD(tlrt_tape_backward_ex(t, s, nullptr, flags), TLRT_ERR_INVALID_ARGUMENT,
        "tlrt_tape_backward_ex", "flags");
  BAD(tlrt_tape_backward_ex(t, a, nullptr, 0), TLRT_ERR_SHAPE, "tlrt_tape_backward_ex");
  BAD(tlrt_tape_backward_ex(t, a, f.short3, TLRT_TAPE_BACKWARD_FREE), TLRT_ERR_SHAPE,
      "tlrt_tape_backward_ex", "seed");
  BAD(tlrt_tape_backward_ex(t, a, f.released, 0), TLRT_ERR_RELEASED, "tlrt_tape_backward_ex",
      "seed");
  {
    const int32_t iv[4] = {1, 2, 3, 4};
    Buf ib;
    TH_OK(tlrt_buffer_from_i32(TLRT_DEVICE_CPU, iv, 4, ib.out()));
    BAD(tlrt_tape_backward_ex(t, a, ib.get(), 0), TLRT_ERR_DTYPE, "tlrt_tape_backward_ex", "seed");
  }
  if (th::cuda_ready()) {
    tlrt_tape *g = nullptr;
    Buf cb;
    TH_OK(tlrt_tape_new(TLRT_DEVICE_CUDA(0), &g));
    TH_OK(tlrt_buffer_to_device(f.a, TLRT_DEVICE_CUDA(0), cb.out()));
    uint64_t ca = 0;
    TH_OK(tlrt_tape_leaf(g, cb.get(), d4, 1, true, &ca));
    BAD(tlrt_tape_backward_ex(g, ca, f.g, 0), TLRT_ERR_DEVICE_MISMATCH, "tlrt_tape_backward_ex",
        "seed");
    tlrt_tape_free(g);
  }
  // A freeing backward, then any backward crossing the freed rules: RELEASED, nothing changes.
  TH_OK(tlrt_tape_backward_ex(t, s, nullptr, TLRT_TAPE_BACKWARD_FREE));
  Buf g1;
  TH_OK(tlrt_tape_grad(t, a, g1.out()));
  const std::vector<float> before = th::download(g1.get());
  BAD(tlrt_tape_backward_ex(t, s, nullptr, TLRT_TAPE_BACKWARD_FREE), TLRT_ERR_RELEASED,
      "tlrt_tape_backward_ex");
  BAD(tlrt_tape_backward(t, s), TLRT_ERR_RELEASED, "tlrt_tape_backward");
  Buf g2;
  TH_OK(tlrt_tape_grad(t, a, g2.out()));
  TH_CHECK(th::download(g2.get()) == before);
  // Stale after a reset.
  TH_OK(tlrt_tape_reset(t));
  BAD(tlrt_tape_release(t, s), TLRT_ERR_STALE_HANDLE, "tlrt_tape_release", "node");
  BAD(tlrt_tape_backward_ex(t, s, nullptr, 0), TLRT_ERR_STALE_HANDLE, "tlrt_tape_backward_ex",
      "node");
  tlrt_tape_free(t);
  free_fixture(f);
}

int main() {
  const tlrt_allocator_stats start = th::stats();
  tlrt_tape *other = nullptr;
  TH_OK(tlrt_tape_new(TLRT_DEVICE_CPU, &other));
  Buf one(th::upload({1}));
  TH_OK(tlrt_tape_leaf(other, one.get(), nullptr, 0, false, &g_foreign));
  test_lifetime_and_leaves();
  test_recording();
  test_release_and_backward_ex();
  tlrt_tape_free(other);
  one = Buf();
  expect_no_leaks(start);
  return th::finish("test_bad_input_tape");
}
