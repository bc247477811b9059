// The strict reader of safetensors headers and the writer's string escaping (see
// checkpoint_json.hpp for the accepted grammar and for why this is not a JSON library: the build
// must need nothing beyond a C++17 compiler, for `pip install .` and the Rust build-from-source).
#include "core/checkpoint_json.hpp"

#include <cstdio>
#include <cstring>
#include <set>

#include "abi/tlrt_runtime.h"
#include "core/error.hpp"

namespace tlrt {
namespace st {

namespace {

using ull = unsigned long long;

// Length of the UTF-8 sequence starting at s[0] (1 .. 4), 0 if it is not a valid one within n
// bytes: no stray continuation byte, no overlong form, no surrogate (U+D800 .. U+DFFF), nothing
// above U+10FFFF.
size_t utf8_sequence(const unsigned char *s, size_t n) {
  const unsigned c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;       // overlong below U+0800
    if (c == 0xED) hi = 0x9F;       // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;       // overlong below U+10000
    if (c == 0xF4) hi = 0x8F;       // above U+10FFFF
  } else {
    return 0;  // a continuation byte, C0 / C1 (overlong), or F5 .. FF
  }
  if (n < len) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; ++i)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  return len;
}

void append_utf8(std::string &out, uint32_t cp) {
  if (cp < 0x80) {
    out += (char)cp;
  } else if (cp < 0x800) {
    out += (char)(0xC0 | (cp >> 6));
    out += (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += (char)(0xE0 | (cp >> 12));
    out += (char)(0x80 | ((cp >> 6) & 0x3F));
    out += (char)(0x80 | (cp & 0x3F));
  } else {
    out += (char)(0xF0 | (cp >> 18));
    out += (char)(0x80 | ((cp >> 12) & 0x3F));
    out += (char)(0x80 | ((cp >> 6) & 0x3F));
    out += (char)(0x80 | (cp & 0x3F));
  }
}

// A cursor over the header with the reading primitives; every error names its byte offset.
class Reader {
 public:
  Reader(const char *text, size_t n) : p_(reinterpret_cast<const unsigned char *>(text)), n_(n) {}

  [[noreturn]] void error(size_t at, const char *what) const {
    fail(TLRT_ERR_FORMAT, "header byte %llu: %s", (ull)at, what);
  }
  [[noreturn]] void error(const char *what) const { error(i_, what); }

  size_t pos() const { return i_; }
  bool at_end() const { return i_ >= n_; }
  int peek() const { return i_ < n_ ? p_[i_] : -1; }

  void skip_ws() {
    while (i_ < n_ && (p_[i_] == ' ' || p_[i_] == '\t' || p_[i_] == '\n' || p_[i_] == '\r')) ++i_;
  }

  void expect(char c, const char *what) {
    skip_ws();
    if (peek() != (unsigned char)c) error(what);
    ++i_;
  }

  // After an element of an object or array: true for ',' (another follows), false for the
  // closing bracket.
  bool more(char close, const char *what) {
    skip_ws();
    const int c = peek();
    if (c == ',') {
      ++i_;
      return true;
    }
    if (c == (unsigned char)close) {
      ++i_;
      return false;
    }
    error(what);
  }

  std::string string(const char *what) {
    skip_ws();
    if (peek() != '"') error(what);
    ++i_;
    std::string out;
    for (;;) {
      if (i_ >= n_) error("a string is not closed before the end of the header");
      const unsigned char c = p_[i_];
      if (c == '"') {
        ++i_;
        return out;
      }
      if (c < 0x20) error("a control character (below 0x20) in a string: it must be escaped");
      if (c == '\\') {
        escape(out);
        continue;
      }
      const size_t len = utf8_sequence(p_ + i_, n_ - i_);
      if (len == 0) error("a string that is not valid UTF-8");
      out.append(reinterpret_cast<const char *>(p_ + i_), len);
      i_ += len;
    }
  }

  uint64_t integer(const char *what) {
    skip_ws();
    const size_t start = i_;
    const int first = peek();
    if (first == '-') error("a negative number; sizes and offsets are integers >= 0");
    if (first < '0' || first > '9') error(what);
    uint64_t v = 0;
    while (i_ < n_ && p_[i_] >= '0' && p_[i_] <= '9') {
      const uint64_t d = p_[i_] - '0';
      if (v > (UINT64_MAX - d) / 10) error(start, "an integer above 2^64 - 1");
      v = v * 10 + d;
      ++i_;
    }
    if (first == '0' && i_ - start > 1) error(start, "an integer with a leading zero");
    const int next = peek();
    if (next == '.' || next == 'e' || next == 'E')
      error(start, "a number with a fraction or an exponent; sizes and offsets are integers");
    return v;
  }

 private:
  unsigned hex4() {
    if (n_ - i_ < 4) error("\\u is not followed by four hex digits");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const unsigned char c = p_[i_ + k];
      unsigned d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else error("\\u is not followed by four hex digits");
      v = v << 4 | d;
    }
    i_ += 4;
    return v;
  }

  // At a backslash inside a string: appends what the escape stands for.
  void escape(std::string &out) {
    const size_t at = i_;
    ++i_;
    if (i_ >= n_) error(at, "a string ends in a backslash");
    const unsigned char c = p_[i_++];
    switch (c) {
      case '"': out += '"'; return;
      case '\\': out += '\\'; return;
      case '/': out += '/'; return;
      case 'b': out += '\b'; return;
      case 'f': out += '\f'; return;
      case 'n': out += '\n'; return;
      case 'r': out += '\r'; return;
      case 't': out += '\t'; return;
      case 'u': break;
      default: error(at, "an unknown escape sequence in a string");
    }
    uint32_t cp = hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) error(at, "a lone low surrogate (\\uDC00 .. \\uDFFF)");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (n_ - i_ < 2 || p_[i_] != '\\' || p_[i_ + 1] != 'u')
        error(at, "a high surrogate (\\uD800 .. \\uDBFF) not followed by a low one");
      i_ += 2;
      const uint32_t low = hex4();
      if (low < 0xDC00 || low > 0xDFFF)
        error(at, "a high surrogate (\\uD800 .. \\uDBFF) not followed by a low one");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    if (cp == 0) error(at, "\\u0000 in a string: a C string cannot hold U+0000");
    append_utf8(out, cp);
  }

  const unsigned char *p_;
  size_t n_;
  size_t i_ = 0;
};

void parse_metadata(Reader &r, Header &h) {
  r.expect('{', "\"__metadata__\" must be an object of strings");
  r.skip_ws();
  if (r.peek() == '}') {
    r.expect('}', "");
    return;
  }
  std::set<std::string> keys;
  do {
    const size_t at = r.pos();
    std::string key = r.string("a metadata key (a string) is expected");
    if (!keys.insert(key).second) r.error(at, "a metadata key appears twice");
    r.expect(':', "':' is expected after a metadata key");
    std::string value = r.string("metadata values must be strings");
    h.metadata.emplace_back(std::move(key), std::move(value));
  } while (r.more('}', "',' or '}' is expected after a metadata entry"));
}

void parse_uints(Reader &r, std::vector<uint64_t> &out, size_t max, const char *field) {
  char what[96];
  std::snprintf(what, sizeof what, "\"%s\" must be an array of integers", field);
  r.expect('[', what);
  r.skip_ws();
  if (r.peek() == ']') {
    r.expect(']', "");
    return;
  }
  do {
    if (out.size() == max) {
      std::snprintf(what, sizeof what, "\"%s\" has more than %llu entries", field, (ull)max);
      r.error(what);
    }
    out.push_back(r.integer(what));
  } while (r.more(']', "',' or ']' is expected in an array of integers"));
}

void parse_tensor(Reader &r, HeaderTensor &t, uint32_t max_rank) {
  r.expect('{', "a tensor entry must be an object {\"dtype\", \"shape\", \"data_offsets\"}");
  bool dtype = false, shape = false, offsets = false;
  r.skip_ws();
  if (r.peek() != '}') {
    do {
      const size_t at = r.pos();
      const std::string field = r.string("a field name (a string) is expected");
      r.expect(':', "':' is expected after a field name");
      if (field == "dtype") {
        if (dtype) r.error(at, "\"dtype\" appears twice");
        dtype = true;
        t.dtype = r.string("\"dtype\" must be a string");
      } else if (field == "shape") {
        if (shape) r.error(at, "\"shape\" appears twice");
        shape = true;
        parse_uints(r, t.shape, max_rank, "shape");
      } else if (field == "data_offsets") {
        if (offsets) r.error(at, "\"data_offsets\" appears twice");
        offsets = true;
        std::vector<uint64_t> v;
        const size_t vat = r.pos();
        parse_uints(r, v, 2, "data_offsets");
        if (v.size() != 2) r.error(vat, "\"data_offsets\" must hold exactly two integers");
        t.begin = v[0];
        t.end = v[1];
      } else {
        r.error(at, "a tensor entry has a field other than \"dtype\", \"shape\" and "
                    "\"data_offsets\"");
      }
    } while (r.more('}', "',' or '}' is expected after a field of a tensor entry"));
  } else {
    r.expect('}', "");
  }
  if (!dtype || !shape || !offsets)
    r.error(t.at, !dtype ? "a tensor entry without \"dtype\""
                  : !shape ? "a tensor entry without \"shape\""
                           : "a tensor entry without \"data_offsets\"");
}

}  // namespace

bool valid_utf8(const char *s, size_t n) {
  const unsigned char *p = reinterpret_cast<const unsigned char *>(s);
  for (size_t i = 0; i < n;) {
    const size_t len = utf8_sequence(p + i, n - i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

Header parse_header(const char *text, size_t n, uint32_t max_rank) {
  Reader r(text, n);
  Header h;
  if (r.peek() != '{') r.error("the header does not start with '{'");
  r.expect('{', "");
  r.skip_ws();
  if (r.peek() == '}') {
    r.expect('}', "");
  } else {
    std::set<std::string> names;
    bool metadata = false;
    do {
      const size_t at = r.pos();
      std::string key = r.string("a tensor name (a string) is expected");
      r.expect(':', "':' is expected after a name");
      if (key == "__metadata__") {
        if (metadata) r.error(at, "\"__metadata__\" appears twice");
        metadata = true;
        parse_metadata(r, h);
        continue;
      }
      if (!names.insert(key).second) r.error(at, "a tensor name appears twice");
      HeaderTensor t;
      t.name = std::move(key);
      t.at = at;
      parse_tensor(r, t, max_rank);
      h.tensors.push_back(std::move(t));
    } while (r.more('}', "',' or '}' is expected after an entry of the header"));
  }
  r.skip_ws();
  if (!r.at_end()) r.error("something other than whitespace after the header's object");
  return h;
}

void append_json_string(std::string &out, const std::string &s) {
  static const char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char ch : s) {
    const unsigned char c = (unsigned char)ch;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

}  // namespace st
}  // namespace tlrt
