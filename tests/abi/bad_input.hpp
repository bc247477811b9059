// Shared by the bad-input tests (tests/abi/test_bad_input*.cpp): the exact-status checker, the
// out-parameter check, the CPU fixture buffers. Each test file is its own executable; this
// header defines its helpers in an anonymous namespace, once per executable.
#pragma once

#include <cctype>
#include <cfloat>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

tlrt_buffer *const kSentinel = reinterpret_cast<tlrt_buffer *>(uintptr_t{0x1});
constexpr uint64_t kTooMany = TLRT_MAX_ELEMENTS + 1;

// True when `word` occurs in `text` not followed by an identifier character, so that "argument a"
// does not match inside "argument abc" and "tlrt_min" does not match inside "tlrt_min_bwd".
bool has_word(const std::string &text, const std::string &word) {
  for (size_t pos = text.find(word); pos != std::string::npos; pos = text.find(word, pos + 1)) {
    const size_t end = pos + word.size();
    const bool left_ok = pos == 0 || !(std::isalnum((unsigned char)text[pos - 1]) || text[pos - 1] == '_');
    const bool right_ok = end == text.size() || !(std::isalnum((unsigned char)text[end]) || text[end] == '_');
    if (left_ok && right_ok) return true;
  }
  return false;
}

// Checks one failing call: exact status, and a last-error message naming the function and every
// listed argument ("argument NAME"). The message is copied before any other tlrt_* call.
void expect_fail(int line, const char *what, tlrt_status got, tlrt_status want, const char *fn,
                 std::initializer_list<const char *> args) {
  const std::string msg = tlrt_last_error();
  ++th::checks();
  char buf[1024];
  if (got != want) {
    std::snprintf(buf, sizeof buf, "%s returned %s, expected %s (last error: %s)", what,
                  tlrt_status_string(got), tlrt_status_string(want), msg.c_str());
    th::report(__FILE__, line, buf);
    return;
  }
  ++th::checks();
  if (!has_word(msg, fn)) {
    std::snprintf(buf, sizeof buf, "%s: last error \"%s\" does not name %s", what, msg.c_str(), fn);
    th::report(__FILE__, line, buf);
  }
  for (const char *a : args) {
    ++th::checks();
    const std::string word = std::string("argument ") + a;
    if (!has_word(msg, word)) {
      std::snprintf(buf, sizeof buf, "%s: last error \"%s\" does not name \"%s\"", what,
                    msg.c_str(), word.c_str());
      th::report(__FILE__, line, buf);
    }
  }
}

// An out-parameter a failing call must have cleared; if the call wrongly succeeded, the buffer
// is freed so that one defect does not also show up as a leak.
#define CLEARED(out)                                                   \
  do {                                                                 \
    TH_CHECK_MSG((out) == nullptr, "%s was not cleared to NULL", #out); \
    if ((out) != nullptr && (out) != kSentinel) tlrt_buffer_free(out); \
    (out) = nullptr;                                                   \
  } while (0)

#define BAD(call, want, fn, ...) expect_fail(__LINE__, #call, (call), (want), (fn), {__VA_ARGS__})

// The same, for a status code where the header leaves the precedence between two documented codes
// open (e.g. nbytes = UINT64_MAX is both "not a multiple of 4" and "too many elements").
[[maybe_unused]] void expect_either(int line, const char *what, tlrt_status got, tlrt_status w1, tlrt_status w2,
                   const char *fn) {
  const std::string msg = tlrt_last_error();
  ++th::checks();
  if ((got != w1 && got != w2) || !has_word(msg, fn)) {
    char buf[1024];
    std::snprintf(buf, sizeof buf, "%s returned %s, expected %s or %s naming %s (last error: %s)",
                  what, tlrt_status_string(got), tlrt_status_string(w1), tlrt_status_string(w2),
                  fn, msg.c_str());
    th::report(__FILE__, line, buf);
  }
}

// ---- fixtures --------------------------------------------------------------------------------

// Buffers shared by the checks below, all on the CPU.
struct Fixture {
  tlrt_buffer *a = nullptr;        // 4 elements
  tlrt_buffer *b = nullptr;        // 4 elements
  tlrt_buffer *g = nullptr;        // 4 elements
  tlrt_buffer *short3 = nullptr;   // 3 elements
  tlrt_buffer *empty = nullptr;    // 0 elements
  tlrt_buffer *released = nullptr; // 4 elements, storage released
};

Fixture make_fixture() {
  Fixture f;
  th::Rng rng(1);
  f.a = th::upload(rng.vec(4));
  f.b = th::upload(rng.vec(4));
  f.g = th::upload(rng.vec(4));
  f.short3 = th::upload(rng.vec(3));
  f.empty = th::upload({});
  f.released = th::upload(rng.vec(4));
  bool freed = false;
  TH_OK(tlrt_buffer_release_storage(f.released, &freed));
  TH_CHECK(freed);
  return f;
}

void free_fixture(Fixture &f) {
  for (tlrt_buffer *b : {f.a, f.b, f.g, f.short3, f.empty, f.released}) tlrt_buffer_free(b);
  f = Fixture{};
}

// Output of a successful op: size n, on the CPU, then freed.
void expect_result(const char *fn, tlrt_buffer *out, uint64_t n) {
  uint64_t size = 99;
  TH_CHECK_MSG(out != nullptr && out != kSentinel, "%s: no output", fn);
  if (out == nullptr || out == kSentinel) return;
  TH_CHECK_MSG(tlrt_buffer_size(out, &size) == TLRT_OK && size == n,
               "%s: output has %llu elements, expected %llu", fn, (unsigned long long)size,
               (unsigned long long)n);
  tlrt_buffer_free(out);
}

// Nothing leaks: every failing call freed what it allocated, and the test freed the rest.
void expect_no_leaks(const tlrt_allocator_stats &start) {
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK_MSG(end.live_bytes == start.live_bytes, "live_bytes %llu at start, %llu at end",
               (unsigned long long)start.live_bytes, (unsigned long long)end.live_bytes);
  TH_CHECK_MSG(end.live_handles == start.live_handles, "live_handles %llu at start, %llu at end",
               (unsigned long long)start.live_handles, (unsigned long long)end.live_handles);
  TH_CHECK(end.alloc_count - start.alloc_count == end.free_count - start.free_count);
}

}  // namespace
