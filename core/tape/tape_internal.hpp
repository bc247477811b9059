// The autograd tape's data model (abi/tlrt_tape.h states the contract).
//
// Rule of this directory: the tape is a client of the public ABI. It includes only abi/*.h, the
// C++ standard library, this header, and core/error.hpp -- the one internal header, for the
// entry-point guard (tlrt::guarded, tlrt::fail) that turns exceptions into a status and sets the
// thread's tlrt_last_error() message; the public ABI has no way to set that message and must not
// get one (tests/abi/check_tape_includes.py enforces this list). Every computation goes through
// tlrt_* calls; a failing call's status and message are passed on (throw_op).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "abi/tlrt_attention.h"
#include "abi/tlrt_blas.h"
#include "abi/tlrt_buffer.h"
#include "abi/tlrt_conv.h"
#include "abi/tlrt_elementwise.h"
#include "abi/tlrt_fft.h"
#include "abi/tlrt_index.h"
#include "abi/tlrt_layer_norm.h"
#include "abi/tlrt_layout.h"
#include "abi/tlrt_pool.h"
#include "abi/tlrt_reduce.h"
#include "abi/tlrt_runtime.h"
#include "abi/tlrt_scan.h"
#include "abi/tlrt_softmax.h"
#include "abi/tlrt_tape.h"
#include "core/error.hpp"

namespace tlrt {
namespace tape {

// One owned reference to a tlrt_buffer (freed on destruction).
class Buf {
 public:
  Buf() = default;
  explicit Buf(tlrt_buffer *b) noexcept : p_(b) {}
  Buf(Buf &&o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  Buf &operator=(Buf &&o) noexcept {
    if (this != &o) {
      tlrt_buffer_free(p_);
      p_ = o.p_;
      o.p_ = nullptr;
    }
    return *this;
  }
  Buf(const Buf &) = delete;
  Buf &operator=(const Buf &) = delete;
  ~Buf() { tlrt_buffer_free(p_); }
  tlrt_buffer *get() const noexcept { return p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  tlrt_buffer *release() noexcept {
    tlrt_buffer *b = p_;
    p_ = nullptr;
    return b;
  }
  void reset() noexcept {
    tlrt_buffer_free(p_);
    p_ = nullptr;
  }

 private:
  tlrt_buffer *p_ = nullptr;
};

// Throws the status of a failed tlrt_* call with its message ("tlrt_add: argument b ..."); the
// entry point's guard prefixes the tape function's name.
[[noreturn]] void throw_op(tlrt_status s);

inline void check(tlrt_status s) {
  if (s != TLRT_OK) throw_op(s);
}

// Runs f(&out) (a tlrt_* call producing one buffer) and returns the owned result.
template <class F>
Buf call(F &&f) {
  tlrt_buffer *o = nullptr;
  const tlrt_status s = f(&o);
  if (s != TLRT_OK) {
    tlrt_buffer_free(o);  // NULL by contract; defensive
    throw_op(s);
  }
  return Buf(o);
}
#define TAPE_CALL(fn, ...) ::tlrt::tape::call([&](tlrt_buffer **o_) { return fn(__VA_ARGS__, o_); })

// A new reference to b.
Buf share(const tlrt_buffer *b);

struct Shape {
  uint32_t rank = 0;
  uint64_t d[TLRT_TAPE_MAX_RANK] = {};
  uint64_t numel() const noexcept {  // shapes in the tape always describe a buffer: no overflow
    uint64_t n = 1;
    for (uint32_t i = 0; i < rank; ++i) n *= d[i];
    return n;
  }
  bool operator==(const Shape &o) const noexcept {
    if (rank != o.rank) return false;
    for (uint32_t i = 0; i < rank; ++i)
      if (d[i] != o.d[i]) return false;
    return true;
  }
  bool operator!=(const Shape &o) const noexcept { return !(*this == o); }
  std::string str() const;  // "(3, 4)", "()" for a scalar
};

struct Node;

// A backward rule: given the node and its upstream gradient g, fills out[i] with the contribution
// to parent i (left empty where that parent does not require a gradient).
using BackwardFn =
    std::function<void(const tlrt_tape &t, const Node &self, const tlrt_buffer *g,
                       std::vector<Buf> &out)>;

struct Node {
  Buf value;
  Shape shape;
  bool leaf = false;
  bool requires_grad = false;
  std::vector<uint64_t> parents;
  BackwardFn backward;     // empty for leaves and nodes that do not require a gradient
  std::vector<Buf> saved;  // forward workspace kept for backward (released at reset)
  Buf grad;                // accumulated gradient (leaves only)
};

}  // namespace tape
}  // namespace tlrt

struct tlrt_tape {
  tlrt_device device = TLRT_DEVICE_CPU;
  std::vector<tlrt::tape::Node> nodes;
};

namespace tlrt {
namespace tape {

// The node with id `id`, or TLRT_ERR_INDEX naming argument `arg`.
const Node &node_at(const tlrt_tape &t, uint64_t id, const char *arg);

// Does parent i of `self` require a gradient?
inline bool need(const tlrt_tape &t, const Node &self, size_t i) {
  return t.nodes[self.parents[i]].requires_grad;
}
inline const tlrt_buffer *parent_value(const tlrt_tape &t, const Node &self, size_t i) {
  return t.nodes[self.parents[i]].value.get();
}

// Appends a node computed from `parents` and returns its id. requires_grad is the OR of the
// parents'; when it is false the backward rule and the workspace are dropped at once.
uint64_t push(tlrt_tape &t, Buf value, const Shape &shape, std::vector<uint64_t> parents,
              BackwardFn backward, std::vector<Buf> saved = {});
// Appends a leaf (value already validated against the shape).
uint64_t push_leaf(tlrt_tape &t, Buf value, const Shape &shape, bool requires_grad);

// Removes nodes recorded after construction unless commit() was called: a composite that fails
// half-way leaves the tape as it found it.
class Rollback {
 public:
  explicit Rollback(tlrt_tape &t) : t_(t), n_(t.nodes.size()) {}
  ~Rollback() {
    if (!done_)
      while (t_.nodes.size() > n_) t_.nodes.pop_back();
  }
  void commit() { done_ = true; }

 private:
  tlrt_tape &t_;
  size_t n_;
  bool done_ = false;
};

// Makes room for k more nodes without reallocating on every call (geometric growth), so that
// appending them cannot throw.
inline void ensure_room(tlrt_tape &t, size_t k) {
  if (t.nodes.capacity() - t.nodes.size() < k) {
    const size_t want = t.nodes.size() + k;
    t.nodes.reserve(want > 2 * t.nodes.capacity() ? want : 2 * t.nodes.capacity());
  }
}

// Checks that buffer b (a leaf, a seed, an attention mask) is usable on the tape: not released
// (TLRT_ERR_RELEASED), on the tape's device (TLRT_ERR_DEVICE_MISMATCH); returns its size.
uint64_t check_buffer(const tlrt_tape &t, const tlrt_buffer *b, const char *arg);

// Validates the tape pointer of an entry point.
tlrt_tape &tape_ref(tlrt_tape *t);
const tlrt_tape &tape_ref(const tlrt_tape *t);

}  // namespace tape
}  // namespace tlrt
