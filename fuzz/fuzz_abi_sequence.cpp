// libFuzzer target: decodes the input into a sequence of ABI calls on the CPU backend over eight
// buffer slots (create from bytes / zeros / full, elementwise ops, release_storage, free, size,
// download, use after release) and checks the contract of every call: the status is one the
// header documents for it, out-parameters are NULL on failure, and a released buffer is reported
// as TLRT_ERR_RELEASED. Sanitizers (ASan/UBSan in the fuzz build, valgrind in the replay test)
// catch any out-of-bounds access. Built as a fuzzer with -Dfuzz=true (clang), and always as the
// replay driver fuzz_replay_abi_sequence, which runs the committed corpus (meson suite 'fuzz').
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "torchlean_rt.h"

namespace {

struct Input {
  const uint8_t *p;
  size_t n;
  uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  uint64_t small() { return byte() % 67; }  // element counts: 0..66 (spans the 4-wide tails)
};

[[noreturn]] void violated(const char *what, tlrt_status s) {
  std::fprintf(stderr, "contract violated: %s (status %s, last error: %s)\n", what,
               tlrt_status_string(s), tlrt_last_error());
  std::abort();
}

typedef tlrt_status (*Unary)(const tlrt_buffer *, tlrt_buffer **);
typedef tlrt_status (*Binary)(const tlrt_buffer *, const tlrt_buffer *, tlrt_buffer **);
const Unary kUnary[] = {tlrt_abs, tlrt_neg, tlrt_sqrt, tlrt_inv, tlrt_relu, tlrt_exp, tlrt_log,
                        tlrt_sigmoid, tlrt_tanh, tlrt_softplus, tlrt_gelu, tlrt_buffer_copy};
const Binary kBinary[] = {tlrt_add, tlrt_sub, tlrt_mul, tlrt_div, tlrt_max, tlrt_min,
                          tlrt_abs_bwd, tlrt_sqrt_bwd, tlrt_relu_bwd, tlrt_gelu_bwd,
                          tlrt_tanh_bwd, tlrt_sigmoid_bwd, tlrt_softplus_bwd, tlrt_exp_bwd};

struct Slots {
  tlrt_buffer *b[8] = {};
  bool released[8] = {};
  uint64_t size[8] = {};
  void put(int i, tlrt_buffer *x, uint64_t n) {
    tlrt_buffer_free(b[i]);
    b[i] = x;
    released[i] = false;
    size[i] = n;
  }
  ~Slots() {
    for (auto *x : b) tlrt_buffer_free(x);
  }
};

// The status a call on inputs i, j must return: arguments are checked in order (each for NULL,
// then for released storage), then their sizes.
tlrt_status expected_for(const Slots &s, int i, int j) {
  for (int k : {i, j}) {
    if (s.b[k] == nullptr) return TLRT_ERR_NULL_ARGUMENT;
    if (s.released[k]) return TLRT_ERR_RELEASED;
  }
  if (s.size[i] != s.size[j]) return TLRT_ERR_SHAPE;
  return TLRT_OK;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Input in{data, size};
  Slots s;
  for (int step = 0; step < 64 && in.n > 0; ++step) {
    const int op = in.byte() % 8, i = in.byte() % 8, j = in.byte() % 8;
    tlrt_buffer *out = reinterpret_cast<tlrt_buffer *>(0x1);
    tlrt_status st;
    switch (op) {
      case 0: {  // from_bytes: a length that may not be a multiple of 4
        const uint64_t nb = in.byte() % 41;
        std::vector<uint8_t> bytes(nb);
        for (auto &x : bytes) x = in.byte();
        st = tlrt_buffer_from_bytes(TLRT_DEVICE_CPU, bytes.data(), nb, &out);
        if ((nb % 4 == 0) != (st == TLRT_OK) || (st != TLRT_OK && (st != TLRT_ERR_SHAPE || out)))
          violated("from_bytes", st);
        if (st == TLRT_OK) s.put(i, out, nb / 4);
        break;
      }
      case 1: {  // zeros / full
        const uint64_t n = in.small();
        st = (in.byte() & 1) ? tlrt_buffer_zeros(TLRT_DEVICE_CPU, n, &out)
                             : tlrt_buffer_full(TLRT_DEVICE_CPU, n, (double)(int8_t)in.byte(), &out);
        if (st != TLRT_OK) violated("zeros/full", st);
        s.put(i, out, n);
        break;
      }
      case 2: {  // unary op
        st = kUnary[in.byte() % (sizeof kUnary / sizeof *kUnary)](s.b[i], &out);
        if (st != expected_for(s, i, i) || (st != TLRT_OK && out)) violated("unary op", st);
        if (st == TLRT_OK) s.put(j, out, s.size[i]);
        break;
      }
      case 3: {  // binary op
        st = kBinary[in.byte() % (sizeof kBinary / sizeof *kBinary)](s.b[i], s.b[j], &out);
        if (st != expected_for(s, i, j) || (st != TLRT_OK && out)) violated("binary op", st);
        if (st == TLRT_OK) s.put(i, out, s.size[j]);
        break;
      }
      case 4: {  // release_storage (idempotent)
        bool freed = false;
        st = tlrt_buffer_release_storage(s.b[i], &freed);
        if (s.b[i] == nullptr ? st != TLRT_ERR_NULL_ARGUMENT
                              : (st != TLRT_OK || freed == s.released[i]))
          violated("release_storage", st);
        if (s.b[i]) s.released[i] = true;
        break;
      }
      case 5:  // free
        s.put(i, nullptr, 0);
        break;
      case 6: {  // size
        uint64_t n = 77;
        st = tlrt_buffer_size(s.b[i], &n);
        if (st != expected_for(s, i, i) || (st == TLRT_OK ? n != s.size[i] : n != 0))
          violated("size", st);
        break;
      }
      default: {  // download with a possibly wrong count
        const uint64_t n = in.small();
        std::vector<float> host(n + 1);
        st = tlrt_buffer_to_f32(s.b[i], host.data(), n);
        tlrt_status want = expected_for(s, i, i);
        if (want == TLRT_OK && n != s.size[i]) want = TLRT_ERR_SHAPE;
        if (st != want) violated("to_f32", st);
        break;
      }
    }
  }
  return 0;
}

#ifdef TLRT_FUZZ_REPLAY
#include "replay_main.hpp"
#endif
