// The autograd tape: lifetime, leaves, reading nodes, and backward (abi/tlrt_tape.h). The
// recording calls are in tape_ops.cpp. Public headers only (see tape_internal.hpp).
#include <cstdio>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/tape/tape_internal.hpp"

namespace tlrt {
namespace tape {

using ull = unsigned long long;

void throw_op(tlrt_status s) {
  // Copy the message now: it is only valid until the next tlrt_* call on this thread.
  throw Error{s, std::string(tlrt_last_error())};
}

Buf share(const tlrt_buffer *b) {
  tlrt_buffer *m = const_cast<tlrt_buffer *>(b);  // retain only touches the reference count
  check(tlrt_buffer_retain(m));
  return Buf(m);
}

std::string Shape::str() const {
  std::string s = "(";
  for (uint32_t i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(d[i]);
  }
  return s + ")";
}

const Node &node_at(const tlrt_tape &t, uint64_t id, const char *arg) {
  if (id >= t.nodes.size())
    fail(TLRT_ERR_INDEX, "argument %s: node id %llu is not in the tape (it has %llu nodes)", arg,
         (ull)id, (ull)t.nodes.size());
  return t.nodes[id];
}

tlrt_tape &tape_ref(tlrt_tape *t) {
  if (t == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument tape is NULL");
  return *t;
}
const tlrt_tape &tape_ref(const tlrt_tape *t) {
  if (t == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument tape is NULL");
  return *t;
}

uint64_t push(tlrt_tape &t, Buf value, const Shape &shape, std::vector<uint64_t> parents,
              BackwardFn backward, std::vector<Buf> saved) {
  Node n;
  for (uint64_t p : parents) n.requires_grad = n.requires_grad || t.nodes[p].requires_grad;
  n.value = std::move(value);
  n.shape = shape;
  if (n.requires_grad) {
    n.parents = std::move(parents);
    n.backward = std::move(backward);
    n.saved = std::move(saved);
  }  // else: nothing will ever flow back through this node; drop the workspace now
  t.nodes.push_back(std::move(n));
  return t.nodes.size() - 1;
}

uint64_t push_leaf(tlrt_tape &t, Buf value, const Shape &shape, bool requires_grad) {
  Node n;
  n.value = std::move(value);
  n.shape = shape;
  n.leaf = true;
  n.requires_grad = requires_grad;
  t.nodes.push_back(std::move(n));
  return t.nodes.size() - 1;
}

uint64_t check_buffer(const tlrt_tape &t, const tlrt_buffer *b, const char *arg) {
  uint64_t size = 0;
  const tlrt_status s = tlrt_buffer_size(b, &size);
  if (s == TLRT_ERR_RELEASED) fail(TLRT_ERR_RELEASED, "argument %s: storage was released", arg);
  check(s);
  tlrt_device dev = 0;
  check(tlrt_buffer_device(b, &dev));
  if (dev != t.device)
    fail(TLRT_ERR_DEVICE_MISMATCH,
         "argument %s is on device (kind %u, ordinal %u), the tape on (kind %u, ordinal %u)", arg,
         TLRT_DEVICE_KIND(dev), TLRT_DEVICE_ORDINAL(dev), TLRT_DEVICE_KIND(t.device),
         TLRT_DEVICE_ORDINAL(t.device));
  return size;
}

namespace {

// The reverse sweep of abi/tlrt_tape.h: all or nothing, intermediate gradients freed as soon as
// they have been propagated.
void run_backward(tlrt_tape &t, uint64_t start, Buf seed) {
  if (!t.nodes[start].requires_grad) return;
  std::vector<Buf> pending(start + 1);
  pending[start] = std::move(seed);
  std::vector<Buf> contrib;
  for (uint64_t i = start + 1; i-- > 0;) {
    if (!pending[i]) continue;
    const Node &n = t.nodes[i];
    if (n.leaf) continue;  // kept in pending until the commit below
    contrib.clear();
    contrib.resize(n.parents.size());
    n.backward(t, n, pending[i].get(), contrib);
    pending[i].reset();  // propagated: release it now
    for (size_t j = 0; j < contrib.size(); ++j) {
      if (!contrib[j]) continue;
      const uint64_t p = n.parents[j];
      if (!t.nodes[p].requires_grad) continue;
      uint64_t size = 0;
      check(tlrt_buffer_size(contrib[j].get(), &size));
      if (size != t.nodes[p].shape.numel())
        fail(TLRT_ERR_INTERNAL, "backward rule of node %llu gave %llu elements for node %llu of "
             "shape %s", (ull)i, (ull)size, (ull)p, t.nodes[p].shape.str().c_str());
      if (!pending[p])
        pending[p] = std::move(contrib[j]);
      else
        pending[p] = TAPE_CALL(tlrt_add, pending[p].get(), contrib[j].get());
    }
  }
  // Commit: compute every new leaf gradient first, then swap them in (nothing can fail after).
  std::vector<std::pair<uint64_t, Buf>> updated;
  for (uint64_t i = 0; i <= start; ++i) {
    if (!pending[i]) continue;
    Node &n = t.nodes[i];
    if (n.grad)
      updated.emplace_back(i, TAPE_CALL(tlrt_add, n.grad.get(), pending[i].get()));
    else
      updated.emplace_back(i, std::move(pending[i]));
  }
  for (auto &u : updated) t.nodes[u.first].grad = std::move(u.second);
}

}  // namespace
}  // namespace tape
}  // namespace tlrt

using namespace tlrt;
using namespace tlrt::tape;

extern "C" {

TLRT_API tlrt_status tlrt_tape_new(tlrt_device device, tlrt_tape **out) {
  return guarded("tlrt_tape_new", [&] {
    clear_out(out, "out");
    // The allocator telemetry call validates the device with the codes we document
    // (malformed, backend unavailable, no device) without touching the device's stream.
    tlrt_allocator_stats st{};
    st.struct_size = sizeof st;
    check(tlrt_allocator_stats_get(device, &st));
    tlrt_tape *t = new tlrt_tape;
    t->device = device;
    *out = t;
  });
}

TLRT_API void tlrt_tape_free(tlrt_tape *tape) {
  delete tape;  // Node destructors free every buffer reference; nothing here can throw
}

TLRT_API tlrt_status tlrt_tape_reset(tlrt_tape *tape) {
  return guarded("tlrt_tape_reset", [&] {
    tlrt_tape &t = tape_ref(tape);
    t.nodes.clear();  // keeps the capacity: the next step records without reallocating
  });
}

TLRT_API tlrt_status tlrt_tape_node_count(const tlrt_tape *tape, uint64_t *count) {
  return guarded("tlrt_tape_node_count", [&] {
    clear_out_value(count, "count");
    *count = tape_ref(tape).nodes.size();
  });
}

TLRT_API tlrt_status tlrt_tape_device(const tlrt_tape *tape, tlrt_device *device) {
  return guarded("tlrt_tape_device", [&] {
    clear_out_value(device, "device");
    *device = tape_ref(tape).device;
  });
}

TLRT_API tlrt_status tlrt_tape_leaf(tlrt_tape *tape, tlrt_buffer *buffer, const uint64_t *dims,
                                    uint32_t rank, bool requires_grad, uint64_t *out) {
  return guarded("tlrt_tape_leaf", [&] {
    clear_out_value(out, "out");
    tlrt_tape &t = tape_ref(tape);
    if (buffer == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument buffer is NULL");
    if (rank > TLRT_TAPE_MAX_RANK)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument rank is %u, at most %u", rank, TLRT_TAPE_MAX_RANK);
    if (rank > 0 && dims == nullptr)
      fail(TLRT_ERR_NULL_ARGUMENT, "argument dims is NULL with rank %u", rank);
    const uint64_t size = check_buffer(t, buffer, "buffer");
    Shape s;
    s.rank = rank;
    uint64_t prod = 1;
    bool fits = true;
    for (uint32_t i = 0; i < rank; ++i) {
      s.d[i] = dims[i];
      if (__builtin_mul_overflow(prod, dims[i], &prod)) fits = false;
    }
    bool has_zero = false;
    for (uint32_t i = 0; i < rank; ++i) has_zero = has_zero || dims[i] == 0;
    if (has_zero) {
      prod = 0;
      fits = true;
    }
    if (!fits || prod != size)
      fail(TLRT_ERR_SHAPE, "argument buffer has %llu elements, argument dims %s has %s", (ull)size,
           s.str().c_str(), fits ? (std::to_string(prod) + " elements").c_str()
                                 : "a product beyond 64 bits");
    ensure_room(t, 1);  // so that push_leaf cannot throw after the retain
    Buf v = share(buffer);
    *out = push_leaf(t, std::move(v), s, requires_grad);
  });
}

TLRT_API tlrt_status tlrt_tape_value(const tlrt_tape *tape, uint64_t node, tlrt_buffer **out) {
  return guarded("tlrt_tape_value", [&] {
    clear_out(out, "out");
    const Node &n = node_at(tape_ref(tape), node, "node");
    *out = share(n.value.get()).release();
  });
}

TLRT_API tlrt_status tlrt_tape_grad(const tlrt_tape *tape, uint64_t node, tlrt_buffer **out) {
  return guarded("tlrt_tape_grad", [&] {
    clear_out(out, "out");
    const tlrt_tape &t = tape_ref(tape);
    const Node &n = node_at(t, node, "node");
    if (!n.leaf)
      fail(TLRT_ERR_INVALID_ARGUMENT,
           "node %llu is not a leaf (gradients of intermediate nodes are not kept)", (ull)node);
    if (!n.requires_grad)
      fail(TLRT_ERR_INVALID_ARGUMENT, "leaf %llu was recorded with requires_grad = false",
           (ull)node);
    if (n.grad)
      *out = share(n.grad.get()).release();
    else
      *out = TAPE_CALL(tlrt_buffer_zeros, t.device, n.shape.numel()).release();
  });
}

TLRT_API tlrt_status tlrt_tape_shape(const tlrt_tape *tape, uint64_t node, uint64_t *dims,
                                     uint32_t *rank, bool *requires_grad) {
  return guarded("tlrt_tape_shape", [&] {
    clear_out_value(rank, "rank");
    if (requires_grad) *requires_grad = false;
    const tlrt_tape &t = tape_ref(tape);
    if (dims == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument dims is NULL");
    const Node &n = node_at(t, node, "node");
    for (uint32_t i = 0; i < n.shape.rank; ++i) dims[i] = n.shape.d[i];
    if (requires_grad) *requires_grad = n.requires_grad;
    *rank = n.shape.rank;
  });
}

TLRT_API tlrt_status tlrt_tape_backward(tlrt_tape *tape, uint64_t node) {
  return guarded("tlrt_tape_backward", [&] {
    tlrt_tape &t = tape_ref(tape);
    const Node &n = node_at(t, node, "node");
    if (n.shape.numel() != 1)
      fail(TLRT_ERR_SHAPE,
           "node %llu has shape %s (%llu elements): backward without a seed needs one element",
           (ull)node, n.shape.str().c_str(), (ull)n.shape.numel());
    if (!n.requires_grad) return;
    run_backward(t, node, TAPE_CALL(tlrt_buffer_full, t.device, 1, 1.0));
  });
}

TLRT_API tlrt_status tlrt_tape_backward_seed(tlrt_tape *tape, uint64_t node,
                                             const tlrt_buffer *seed) {
  return guarded("tlrt_tape_backward_seed", [&] {
    tlrt_tape &t = tape_ref(tape);
    if (seed == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument seed is NULL");
    const Node &n = node_at(t, node, "node");
    const uint64_t size = check_buffer(t, seed, "seed");
    if (size != n.shape.numel())
      fail(TLRT_ERR_SHAPE, "argument seed has %llu elements, node %llu has shape %s (%llu)",
           (ull)size, (ull)node, n.shape.str().c_str(), (ull)n.shape.numel());
    if (!n.requires_grad) return;
    // A private copy: the seed may end up held as a leaf gradient, and the host may release the
    // storage of its own buffer at any time.
    run_backward(t, node, TAPE_CALL(tlrt_buffer_copy, seed));
  });
}

}  // extern "C"
