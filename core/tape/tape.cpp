// The autograd tape: lifetime, leaves, reading nodes, and backward (abi/tlrt_tape.h). The
// recording calls are in tape_ops.cpp. Public headers only (see tape_internal.hpp).
#include <atomic>
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

uint64_t index_of(const Tape &t, uint64_t id, const char *arg) {
  const uint64_t index = id & 0xFFFFFFFFull;
  if (id >> 32 != t.id_of(0) >> 32) {
    const unsigned tag = (unsigned)(id >> 48), generation = (unsigned)(id >> 32) & 0xFFFFu;
    if (tag != t.tag)
      fail(TLRT_ERR_STALE_HANDLE, "argument %s: node id %#llx belongs to another tape (or is no "
           "node id)", arg, (ull)id);
    fail(TLRT_ERR_STALE_HANDLE, "argument %s: node id %#llx was recorded before a tlrt_tape_reset "
         "(generation %u, the tape is at %u)", arg, (ull)id, generation, (unsigned)t.generation);
  }
  if (index >= t.nodes.size())
    fail(TLRT_ERR_INDEX, "argument %s: node id %#llx (index %llu) is not in the tape (it has "
         "%llu nodes)", arg, (ull)id, (ull)index, (ull)t.nodes.size());
  return index;
}

const Node &node_at(const Tape &t, uint64_t id, const char *arg) {
  return t.nodes[index_of(t, id, arg)];
}

namespace {

using TapeTable = HandleTable<Tape>;

// Allocated once and never destroyed: a host may free tapes from static destructors.
TapeTable &tape_table() {
  static TapeTable *table = new TapeTable;
  return *table;
}

uint64_t token_of(const tlrt_tape *t) { return reinterpret_cast<uintptr_t>(t); }

}  // namespace

Tape &tape_ref(tlrt_tape *t) {
  if (t == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument tape is NULL");
  TapeTable::Slot *slot = tape_table().find(token_of(t));
  if (slot == nullptr)
    fail(TLRT_ERR_STALE_HANDLE, "argument tape is not a live tlrt_tape (freed, or never one)");
  return slot->object;
}
const Tape &tape_ref(const tlrt_tape *t) { return tape_ref(const_cast<tlrt_tape *>(t)); }

const tlrt_buffer *parent_value(const Tape &, const Node &self, size_t i) {
  if (i >= self.inputs.size() || !self.inputs[i])
    fail(TLRT_ERR_INTERNAL, "a backward rule reads the value of its parent %llu (node %llu), "
         "which its recording call did not declare", (ull)i,
         (ull)(i < self.parents.size() ? self.parents[i] : 0));
  return self.inputs[i].get();
}

const tlrt_buffer *own_value(const Node &self) {
  if (!self.output)
    fail(TLRT_ERR_INTERNAL, "a backward rule reads its node's own value, which its recording call "
         "did not declare");
  return self.output.get();
}

uint64_t push(Tape &t, Buf value, const Shape &shape, std::vector<uint64_t> parent_ids,
              Reads reads, BackwardFn backward, std::vector<Buf> saved) {
  Node n;
  std::vector<uint64_t> parents(parent_ids.size());
  for (size_t i = 0; i < parents.size(); ++i) {
    parents[i] = index_of(t, parent_ids[i], "parent");  // validated by the caller already
    n.requires_grad = n.requires_grad || t.nodes[parents[i]].requires_grad;
  }
  if (n.requires_grad) {
    // The references the rule reads through (abi/tlrt_tape.h, MEMORY).
    n.inputs.resize(parents.size());
    for (size_t i = 0; i < parents.size(); ++i) {
      if (!(reads & reads_parent(i))) continue;
      const Node &p = t.nodes[parents[i]];
      if (!p.value)  // the recording calls refuse released nodes before they get here
        fail(TLRT_ERR_INTERNAL, "node %llu read by a new node's rule holds no value",
             (ull)parents[i]);
      n.inputs[i] = share(p.value.get());
    }
    if (reads & kReadsSelf) n.output = share(value.get());
    n.parents = std::move(parents);
    n.backward = std::move(backward);
    n.saved = std::move(saved);
  }  // else: nothing will ever flow back through this node; keep no reference for it
  n.value = std::move(value);
  n.shape = shape;
  t.nodes.push_back(std::move(n));
  return t.id_of(t.nodes.size() - 1);
}

void release_node(Tape &t, uint64_t index) {
  Node &n = t.nodes[index];
  n.released = true;
  n.value.reset();
}

uint64_t push_leaf(Tape &t, Buf value, const Shape &shape, bool requires_grad) {
  Node n;
  n.value = std::move(value);
  n.shape = shape;
  n.leaf = true;
  n.requires_grad = requires_grad;
  t.nodes.push_back(std::move(n));
  return t.id_of(t.nodes.size() - 1);
}

uint64_t check_buffer(const Tape &t, const tlrt_buffer *b, const char *arg) {
  uint64_t size = 0;
  const tlrt_status s = tlrt_buffer_size(b, &size);
  if (s == TLRT_ERR_RELEASED) fail(TLRT_ERR_RELEASED, "argument %s: storage was released", arg);
  check(s);
  tlrt_dtype type = TLRT_DTYPE_F32;
  check(tlrt_buffer_dtype(b, &type));
  if (type != TLRT_DTYPE_F32)
    fail(TLRT_ERR_DTYPE, "argument %s holds integer values; tape nodes hold float32 values", arg);
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

// Drops what the rule of a node reads (a freeing backward, after running it): the buffers go
// once no other reference (the host's value, another rule's) holds them.
void free_rule(Node &n) {
  n.inputs.clear();
  n.inputs.shrink_to_fit();
  n.output.reset();
  n.saved.clear();
  n.saved.shrink_to_fit();
  n.backward = nullptr;
  n.freed = true;
}

// The reverse sweep of abi/tlrt_tape.h: all or nothing for the leaf gradients, intermediate
// gradients freed as soon as they have been propagated; with free_graph, each rule's references
// dropped as soon as it has run.
void run_backward(Tape &t, uint64_t start, Buf seed, bool free_graph) {
  if (!t.nodes[start].requires_grad) return;
  // Every rule the sweep can reach must still hold what it reads; checked before any runs, so
  // that a backward over a freed graph changes nothing.
  {
    std::vector<bool> reach(start + 1);
    reach[start] = true;
    for (uint64_t i = start + 1; i-- > 0;) {
      if (!reach[i]) continue;
      const Node &n = t.nodes[i];
      if (n.leaf) continue;
      if (n.freed)
        fail(TLRT_ERR_RELEASED, "node %#llx (index %llu) is on the backward path, and a backward "
             "with TLRT_TAPE_BACKWARD_FREE has already run its rule and freed the values it "
             "reads (record the graph again, or pass no flag to keep it)",
             (ull)t.id_of(i), (ull)i);
      for (uint64_t p : n.parents)
        if (t.nodes[p].requires_grad) reach[p] = true;
    }
  }
  std::vector<Buf> pending(start + 1);
  pending[start] = std::move(seed);
  std::vector<Buf> contrib;
  for (uint64_t i = start + 1; i-- > 0;) {
    if (!pending[i]) continue;
    Node &n = t.nodes[i];
    if (n.leaf) continue;  // kept in pending until the commit below
    contrib.clear();
    contrib.resize(n.parents.size());
    n.backward(t, n, pending[i].get(), contrib);
    pending[i].reset();  // propagated: release it now
    if (free_graph) free_rule(n);
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
      contrib[j].reset();
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
    TapeTable::Slot *slot = nullptr;
    const uint64_t token = tape_table().create(&slot);
    if (token == 0) fail(TLRT_ERR_OUT_OF_MEMORY, "out of host memory allocating a tape handle");
    static std::atomic<uint32_t> tags{0};
    Tape &t = slot->object;
    t.device = device;
    t.tag = (uint16_t)(tags.fetch_add(1, std::memory_order_relaxed) % 0xFFFEu + 1);  // 1..0xFFFE
    t.generation = 0;
    *out = reinterpret_cast<tlrt_tape *>(static_cast<uintptr_t>(token));
  });
}

// Frees a live tape's nodes (Node destructors drop every buffer reference; nothing can throw)
// and its slot.
static void destroy(TapeTable::Slot *slot, uint64_t token) noexcept {
  std::vector<Node>().swap(slot->object.nodes);
  tape_table().destroy(token);
}

TLRT_API void tlrt_tape_free(tlrt_tape *tape) {
  if (tape == nullptr) return;
  if (TapeTable::Slot *slot = tape_table().find(token_of(tape))) destroy(slot, token_of(tape));
}

TLRT_API tlrt_status tlrt_tape_free_checked(tlrt_tape *tape) {
  return guarded("tlrt_tape_free_checked", [&] {
    if (tape == nullptr) return;
    tape_ref(tape);
    destroy(tape_table().find(token_of(tape)), token_of(tape));
  });
}

TLRT_API tlrt_status tlrt_tape_reset(tlrt_tape *tape) {
  return guarded("tlrt_tape_reset", [&] {
    Tape &t = tape_ref(tape);
    t.nodes.clear();  // keeps the capacity: the next step records without reallocating
    ++t.generation;   // ids recorded before now are stale
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
    Tape &t = tape_ref(tape);
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
    if (n.released)
      fail(TLRT_ERR_RELEASED, "argument node: node id %#llx (index %llu) was released "
           "(tlrt_tape_release, or an inner node of a composite): its value is no longer held "
           "for the host", (ull)node, (ull)(node & 0xFFFFFFFFull));
    *out = share(n.value.get()).release();
  });
}

TLRT_API tlrt_status tlrt_tape_release(tlrt_tape *tape, uint64_t node) {
  return guarded("tlrt_tape_release", [&] {
    Tape &t = tape_ref(tape);
    const uint64_t index = index_of(t, node, "node");
    if (t.nodes[index].released)
      fail(TLRT_ERR_RELEASED, "argument node: node id %#llx (index %llu) was released "
           "already%s", (ull)node, (ull)index,
           t.nodes[index].leaf ? "" : " (or is an inner node of a composite)");
    release_node(t, index);
  });
}

TLRT_API tlrt_status tlrt_tape_grad(const tlrt_tape *tape, uint64_t node, tlrt_buffer **out) {
  return guarded("tlrt_tape_grad", [&] {
    clear_out(out, "out");
    const Tape &t = tape_ref(tape);
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
    const Tape &t = tape_ref(tape);
    if (dims == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument dims is NULL");
    const Node &n = node_at(t, node, "node");
    for (uint32_t i = 0; i < n.shape.rank; ++i) dims[i] = n.shape.d[i];
    if (requires_grad) *requires_grad = n.requires_grad;
    *rank = n.shape.rank;
  });
}

TLRT_API tlrt_status tlrt_tape_backward(tlrt_tape *tape, uint64_t node) {
  return guarded("tlrt_tape_backward", [&] {
    Tape &t = tape_ref(tape);
    const Node &n = node_at(t, node, "node");
    if (n.shape.numel() != 1)
      fail(TLRT_ERR_SHAPE,
           "node %llu has shape %s (%llu elements): backward without a seed needs one element",
           (ull)node, n.shape.str().c_str(), (ull)n.shape.numel());
    if (!n.requires_grad) return;
    run_backward(t, index_of(t, node, "node"), TAPE_CALL(tlrt_buffer_full, t.device, 1, 1.0),
                 false);
  });
}

TLRT_API tlrt_status tlrt_tape_backward_seed(tlrt_tape *tape, uint64_t node,
                                             const tlrt_buffer *seed) {
  return guarded("tlrt_tape_backward_seed", [&] {
    Tape &t = tape_ref(tape);
    if (seed == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument seed is NULL");
    const Node &n = node_at(t, node, "node");
    const uint64_t size = check_buffer(t, seed, "seed");
    if (size != n.shape.numel())
      fail(TLRT_ERR_SHAPE, "argument seed has %llu elements, node %llu has shape %s (%llu)",
           (ull)size, (ull)node, n.shape.str().c_str(), (ull)n.shape.numel());
    if (!n.requires_grad) return;
    // A private copy: the seed may end up held as a leaf gradient, and the host may release the
    // storage of its own buffer at any time.
    run_backward(t, index_of(t, node, "node"), TAPE_CALL(tlrt_buffer_copy, seed), false);
  });
}

TLRT_API tlrt_status tlrt_tape_backward_ex(tlrt_tape *tape, uint64_t node,
                                           const tlrt_buffer *seed, uint32_t flags) {
  return guarded("tlrt_tape_backward_ex", [&] {
    Tape &t = tape_ref(tape);
    if (flags & ~TLRT_TAPE_BACKWARD_FREE)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument flags = %#x has bits that name no flag (known: "
           "TLRT_TAPE_BACKWARD_FREE = %#x)", flags, TLRT_TAPE_BACKWARD_FREE);
    const Node &n = node_at(t, node, "node");
    if (seed == nullptr) {
      if (n.shape.numel() != 1)
        fail(TLRT_ERR_SHAPE, "node %llu has shape %s (%llu elements): backward without a seed "
             "needs one element", (ull)node, n.shape.str().c_str(), (ull)n.shape.numel());
    } else {
      const uint64_t size = check_buffer(t, seed, "seed");
      if (size != n.shape.numel())
        fail(TLRT_ERR_SHAPE, "argument seed has %llu elements, node %llu has shape %s (%llu)",
             (ull)size, (ull)node, n.shape.str().c_str(), (ull)n.shape.numel());
    }
    if (!n.requires_grad) return;
    Buf s = seed == nullptr ? TAPE_CALL(tlrt_buffer_full, t.device, 1, 1.0)
                            : TAPE_CALL(tlrt_buffer_copy, seed);  // private, as backward_seed
    run_backward(t, index_of(t, node, "node"), std::move(s),
                 (flags & TLRT_TAPE_BACKWARD_FREE) != 0);
  });
}

}  // extern "C"
