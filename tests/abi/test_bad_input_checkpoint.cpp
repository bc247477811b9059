// Checkpoints (abi/tlrt_checkpoint.h): every entry point given NULL, stale, released, mismatched
// and malformed arguments returns its documented status with its out-parameters cleared and a
// message naming the function and the argument; and tlrt_safetensors_open refuses every kind of
// broken file (truncated, a header length past the end or above the limit, malformed JSON, wrong
// structure, overlapping offsets, gaps, trailing bytes, unknown dtypes, shapes that do not match
// their byte ranges) with TLRT_ERR_FORMAT, leaving nothing open and nothing leaked. A save that
// is refused creates no file.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bad_input.hpp"

namespace {

using th::Buf;

std::string g_dir;

std::string path_of(const std::string &name) { return g_dir + "/" + name; }

void write_file(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), (std::streamsize)bytes.size());
}

// The 8-byte little-endian length, then the header as given (no padding added), then the data.
std::string raw_file(const std::string &header, const std::string &data, uint64_t length) {
  std::string out(8, '\0');
  for (int k = 0; k < 8; ++k) out[k] = (char)(length >> (8 * k));
  return out + header + data;
}
std::string raw_file(const std::string &header, const std::string &data) {
  return raw_file(header, data, header.size());
}

size_t files_in_dir() {
  size_t n = 0;
  DIR *d = ::opendir(g_dir.c_str());
  while (dirent *e = d ? ::readdir(d) : nullptr)
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) ++n;
  if (d) ::closedir(d);
  return n;
}

tlrt_safetensors *const kFileSentinel = reinterpret_cast<tlrt_safetensors *>(uintptr_t{1});
const char *const kStrSentinel = "sentinel";

// ---- save ----------------------------------------------------------------------------------------

void test_save() {
  const char *fn = "tlrt_safetensors_save";
  Fixture f = make_fixture();
  const std::string p = path_of("s.safetensors");
  const char *path = p.c_str();
  const char *names[] = {"a", "b"};
  const tlrt_buffer *bufs[] = {f.a, f.b};
  const char *keys[] = {"k1", "k2"}, *values[] = {"v1", "v2"};
  const size_t before = files_in_dir();

  BAD(tlrt_safetensors_save(nullptr, 2, names, bufs, nullptr, nullptr, 0, nullptr, nullptr),
      TLRT_ERR_NULL_ARGUMENT, fn, "path");
  BAD(tlrt_safetensors_save("", 2, names, bufs, nullptr, nullptr, 0, nullptr, nullptr),
      TLRT_ERR_INVALID_ARGUMENT, fn, "path");
  BAD(tlrt_safetensors_save(path, 2, nullptr, bufs, nullptr, nullptr, 0, nullptr, nullptr),
      TLRT_ERR_NULL_ARGUMENT, fn, "names");
  BAD(tlrt_safetensors_save(path, 2, names, nullptr, nullptr, nullptr, 0, nullptr, nullptr),
      TLRT_ERR_NULL_ARGUMENT, fn, "buffers");
  BAD(tlrt_safetensors_save(path, 0, nullptr, nullptr, nullptr, nullptr, 2, nullptr, values),
      TLRT_ERR_NULL_ARGUMENT, fn, "meta_keys");
  BAD(tlrt_safetensors_save(path, 0, nullptr, nullptr, nullptr, nullptr, 2, keys, nullptr),
      TLRT_ERR_NULL_ARGUMENT, fn, "meta_values");
  {
    const char *n1[] = {"a", nullptr};
    BAD(tlrt_safetensors_save(path, 2, n1, bufs, nullptr, nullptr, 0, nullptr, nullptr),
        TLRT_ERR_NULL_ARGUMENT, fn, "names");
    const tlrt_buffer *b1[] = {f.a, nullptr};
    BAD(tlrt_safetensors_save(path, 2, names, b1, nullptr, nullptr, 0, nullptr, nullptr),
        TLRT_ERR_NULL_ARGUMENT, fn, "buffers");
    const tlrt_buffer *b2[] = {f.a, f.released};
    BAD(tlrt_safetensors_save(path, 2, names, b2, nullptr, nullptr, 0, nullptr, nullptr),
        TLRT_ERR_RELEASED, fn, "buffers");
    tlrt_buffer *gone = th::upload({1});
    tlrt_buffer_free(gone);
    const tlrt_buffer *b3[] = {gone, f.a};
    BAD(tlrt_safetensors_save(path, 2, names, b3, nullptr, nullptr, 0, nullptr, nullptr),
        TLRT_ERR_STALE_HANDLE, fn, "buffers");
  }
  {  // names
    const char *meta[] = {"__metadata__", "b"};
    BAD(tlrt_safetensors_save(path, 2, meta, bufs, nullptr, nullptr, 0, nullptr, nullptr),
        TLRT_ERR_INVALID_ARGUMENT, fn, "names");
    const char *dup[] = {"same", "same"};
    BAD(tlrt_safetensors_save(path, 2, dup, bufs, nullptr, nullptr, 0, nullptr, nullptr),
        TLRT_ERR_INVALID_ARGUMENT, fn, "names");
    for (const char *bad : {"\xff", "a\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                            "\x80"}) {
      const char *utf[] = {"a", bad};
      BAD(tlrt_safetensors_save(path, 2, utf, bufs, nullptr, nullptr, 0, nullptr, nullptr),
          TLRT_ERR_INVALID_ARGUMENT, fn, "names");
    }
  }
  {  // shapes
    const uint64_t d22[] = {2, 2}, d23[] = {2, 3}, d4[] = {4}, dbig[] = {uint64_t{1} << 40,
                                                                          uint64_t{1} << 40};
    const uint64_t *dims_ok[] = {d22, d4};
    const uint32_t r21[] = {2, 1};
    const uint64_t *dims_bad[] = {d23, d4};
    BAD(tlrt_safetensors_save(path, 2, names, bufs, dims_bad, r21, 0, nullptr, nullptr),
        TLRT_ERR_SHAPE, fn, "dims");
    const uint64_t *dims_big[] = {dbig, d4};
    BAD(tlrt_safetensors_save(path, 2, names, bufs, dims_big, r21, 0, nullptr, nullptr),
        TLRT_ERR_SHAPE, fn, "dims");
    const uint32_t r01[] = {0, 1};  // a scalar of a 4-element buffer
    BAD(tlrt_safetensors_save(path, 2, names, bufs, nullptr, r01, 0, nullptr, nullptr),
        TLRT_ERR_SHAPE, fn, "dims");
    const uint32_t r31[] = {3, 1};  // NULL dims with rank 3
    BAD(tlrt_safetensors_save(path, 2, names, bufs, nullptr, r31, 0, nullptr, nullptr),
        TLRT_ERR_NULL_ARGUMENT, fn, "dims");
    const uint64_t *dims_null[] = {nullptr, d4};
    const uint32_t r22[] = {2, 1};
    BAD(tlrt_safetensors_save(path, 2, names, bufs, dims_null, r22, 0, nullptr, nullptr),
        TLRT_ERR_NULL_ARGUMENT, fn, "dims");
    const uint32_t rbig[] = {TLRT_SAFETENSORS_MAX_RANK + 1, 1};
    BAD(tlrt_safetensors_save(path, 2, names, bufs, dims_ok, rbig, 0, nullptr, nullptr),
        TLRT_ERR_INVALID_ARGUMENT, fn, "ranks");
    const uint64_t d400[] = {4, 0, 0};  // zero elements: a size-4 buffer does not fit it
    const uint64_t *dims_zero[] = {d400, d4};
    const uint32_t r31b[] = {3, 1};
    BAD(tlrt_safetensors_save(path, 2, names, bufs, dims_zero, r31b, 0, nullptr, nullptr),
        TLRT_ERR_SHAPE, fn, "dims");
  }
  {  // metadata
    const char *k1[] = {"k1", nullptr};
    BAD(tlrt_safetensors_save(path, 2, names, bufs, nullptr, nullptr, 2, k1, values),
        TLRT_ERR_NULL_ARGUMENT, fn, "meta_keys");
    const char *v1[] = {"v1", nullptr};
    BAD(tlrt_safetensors_save(path, 2, names, bufs, nullptr, nullptr, 2, keys, v1),
        TLRT_ERR_NULL_ARGUMENT, fn, "meta_values");
    const char *kdup[] = {"k", "k"};
    BAD(tlrt_safetensors_save(path, 2, names, bufs, nullptr, nullptr, 2, kdup, values),
        TLRT_ERR_INVALID_ARGUMENT, fn, "meta_keys");
    const char *kbad[] = {"k", "\xfe"};
    BAD(tlrt_safetensors_save(path, 2, names, bufs, nullptr, nullptr, 2, kbad, values),
        TLRT_ERR_INVALID_ARGUMENT, fn, "meta_keys");
    const char *vbad[] = {"v", "\xe2\x82"};
    BAD(tlrt_safetensors_save(path, 2, names, bufs, nullptr, nullptr, 2, keys, vbad),
        TLRT_ERR_INVALID_ARGUMENT, fn, "meta_values");
  }
  // None of the refusals above created a file.
  TH_CHECK(files_in_dir() == before);
  // I/O: a directory that does not exist.
  const std::string missing = path_of("missing/x.safetensors");
  BAD(tlrt_safetensors_save(missing.c_str(), 2, names, bufs, nullptr, nullptr, 0, nullptr,
                            nullptr),
      TLRT_ERR_IO, fn, "path");
  TH_CHECK(files_in_dir() == before);
  // The same arguments, corrected, succeed (counts of 0 with NULL arrays too).
  TH_OK(tlrt_safetensors_save(path, 2, names, bufs, nullptr, nullptr, 2, keys, values));
  TH_OK(tlrt_safetensors_save(path, 0, nullptr, nullptr, nullptr, nullptr, 0, nullptr, nullptr));
  ::unlink(path);
  free_fixture(f);
}

// ---- open ----------------------------------------------------------------------------------------

// open of `bytes` written to a file must fail with `want`; the message names the function, the
// argument path and contains `needle`.
void expect_open_fails(int line, const std::string &what, const std::string &bytes,
                       tlrt_status want, const char *needle) {
  const std::string p = path_of("bad.safetensors");
  write_file(p, bytes);
  tlrt_safetensors *h = kFileSentinel;
  const tlrt_status st = tlrt_safetensors_open(p.c_str(), &h);
  const std::string msg = tlrt_last_error();
  expect_fail(line, what.c_str(), st, want, "tlrt_safetensors_open", {"path"});
  TH_CHECK_MSG(h == nullptr, "%s: out not cleared", what.c_str());
  if (h != nullptr && h != kFileSentinel) tlrt_safetensors_close(h);
  TH_CHECK_MSG(msg.find(needle) != std::string::npos, "%s: message \"%s\" lacks \"%s\"",
               what.c_str(), msg.c_str(), needle);
}

#define OPEN_FAILS(bytes, want, needle) expect_open_fails(__LINE__, #bytes, bytes, want, needle)
#define BAD_HEADER(header, needle) \
  expect_open_fails(__LINE__, header, raw_file(header, ""), TLRT_ERR_FORMAT, needle)

// A valid entry of 4 float32 bytes at [b, e).
std::string entry(const std::string &name, uint64_t b, uint64_t e, const std::string &dtype = "F32",
                  const std::string &shape = "[1]") {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":[" + std::to_string(b) + "," + std::to_string(e) + "]}";
}

void test_open() {
  const char *fn = "tlrt_safetensors_open";
  tlrt_safetensors *h = kFileSentinel;
  BAD(tlrt_safetensors_open(nullptr, &h), TLRT_ERR_NULL_ARGUMENT, fn, "path");
  TH_CHECK(h == nullptr);
  const std::string good = path_of("good.safetensors");
  write_file(good, raw_file("{" + entry("x", 0, 4) + "}", std::string(4, '\0')));
  BAD(tlrt_safetensors_open(good.c_str(), nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  h = kFileSentinel;
  BAD(tlrt_safetensors_open("", &h), TLRT_ERR_INVALID_ARGUMENT, fn, "path");
  TH_CHECK(h == nullptr);
  const std::string missing = path_of("does-not-exist.safetensors");
  h = kFileSentinel;
  BAD(tlrt_safetensors_open(missing.c_str(), &h), TLRT_ERR_IO, fn, "path");
  TH_CHECK(h == nullptr && std::strstr(tlrt_last_error(), "does-not-exist") != nullptr);
  h = kFileSentinel;
  BAD(tlrt_safetensors_open(g_dir.c_str(), &h), TLRT_ERR_IO, fn, "path");  // a directory
  TH_CHECK(h == nullptr);
  const std::string fifo = path_of("fifo");
  if (::mkfifo(fifo.c_str(), 0600) == 0) {  // refused at once, not waited on for a writer
    h = kFileSentinel;
    BAD(tlrt_safetensors_open(fifo.c_str(), &h), TLRT_ERR_IO, fn, "path");
    TH_CHECK(h == nullptr && std::strstr(tlrt_last_error(), "not a regular file") != nullptr);
    ::unlink(fifo.c_str());
  }
  TH_OK(tlrt_safetensors_open(good.c_str(), &h));
  tlrt_safetensors_close(h);

  const std::string d4(4, '\0'), d8(8, '\0');
  // The header length and the file's size.
  OPEN_FAILS(std::string(), TLRT_ERR_FORMAT, "fewer than the 8");
  OPEN_FAILS(std::string("\x02\0\0\0", 4), TLRT_ERR_FORMAT, "fewer than the 8");
  OPEN_FAILS(raw_file("{}", "", 3), TLRT_ERR_FORMAT, "runs past the end");
  OPEN_FAILS(raw_file("{}", "", UINT64_MAX), TLRT_ERR_FORMAT, "exceeds the format's limit");
  OPEN_FAILS(raw_file("{}", "", 100000001), TLRT_ERR_FORMAT, "exceeds the format's limit");
  OPEN_FAILS(raw_file("", ""), TLRT_ERR_FORMAT, "does not start with '{'");
  // Truncated data, gaps, overlaps, trailing bytes.
  const std::string two = "{" + entry("a", 0, 4) + "," + entry("b", 4, 8) + "}";
  OPEN_FAILS(raw_file(two, d4), TLRT_ERR_FORMAT, "the file is truncated");
  OPEN_FAILS(raw_file(two, d8 + "x"), TLRT_ERR_FORMAT, "belongs to no tensor");
  OPEN_FAILS(raw_file("{" + entry("a", 0, 4) + "," + entry("b", 8, 12) + "}", d8 + d4),
             TLRT_ERR_FORMAT, "a gap");
  OPEN_FAILS(raw_file("{" + entry("a", 4, 8) + "}", d8), TLRT_ERR_FORMAT, "a gap");
  OPEN_FAILS(raw_file("{" + entry("a", 0, 8, "F32", "[2]") + "," + entry("b", 4, 8) + "}", d8),
             TLRT_ERR_FORMAT, "overlap");
  OPEN_FAILS(raw_file("{" + entry("a", 0, 4) + "," + entry("b", 0, 4) + "}", d4),
             TLRT_ERR_FORMAT, "overlap");
  OPEN_FAILS(raw_file("{" + entry("a", 8, 4) + "}", d8), TLRT_ERR_FORMAT, "end before they begin");
  // Dtypes and shapes against the byte ranges.
  OPEN_FAILS(raw_file("{" + entry("a", 0, 4, "F33") + "}", d4), TLRT_ERR_FORMAT,
             "unknown dtype \"F33\"");
  OPEN_FAILS(raw_file("{" + entry("a", 0, 4, "f32") + "}", d4), TLRT_ERR_FORMAT, "unknown dtype");
  OPEN_FAILS(raw_file("{" + entry("a", 0, 4, "F32", "[2]") + "}", d4), TLRT_ERR_FORMAT,
             "needs 8");
  OPEN_FAILS(raw_file("{" + entry("a", 0, 4, "F64") + "}", d4), TLRT_ERR_FORMAT, "needs 8");
  OPEN_FAILS(raw_file("{" + entry("a", 0, 4, "F32", "[]") + "," + entry("e", 4, 4, "F32", "[0]") +
                      "," + entry("z", 4, 8, "F32", "[2,0]") + "}", d8),
             TLRT_ERR_FORMAT, "needs 0");
  OPEN_FAILS(raw_file("{" + entry("a", 0, 2, "F4", "[3]") + "}", std::string(2, '\0')),
             TLRT_ERR_FORMAT, "not a whole number of bytes");
  OPEN_FAILS(raw_file("{" + entry("a", 0, 4, "F32", "[4294967296,4294967296,2]") + "}", d4),
             TLRT_ERR_FORMAT, "more than 2^64");
  std::string rank65 = "[";
  for (int k = 0; k < 65; ++k) rank65 += k ? ",1" : "1";
  rank65 += "]";
  OPEN_FAILS(raw_file("{" + entry("a", 0, 4, "F32", rank65) + "}", d4), TLRT_ERR_FORMAT,
             "more than 64 entries");
  OPEN_FAILS(raw_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,4]}}", d4),
             TLRT_ERR_FORMAT, "more than 2 entries");
  OPEN_FAILS(raw_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", d4),
             TLRT_ERR_FORMAT, "exactly two");

  // The JSON: structure.
  BAD_HEADER(" {}", "does not start with '{'");
  BAD_HEADER("[]", "does not start with '{'");
  BAD_HEADER("{", "a tensor name");
  BAD_HEADER("{}x", "after the header's object");
  BAD_HEADER(std::string("{}\0", 3), "after the header's object");
  BAD_HEADER("{} {}", "after the header's object");
  BAD_HEADER("{,}", "a tensor name");
  BAD_HEADER("{\"a\"}", "':' is expected");
  BAD_HEADER("{\"a\":1}", "a tensor entry must be an object");
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,0]},}", "a tensor name");
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,0]}", "',' or '}'");
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,],\"data_offsets\":[0,4]}}",
             "must be an array of integers");
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"shape\":[1 2],\"data_offsets\":[0,4]}}", "',' or ']'");
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}",
             "must be an array of integers");
  BAD_HEADER("{\"a\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}",
             "\"dtype\" must be a string");
  BAD_HEADER("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", "without \"dtype\"");
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", "without \"shape\"");
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", "without \"data_offsets\"");
  BAD_HEADER("{\"a\":{}}", "without \"dtype\"");
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
             "\"dtype\" appears twice");
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}",
             "a field other than");
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             "a tensor name appears twice");
  BAD_HEADER("{\"__metadata__\":{},\"__metadata__\":{}}", "\"__metadata__\" appears twice");
  BAD_HEADER("{\"__metadata__\":{\"k\":1}}", "metadata values must be strings");
  BAD_HEADER("{\"__metadata__\":{\"k\":null}}", "metadata values must be strings");
  BAD_HEADER("{\"__metadata__\":null}", "must be an object of strings");
  BAD_HEADER("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", "a metadata key appears twice");
  BAD_HEADER("{\"__metadata__\":{\"k\":{\"x\":\"y\"}}}", "metadata values must be strings");
  BAD_HEADER("{\"a\":true}", "a tensor entry must be an object");
  // The JSON: numbers.
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", "negative");
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", "a fraction");
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}", "an exponent");
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", "leading zero");
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,4]}}",
             "above 2^64 - 1");
  BAD_HEADER("{\"a\":{\"dtype\":\"F32\",\"shape\":[+1],\"data_offsets\":[0,4]}}",
             "must be an array of integers");
  // The JSON: strings.
  BAD_HEADER("{\"a", "not closed");
  BAD_HEADER("{\"a\\", "ends in a backslash");
  BAD_HEADER("{\"a\\x\":{}}", "unknown escape");
  BAD_HEADER("{\"a\\u12\":{}}", "four hex digits");
  BAD_HEADER("{\"a\\u12g4\":{}}", "four hex digits");
  BAD_HEADER("{\"a\\u0000\":{}}", "U+0000");
  BAD_HEADER("{\"a\\udc00\":{}}", "a lone low surrogate");
  BAD_HEADER("{\"a\\ud800\":{}}", "not followed by a low one");
  BAD_HEADER("{\"a\\ud800\\u0041\":{}}", "not followed by a low one");
  BAD_HEADER("{\"a\tb\":{}}", "control character");
  BAD_HEADER(std::string("{\"a\0b\":{}}", 10), "control character");
  BAD_HEADER("{\"\xff\":{}}", "not valid UTF-8");
  BAD_HEADER("{\"\xc0\x80\":{}}", "not valid UTF-8");      // an overlong NUL
  BAD_HEADER("{\"\xed\xa0\x80\":{}}", "not valid UTF-8");  // an encoded surrogate
  BAD_HEADER("{\"\xe2\x82\":{}}", "not valid UTF-8");      // cut short
  BAD_HEADER("{'a':{}}", "a tensor name");
  BAD_HEADER("{a:{}}", "a tensor name");

  // The lenient corner of the format that is valid: whitespace after the object, an empty
  // header object, escapes in names, empty tensors sharing an offset.
  const std::string fine = path_of("fine.safetensors");
  write_file(fine, raw_file("{" + entry("e1", 0, 0, "F32", "[0]") + "," +
                            entry("e2", 0, 0, "I64", "[2,0]") + "," + entry("x", 0, 4) +
                            "} \t\r\n ", d4));
  TH_OK(tlrt_safetensors_open(fine.c_str(), &h));
  tlrt_safetensors_close(h);
  ::unlink(fine.c_str());
  ::unlink(path_of("bad.safetensors").c_str());
  ::unlink(good.c_str());
}

// ---- the accessors -------------------------------------------------------------------------------

void test_accessors() {
  const std::string p = path_of("acc.safetensors");
  write_file(p, raw_file("{\"__metadata__\":{\"k\":\"v\"}," + entry("x", 0, 4) + "," +
                         entry("u", 4, 6, "U16") + "," + entry("m", 6, 30, "F32", "[2,3]") + "}",
                         std::string(30, '\0')));
  tlrt_safetensors *h = nullptr;
  TH_OK(tlrt_safetensors_open(p.c_str(), &h));
  tlrt_safetensors *closed = nullptr;
  TH_OK(tlrt_safetensors_open(p.c_str(), &closed));
  tlrt_safetensors_close(closed);
  tlrt_safetensors *never = reinterpret_cast<tlrt_safetensors *>(uintptr_t{0x123456789});

  uint64_t count = 7;
  const char *fn = "tlrt_safetensors_count";
  BAD(tlrt_safetensors_count(nullptr, &count), TLRT_ERR_NULL_ARGUMENT, fn, "file");
  TH_CHECK(count == 0);
  BAD(tlrt_safetensors_count(h, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "count");
  count = 7;
  BAD(tlrt_safetensors_count(closed, &count), TLRT_ERR_STALE_HANDLE, fn, "file");
  TH_CHECK(count == 0);
  BAD(tlrt_safetensors_count(never, &count), TLRT_ERR_STALE_HANDLE, fn, "file");
  TH_OK(tlrt_safetensors_count(h, &count));
  TH_CHECK(count == 3);

  fn = "tlrt_safetensors_metadata_count";
  count = 7;
  BAD(tlrt_safetensors_metadata_count(nullptr, &count), TLRT_ERR_NULL_ARGUMENT, fn, "file");
  TH_CHECK(count == 0);
  BAD(tlrt_safetensors_metadata_count(h, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "count");
  BAD(tlrt_safetensors_metadata_count(closed, &count), TLRT_ERR_STALE_HANDLE, fn, "file");
  TH_OK(tlrt_safetensors_metadata_count(h, &count));
  TH_CHECK(count == 1);

  const char *s = kStrSentinel;
  fn = "tlrt_safetensors_name";
  BAD(tlrt_safetensors_name(nullptr, 0, &s), TLRT_ERR_NULL_ARGUMENT, fn, "file");
  TH_CHECK(s == nullptr);
  BAD(tlrt_safetensors_name(h, 0, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "name");
  s = kStrSentinel;
  BAD(tlrt_safetensors_name(closed, 0, &s), TLRT_ERR_STALE_HANDLE, fn, "file");
  TH_CHECK(s == nullptr);
  s = kStrSentinel;
  BAD(tlrt_safetensors_name(h, 3, &s), TLRT_ERR_INDEX, fn, "index");
  TH_CHECK(s == nullptr);
  BAD(tlrt_safetensors_name(h, UINT64_MAX, &s), TLRT_ERR_INDEX, fn, "index");
  TH_OK(tlrt_safetensors_name(h, 2, &s));
  TH_CHECK(s != nullptr && std::strcmp(s, "x") == 0);

  fn = "tlrt_safetensors_metadata_key";
  s = kStrSentinel;
  BAD(tlrt_safetensors_metadata_key(nullptr, 0, &s), TLRT_ERR_NULL_ARGUMENT, fn, "file");
  TH_CHECK(s == nullptr);
  BAD(tlrt_safetensors_metadata_key(h, 0, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "key");
  BAD(tlrt_safetensors_metadata_key(closed, 0, &s), TLRT_ERR_STALE_HANDLE, fn, "file");
  s = kStrSentinel;
  BAD(tlrt_safetensors_metadata_key(h, 1, &s), TLRT_ERR_INDEX, fn, "index");
  TH_CHECK(s == nullptr);
  TH_OK(tlrt_safetensors_metadata_key(h, 0, &s));
  TH_CHECK(s != nullptr && std::strcmp(s, "k") == 0);

  fn = "tlrt_safetensors_metadata";
  s = kStrSentinel;
  BAD(tlrt_safetensors_metadata(nullptr, "k", &s), TLRT_ERR_NULL_ARGUMENT, fn, "file");
  TH_CHECK(s == nullptr);
  BAD(tlrt_safetensors_metadata(h, nullptr, &s), TLRT_ERR_NULL_ARGUMENT, fn, "key");
  BAD(tlrt_safetensors_metadata(h, "k", nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "value");
  BAD(tlrt_safetensors_metadata(closed, "k", &s), TLRT_ERR_STALE_HANDLE, fn, "file");
  s = kStrSentinel;
  BAD(tlrt_safetensors_metadata(h, "K", &s), TLRT_ERR_INDEX, fn, "key");
  TH_CHECK(s == nullptr);
  TH_OK(tlrt_safetensors_metadata(h, "k", &s));
  TH_CHECK(s != nullptr && std::strcmp(s, "v") == 0);

  fn = "tlrt_safetensors_info";
  uint32_t dtype = 7, rank = 7;
  uint64_t dims[3] = {9, 9, 9};
  BAD(tlrt_safetensors_info(nullptr, "m", &dtype, dims, 3, &rank), TLRT_ERR_NULL_ARGUMENT, fn,
      "file");
  TH_CHECK(dtype == 0 && rank == 0 && dims[0] == 0 && dims[2] == 0);
  BAD(tlrt_safetensors_info(h, nullptr, &dtype, dims, 3, &rank), TLRT_ERR_NULL_ARGUMENT, fn,
      "name");
  rank = 7;
  BAD(tlrt_safetensors_info(h, "m", nullptr, dims, 3, &rank), TLRT_ERR_NULL_ARGUMENT, fn,
      "dtype");
  TH_CHECK(rank == 0);
  dtype = 7;
  BAD(tlrt_safetensors_info(h, "m", &dtype, dims, 3, nullptr), TLRT_ERR_NULL_ARGUMENT, fn,
      "rank");
  TH_CHECK(dtype == 0);
  BAD(tlrt_safetensors_info(h, "m", &dtype, nullptr, 3, &rank), TLRT_ERR_NULL_ARGUMENT, fn,
      "dims");
  BAD(tlrt_safetensors_info(closed, "m", &dtype, dims, 3, &rank), TLRT_ERR_STALE_HANDLE, fn,
      "file");
  BAD(tlrt_safetensors_info(h, "nope", &dtype, dims, 3, &rank), TLRT_ERR_INDEX, fn, "name");
  dims[0] = 9;
  dtype = rank = 7;
  BAD(tlrt_safetensors_info(h, "m", &dtype, dims, 1, &rank), TLRT_ERR_SHAPE, fn, "capacity");
  TH_CHECK(dtype == 0 && rank == 0 && dims[0] == 0);
  uint64_t none[1] = {5};
  BAD(tlrt_safetensors_info(h, "m", &dtype, none, 0, &rank), TLRT_ERR_SHAPE, fn, "capacity");
  TH_CHECK(none[0] == 5);  // capacity 0: nothing written
  TH_OK(tlrt_safetensors_info(h, "m", &dtype, nullptr, 0, &rank));  // the query of the rank
  TH_CHECK(dtype == TLRT_SAFETENSORS_F32 && rank == 2);
  TH_OK(tlrt_safetensors_info(h, "m", &dtype, dims, 3, &rank));
  TH_CHECK(dtype == TLRT_SAFETENSORS_F32 && rank == 2 && dims[0] == 2 && dims[1] == 3 &&
           dims[2] == 0);
  TH_OK(tlrt_safetensors_info(h, "u", &dtype, dims, 3, &rank));
  TH_CHECK(dtype == TLRT_SAFETENSORS_U16 && rank == 1 && dims[0] == 1);

  fn = "tlrt_safetensors_load";
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_safetensors_load(nullptr, "x", TLRT_DEVICE_CPU, &out), TLRT_ERR_NULL_ARGUMENT, fn,
      "file");
  CLEARED(out);
  BAD(tlrt_safetensors_load(h, nullptr, TLRT_DEVICE_CPU, &out), TLRT_ERR_NULL_ARGUMENT, fn,
      "name");
  BAD(tlrt_safetensors_load(h, "x", TLRT_DEVICE_CPU, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_safetensors_load(closed, "x", TLRT_DEVICE_CPU, &out), TLRT_ERR_STALE_HANDLE, fn,
      "file");
  CLEARED(out);
  BAD(tlrt_safetensors_load(never, "x", TLRT_DEVICE_CPU, &out), TLRT_ERR_STALE_HANDLE, fn,
      "file");
  BAD(tlrt_safetensors_load(h, "y", TLRT_DEVICE_CPU, &out), TLRT_ERR_INDEX, fn, "name");
  BAD(tlrt_safetensors_load(h, "u", TLRT_DEVICE_CPU, &out), TLRT_ERR_DTYPE, fn, "name");
  CLEARED(out);
  BAD(tlrt_safetensors_load(h, "x", (tlrt_device)0x00050000u, &out), TLRT_ERR_INVALID_ARGUMENT,
      fn, "device");
  if (tlrt_runtime_status() == TLRT_RUNTIME_CPU_ONLY)
    BAD(tlrt_safetensors_load(h, "x", TLRT_DEVICE_CUDA(0), &out), TLRT_ERR_BACKEND_UNAVAILABLE,
        fn, "device");
  else if (tlrt_runtime_status() == TLRT_RUNTIME_CUDA_NO_DEVICE)
    BAD(tlrt_safetensors_load(h, "x", TLRT_DEVICE_CUDA(0), &out), TLRT_ERR_NO_DEVICE, fn,
        "device");
  CLEARED(out);
  TH_OK(tlrt_safetensors_load(h, "x", TLRT_DEVICE_CPU, &out));
  expect_result(fn, out, 1);

  // The file shortened after it was opened: the load that runs out of file says so.
  TH_CHECK(::truncate(p.c_str(), 8 + 10) == 0);
  BAD(tlrt_safetensors_load(h, "m", TLRT_DEVICE_CPU, &out), TLRT_ERR_IO, fn, "path");
  CLEARED(out);

  // close: NULL, a closed handle (a double close), a value that never was a handle: ignored.
  tlrt_safetensors_close(nullptr);
  tlrt_safetensors_close(closed);
  tlrt_safetensors_close(never);
  tlrt_safetensors_close(h);
  tlrt_safetensors_close(h);
  BAD(tlrt_safetensors_count(h, &count), TLRT_ERR_STALE_HANDLE, "tlrt_safetensors_count", "file");
  ::unlink(p.c_str());

  // The two status codes of files, and dtype names, which never fail.
  TH_CHECK(TLRT_ERR_FORMAT == 10 && TLRT_ERR_IO == 101);
  TH_CHECK(std::strcmp(tlrt_status_string(TLRT_ERR_FORMAT), "TLRT_ERR_FORMAT") == 0);
  TH_CHECK(std::strcmp(tlrt_status_string(TLRT_ERR_IO), "TLRT_ERR_IO") == 0);
  TH_CHECK(std::strcmp(tlrt_safetensors_dtype_name(TLRT_SAFETENSORS_BF16), "BF16") == 0);
  TH_CHECK(std::strcmp(tlrt_safetensors_dtype_name(1000), "UNKNOWN") == 0);
}

}  // namespace

int main() {
  char tmpl[] = "/tmp/tlrt_bad_checkpoint_XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::printf("mkdtemp failed\n");
    return 1;
  }
  g_dir = tmpl;
  const tlrt_allocator_stats start = th::stats();
  test_save();
  test_open();
  test_accessors();
  expect_no_leaks(start);
  TH_CHECK(files_in_dir() == 0);
  ::rmdir(g_dir.c_str());
  return th::finish("test_bad_input_checkpoint");
}
