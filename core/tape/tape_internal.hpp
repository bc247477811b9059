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
#include "abi/tlrt_rng.h"
#include "abi/tlrt_runtime.h"
#include "abi/tlrt_scan.h"
#include "abi/tlrt_softmax.h"
#include "abi/tlrt_tape.h"
#include "core/error.hpp"
#include "core/handle_table.hpp"

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
struct Tape;

// A backward rule: given the node and its upstream gradient g, fills out[i] with the contribution
// to parent i (left empty where that parent does not require a gradient).
using BackwardFn =
    std::function<void(const Tape &t, const Node &self, const tlrt_buffer *g,
                       std::vector<Buf> &out)>;

// The values a backward rule reads besides its upstream gradient, declared by the recording call
// (exactly those its rule passes to tlrt_* calls, given which parents require a gradient): bit i
// for parent i's value, kReadsSelf for the node's own value. Workspace the forward produced
// (layer-norm statistics, lse) is the node's `saved`; host index lists and index buffers live in
// the rule's closure.
using Reads = uint32_t;
constexpr Reads kReadsNothing = 0;
constexpr Reads kReadsSelf = 1u << 31;
constexpr Reads reads_parent(size_t i) { return (Reads)1 << i; }

// A node (abi/tlrt_tape.h's MEMORY paragraph). `value` is the host's view of the node, dropped by
// tlrt_tape_release; what the rule reads is held apart, as references of its own (`inputs`,
// `output`, `saved`, the closure), so a buffer lives exactly as long as the host may still read
// it or a rule that has not run yet may still read it: the reference counts of the buffers do
// the bookkeeping. A freeing backward drops a rule's references right after running it.
struct Node {
  Buf value;  // empty once released
  Shape shape;
  bool leaf = false;
  bool requires_grad = false;
  bool released = false;  // tlrt_tape_release was called (or an internal node of a composite)
  bool freed = false;     // a freeing backward ran the rule and dropped what it reads
  std::vector<uint64_t> parents;
  BackwardFn backward;     // empty for leaves and nodes that do not require a gradient
  std::vector<Buf> inputs; // inputs[i]: parent i's value where the rule reads it, else empty
  Buf output;              // the node's own value where the rule reads it
  std::vector<Buf> saved;  // forward workspace kept for backward
  Buf grad;                // accumulated gradient (leaves only)
};

// The object behind a tlrt_tape handle (a token of the tape table, core/handle_table.hpp).
// A node id is (tag << 48) | (generation << 32) | index: tag names the tape (nonzero, drawn from
// a process-wide counter at tlrt_tape_new), generation counts its resets, index is the node's
// position in `nodes`. Parents inside nodes are plain indices.
struct Tape {
  tlrt_device device = TLRT_DEVICE_CPU;
  std::vector<Node> nodes;
  uint16_t tag = 0;
  uint16_t generation = 0;
  uint64_t id_of(uint64_t index) const noexcept {
    return (uint64_t)tag << 48 | (uint64_t)generation << 32 | index;
  }
};

// Nodes of one tape: ids hold a 32-bit index.
constexpr uint64_t kMaxNodes = 0xFFFFFFFFull;

// The index of node `id`: TLRT_ERR_STALE_HANDLE for an id of another tape or from before a reset,
// TLRT_ERR_INDEX for an index not below the node count (naming argument `arg`).
uint64_t index_of(const Tape &t, uint64_t id, const char *arg);
// The node with id `id` (as index_of).
const Node &node_at(const Tape &t, uint64_t id, const char *arg);

// Does parent i of `self` require a gradient?
inline bool need(const Tape &t, const Node &self, size_t i) {
  return t.nodes[self.parents[i]].requires_grad;
}
// The value of parent i as the rule of `self` saved it (TLRT_ERR_INTERNAL when the recording call
// did not declare the read: the declarations must match the rules exactly).
const tlrt_buffer *parent_value(const Tape &t, const Node &self, size_t i);
// The node's own value as its rule saved it (TLRT_ERR_INTERNAL when not declared).
const tlrt_buffer *own_value(const Node &self);

// Appends a node computed from `parents` and returns its id. requires_grad is the OR of the
// parents'; when it is true the node keeps references to the values `reads` names, the rule and
// the workspace; when it is false all three are dropped at once (the rule never runs).
uint64_t push(Tape &t, Buf value, const Shape &shape, std::vector<uint64_t> parents, Reads reads,
              BackwardFn backward, std::vector<Buf> saved = {});
// Appends a leaf (value already validated against the shape).
uint64_t push_leaf(Tape &t, Buf value, const Shape &shape, bool requires_grad);

// Drops the host's view of node `index` (tlrt_tape_release's effect): its value buffer goes once
// no rule still holds a reference to it.
void release_node(Tape &t, uint64_t index);

// Removes nodes recorded after construction unless commit() was called: a composite that fails
// half-way leaves the tape as it found it.
class Rollback {
 public:
  explicit Rollback(Tape &t) : t_(t), n_(t.nodes.size()) {}
  ~Rollback() {
    if (!done_)
      while (t_.nodes.size() > n_) t_.nodes.pop_back();
  }
  void commit() { done_ = true; }

 private:
  Tape &t_;
  size_t n_;
  bool done_ = false;
};

// Makes room for k more nodes without reallocating on every call (geometric growth), so that
// appending them cannot throw.
inline void ensure_room(Tape &t, size_t k) {
  if (t.nodes.size() + k > kMaxNodes)
    fail(TLRT_ERR_OVERFLOW, "the tape holds %llu nodes, the most one tape can hold is 2^32 - 1",
         (unsigned long long)t.nodes.size());
  if (t.nodes.capacity() - t.nodes.size() < k) {
    const size_t want = t.nodes.size() + k;
    t.nodes.reserve(want > 2 * t.nodes.capacity() ? want : 2 * t.nodes.capacity());
  }
}

// Checks that buffer b (a leaf, a seed, an attention mask) is usable on the tape: not released
// (TLRT_ERR_RELEASED), on the tape's device (TLRT_ERR_DEVICE_MISMATCH); returns its size.
uint64_t check_buffer(const Tape &t, const tlrt_buffer *b, const char *arg);

// Validates the tape pointer of an entry point.
Tape &tape_ref(tlrt_tape *t);
const Tape &tape_ref(const tlrt_tape *t);

}  // namespace tape
}  // namespace tlrt
