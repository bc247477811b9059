// The JSON of a safetensors header (abi/tlrt_checkpoint.h): a strict reader of exactly the
// structure the format defines, and the writer's string escaping.
//
// Why our own parser rather than a JSON library (nlohmann-json, RapidJSON, ...): the library must
// build with nothing but a C++17 compiler and meson, because `pip install .` (meson-python) and the
// Rust crate's build-from-source feature build it on machines where no -dev package can be
// assumed, and vendoring a general parser would add far more code than the schema needs. The
// header's grammar is small and fixed, so the parser is schema-directed: it reads one object of
// names -> {dtype, shape, data_offsets} plus "__metadata__" -> {string: string}, and nothing
// else. Its nesting is therefore bounded by construction (object / object / array, depth 3): no
// recursion, no depth counter to get wrong, no input that can exhaust the stack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tlrt {
namespace st {

// One tensor entry as the header states it (nothing cross-checked yet).
struct HeaderTensor {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;  // data_offsets
  size_t at = 0;                // byte offset of its name in the header (for messages)
};

struct Header {
  std::vector<HeaderTensor> tensors;                             // in the order of the file
  std::vector<std::pair<std::string, std::string>> metadata;    // in the order of the file
};

// Parses the header text (n bytes, not NUL-terminated). Accepts, and only accepts: '{' as the
// first byte; a JSON object whose keys are unique; under "__metadata__" an object of unique string
// keys to string values; under every other key an object with exactly the fields "dtype" (a
// string), "shape" (an array of at most max_rank integers) and "data_offsets" (an array of two
// integers), each once, in any order; JSON whitespace between tokens and after the object, and
// nothing else. Strings: valid UTF-8 (no overlong forms, surrogates or code points above
// U+10FFFF), no raw control characters, escapes \" \\ \/ \b \f \n \r \t \uXXXX (a surrogate pair
// for code points above U+FFFF; a lone surrogate is refused), never U+0000. Integers: decimal
// digits without a sign, fraction, exponent or leading zero, at most 2^64 - 1.
// Throws tlrt::Error{TLRT_ERR_FORMAT, "header byte K: what"} (K counted from the header's first
// byte, which is byte 8 of the file).
Header parse_header(const char *text, size_t n, uint32_t max_rank);

// Whether s[0 .. n) is valid UTF-8 (the checks of parse_header's strings).
bool valid_utf8(const char *s, size_t n);

// Appends s as a JSON string literal, escaped as the reference writer (serde_json) escapes it:
// '"' and '\\' and the control characters below 0x20 (as \b \f \n \r \t, the others as \u00xx in
// lowercase hex); every other byte as it is.
void append_json_string(std::string &out, const std::string &s);

}  // namespace st
}  // namespace tlrt
