// Checkpoints in the safetensors format (abi/tlrt_checkpoint.h), known answers on the CPU (and on
// CUDA(0) where a GPU is usable):
//   - known bytes: files whose every byte was computed by hand, and the byte strings of the
//     format's reference tests (huggingface/safetensors, tensor.rs), written by
//     tlrt_safetensors_save and compared byte for byte;
//   - round trips of float32 / int32 / int64 tensors of ranks 0 to 5, empty ones included, with
//     special values bit for bit, through save -> open -> info / load;
//   - metadata (sorted keys, escapes, non-ASCII), tensor order (the reference writer's layout,
//     names listed in byte order);
//   - the conversions of load: every binary16 and every bfloat16 against an independent formula,
//     binary64 rounding cases, in pieces larger than one staging piece;
//   - the atomic write: no ".tmp" left after success or failure, the old file intact when writing
//     fails (a missing directory, a write cut short by RLIMIT_FSIZE, a rename onto a directory);
//   - concurrent loads from one handle, an injected allocation failure, nothing leaked.
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "tlrt_testing.h"

namespace {

using th::Buf;

std::string g_dir;  // a fresh directory for this run's files

std::string path_of(const std::string &name) { return g_dir + "/" + name; }

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), (std::streamsize)bytes.size());
}

bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// A safetensors file from a header (padded with spaces to 8 bytes) and the data bytes.
std::string file_bytes(std::string header, const std::string &data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int k = 0; k < 8; ++k) out[k] = (char)((uint64_t)header.size() >> (8 * k));
  return out + header + data;
}

template <class T>
std::string le_bytes(const std::vector<T> &v) {
  std::string out;
  for (const T &x : v) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &x, sizeof(T));  // the test host is little-endian (checked in main)
    out.append(reinterpret_cast<const char *>(b), sizeof(T));
  }
  return out;
}

// An open file that closes itself.
struct File {
  tlrt_safetensors *h = nullptr;
  File() = default;
  explicit File(const std::string &path) {
    TH_OK(tlrt_safetensors_open(path.c_str(), &h));
  }
  File(const File &) = delete;
  File &operator=(const File &) = delete;
  ~File() { tlrt_safetensors_close(h); }
};

tlrt_buffer *from_i32(const std::vector<int32_t> &v) {
  tlrt_buffer *b = nullptr;
  TH_OK(tlrt_buffer_from_i32(TLRT_DEVICE_CPU, v.data(), v.size(), &b));
  return b;
}

tlrt_buffer *from_i64(const std::vector<int64_t> &v) {
  tlrt_buffer *b = nullptr;
  TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, v.data(), v.size(), &b));
  return b;
}

std::vector<uint32_t> bits_of_buffer(const tlrt_buffer *b) {
  std::vector<float> v = th::download(b);
  std::vector<uint32_t> out(v.size());
  if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * 4);  // data() may be NULL
  return out;
}

// ---- known bytes ---------------------------------------------------------------------------------

void test_known_bytes() {
  // By hand: three tensors of the three types and one metadata entry. The reference writer's
  // layout puts I64 first, then F32, then I32; the header (193 bytes) is padded to 200 (0xc8).
  Buf b(th::upload({1.0f, 2.0f}));
  Buf a(from_i32({7}));
  Buf c(from_i64({-1}));
  const char *names[] = {"b", "a", "c"};
  const tlrt_buffer *bufs[] = {b.get(), a.get(), c.get()};
  const uint64_t dims_c[] = {1};
  const uint64_t *dims[] = {nullptr, nullptr, dims_c};
  const uint32_t ranks[] = {1, 0, 1};
  const char *keys[] = {"format"}, *values[] = {"pt"};
  const std::string p = path_of("known.safetensors");
  TH_OK(tlrt_safetensors_save(p.c_str(), 3, names, bufs, dims, ranks, 1, keys, values));
  const std::string want =
      std::string("\xc8\0\0\0\0\0\0\0", 8) +
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"c\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
      "\"a\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[16,20]}}       " +
      std::string("\xff\xff\xff\xff\xff\xff\xff\xff"  // int64 -1
                  "\x00\x00\x80\x3f\x00\x00\x00\x40"  // float32 1, 2
                  "\x07\x00\x00\x00",                 // int32 7
                  20);
  const std::string got = read_file(p);
  TH_CHECK_MSG(got == want, "known.safetensors: %zu bytes, expected %zu; differs", got.size(),
               want.size());
  TH_CHECK(!exists(p + ".tmp"));

  // The reference's own test vectors (tensor.rs: test_serialization, ..._forced_alignement,
  // test_empty): the same bytes from our writer.
  Buf six(th::upload({0, 1, 2, 3, 4, 5}));
  const char *n1[] = {"attn.0"};
  const tlrt_buffer *b1[] = {six.get()};
  const uint64_t d123[] = {1, 2, 3}, d1123[] = {1, 1, 2, 3};
  const uint64_t *dd1[] = {d123}, *dd2[] = {d1123};
  const uint32_t r3[] = {3}, r4[] = {4};
  const unsigned char ref1[] = {
      64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100, 116, 121,
      112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58, 91, 49, 44,
      50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115, 101, 116, 115, 34, 58, 91,
      48, 44, 50, 52, 93, 125, 125, 0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0,
      128, 64, 0, 0, 160, 64};
  TH_OK(tlrt_safetensors_save(p.c_str(), 1, n1, b1, dd1, r3, 0, nullptr, nullptr));
  TH_CHECK(read_file(p) == std::string(reinterpret_cast<const char *>(ref1), sizeof ref1));
  const char *n2[] = {"attn0"};
  const unsigned char ref2[] = {
      72, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 48, 34, 58, 123, 34, 100, 116, 121,
      112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58, 91, 49, 44,
      49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115, 101, 116, 115, 34,
      58, 91, 48, 44, 50, 52, 93, 125, 125, 32, 32, 32, 32, 32, 32, 32, 0, 0, 0, 0, 0, 0, 128, 63,
      0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64};
  TH_OK(tlrt_safetensors_save(p.c_str(), 1, n2, b1, dd2, r4, 0, nullptr, nullptr));
  TH_CHECK(read_file(p) == std::string(reinterpret_cast<const char *>(ref2), sizeof ref2));
  const unsigned char ref3[] = {8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32};
  TH_OK(tlrt_safetensors_save(p.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0, nullptr,
                              nullptr));
  TH_CHECK(read_file(p) == std::string(reinterpret_cast<const char *>(ref3), sizeof ref3));
  const char *fk[] = {"framework"}, *fv[] = {"pt"};
  const unsigned char ref4[] = {
      40, 0, 0, 0, 0, 0, 0, 0, 123, 34, 95, 95, 109, 101, 116, 97, 100, 97, 116, 97, 95, 95, 34,
      58, 123, 34, 102, 114, 97, 109, 101, 119, 111, 114, 107, 34, 58, 34, 112, 116, 34, 125, 125,
      32, 32, 32, 32, 32};
  TH_OK(tlrt_safetensors_save(p.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 1, fk, fv));
  TH_CHECK(read_file(p) == std::string(reinterpret_cast<const char *>(ref4), sizeof ref4));
  {  // and that last file reads back: no tensor, one metadata entry
    File f(p);
    uint64_t n = 9;
    TH_OK(tlrt_safetensors_count(f.h, &n));
    TH_CHECK(n == 0);
    TH_OK(tlrt_safetensors_metadata_count(f.h, &n));
    TH_CHECK(n == 1);
    const char *v = nullptr;
    TH_OK(tlrt_safetensors_metadata(f.h, "framework", &v));
    TH_CHECK(v != nullptr && std::strcmp(v, "pt") == 0);
  }

  // Names are escaped as serde_json escapes them; non-ASCII stays UTF-8.
  Buf one(th::upload({1}));
  const char *n3[] = {"q\"\\\n\t\x01\x1f/\xc3\xa9"};
  const tlrt_buffer *b3[] = {one.get()};
  TH_OK(tlrt_safetensors_save(p.c_str(), 1, n3, b3, nullptr, nullptr, 0, nullptr, nullptr));
  const std::string text = read_file(p);
  const std::string name_json = "\"q\\\"\\\\\\n\\t\\u0001\\u001f/\xc3\xa9\"";
  TH_CHECK_MSG(text.find(name_json + ":{\"dtype\":\"F32\",\"shape\":[1],") == 9,
               "escaped name not found at byte 9 of %s", text.substr(8).c_str());
  File f(p);
  const char *got_name = nullptr;
  TH_OK(tlrt_safetensors_name(f.h, 0, &got_name));
  TH_CHECK(got_name != nullptr && std::strcmp(got_name, n3[0]) == 0);
}

// ---- round trips ---------------------------------------------------------------------------------

struct Case {
  std::string name;
  tlrt_dtype dtype;
  std::vector<uint64_t> shape;
};

void test_round_trips(tlrt_device dev) {
  const std::vector<Case> cases = {
      {"f.rank0", TLRT_DTYPE_F32, {}},         {"f.rank1", TLRT_DTYPE_F32, {7}},
      {"f.rank2", TLRT_DTYPE_F32, {3, 4}},     {"f.rank5", TLRT_DTYPE_F32, {2, 1, 3, 1, 2}},
      {"f.empty", TLRT_DTYPE_F32, {0}},        {"f.empty3", TLRT_DTYPE_F32, {3, 0, 2}},
      {"i32.rank0", TLRT_DTYPE_I32, {}},       {"i32.rank3", TLRT_DTYPE_I32, {2, 3, 2}},
      {"i32.empty", TLRT_DTYPE_I32, {0, 5}},   {"i64.rank0", TLRT_DTYPE_I64, {}},
      {"i64.rank2", TLRT_DTYPE_I64, {5, 3}},   {"i64.empty", TLRT_DTYPE_I64, {4, 0}},
  };
  th::Rng rng(11);
  std::vector<Buf> bufs;
  std::vector<std::vector<uint32_t>> f32_bits;
  std::vector<std::vector<int64_t>> ints;
  std::vector<const char *> names;
  std::vector<const tlrt_buffer *> ptrs;
  std::vector<const uint64_t *> dims;
  std::vector<uint32_t> ranks;
  for (const Case &c : cases) {
    uint64_t n = 1;
    for (uint64_t d : c.shape) n *= d;
    tlrt_buffer *b = nullptr;
    std::vector<uint32_t> fb;
    std::vector<int64_t> iv;
    if (c.dtype == TLRT_DTYPE_F32) {
      std::vector<float> v = rng.bits(n);  // NaN payloads, infinities, subnormals, -0
      const std::vector<float> edge = th::edge_values();
      for (uint64_t i = 0; i < n && i < edge.size(); i += 2) v[i] = edge[i];
      fb.resize(n);
      if (n > 0) std::memcpy(fb.data(), v.data(), n * 4);  // an empty vector's data() may be NULL
      TH_OK(tlrt_buffer_from_f32(dev, v.data(), n, &b));
    } else if (c.dtype == TLRT_DTYPE_I32) {
      std::vector<int32_t> v(n);
      for (uint64_t i = 0; i < n; ++i) v[i] = (int32_t)rng.gen() ^ (i == 0 ? INT32_MIN : 0);
      iv.assign(v.begin(), v.end());
      TH_OK(tlrt_buffer_from_i32(dev, v.data(), n, &b));
    } else {
      std::vector<int64_t> v(n);
      for (uint64_t i = 0; i < n; ++i) v[i] = (int64_t)rng.gen();
      if (n > 1) v[0] = INT64_MIN, v[1] = INT64_MAX;
      iv = v;
      TH_OK(tlrt_buffer_from_i64(dev, v.data(), n, &b));
    }
    bufs.emplace_back(b);
    f32_bits.push_back(fb);
    ints.push_back(iv);
    names.push_back(c.name.c_str());
    ptrs.push_back(b);
    dims.push_back(c.shape.empty() ? nullptr : c.shape.data());
    ranks.push_back((uint32_t)c.shape.size());
  }
  const std::string p = path_of("round.safetensors");
  TH_OK(tlrt_safetensors_save(p.c_str(), cases.size(), names.data(), ptrs.data(), dims.data(),
                              ranks.data(), 0, nullptr, nullptr));
  TH_CHECK(!exists(p + ".tmp"));
  // The header is padded: the data starts at a multiple of 8.
  const std::string bytes = read_file(p);
  uint64_t hlen = 0;
  for (int k = 7; k >= 0; --k) hlen = hlen << 8 | (unsigned char)bytes[k];
  TH_CHECK(hlen % 8 == 0 && hlen + 8 <= bytes.size());

  File f(p);
  uint64_t count = 0;
  TH_OK(tlrt_safetensors_count(f.h, &count));
  TH_CHECK(count == cases.size());
  // Names come back in byte order.
  for (uint64_t i = 0; i + 1 < count; ++i) {
    const char *x = nullptr, *y = nullptr;
    TH_OK(tlrt_safetensors_name(f.h, i, &x));
    TH_OK(tlrt_safetensors_name(f.h, i + 1, &y));
    TH_CHECK(x != nullptr && y != nullptr && std::strcmp(x, y) < 0);
  }
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case &c = cases[ci];
    uint32_t dtype = 99, rank = 99;
    uint64_t d[TLRT_SAFETENSORS_MAX_RANK];
    TH_OK(tlrt_safetensors_info(f.h, c.name.c_str(), &dtype, d, TLRT_SAFETENSORS_MAX_RANK, &rank));
    TH_CHECK_MSG(dtype == (uint32_t)c.dtype && rank == c.shape.size(), "%s: dtype %u rank %u",
                 c.name.c_str(), dtype, rank);
    for (uint32_t k = 0; k < rank && k < c.shape.size(); ++k) TH_CHECK(d[k] == c.shape[k]);
    TH_CHECK(rank == TLRT_SAFETENSORS_MAX_RANK || d[rank] == 0);
    for (tlrt_device to : {TLRT_DEVICE_CPU, dev}) {
      Buf b;
      TH_OK(tlrt_safetensors_load(f.h, c.name.c_str(), to, b.out()));
      tlrt_dtype t = TLRT_DTYPE_F32;
      TH_OK(tlrt_buffer_dtype(b.get(), &t));
      tlrt_device where = 0;
      TH_OK(tlrt_buffer_device(b.get(), &where));
      TH_CHECK(t == c.dtype && where == to);
      if (c.dtype == TLRT_DTYPE_F32) {
        TH_CHECK_MSG(bits_of_buffer(b.get()) == f32_bits[ci], "%s: float32 bits differ",
                     c.name.c_str());
      } else {
        uint64_t n = 0;
        TH_OK(tlrt_buffer_size(b.get(), &n));
        TH_CHECK(n == ints[ci].size());
        std::vector<int64_t> got(n);
        if (c.dtype == TLRT_DTYPE_I32) {
          std::vector<int32_t> v(n);
          TH_OK(tlrt_buffer_to_i32(b.get(), v.data(), n));
          got.assign(v.begin(), v.end());
        } else {
          TH_OK(tlrt_buffer_to_i64(b.get(), got.data(), n));
        }
        TH_CHECK_MSG(got == ints[ci], "%s: integers differ", c.name.c_str());
      }
    }
  }
  // A capacity of exactly the rank suffices; dims may be NULL with capacity 0.
  uint32_t dtype = 9, rank = 9;
  uint64_t d5[5];
  TH_OK(tlrt_safetensors_info(f.h, "f.rank5", &dtype, d5, 5, &rank));
  TH_CHECK(rank == 5 && d5[0] == 2 && d5[4] == 2);
  TH_OK(tlrt_safetensors_info(f.h, "f.rank5", &dtype, nullptr, 0, &rank));
  TH_CHECK(rank == 5 && dtype == TLRT_SAFETENSORS_F32);
}

// ---- metadata and order --------------------------------------------------------------------------

void test_metadata_and_order() {
  Buf f1(th::upload({1})), f2(th::upload({2, 3}));
  Buf i1(from_i32({4})), l1(from_i64({5, 6}));
  // Unsorted names of mixed types; metadata with an empty key, escapes, non-ASCII.
  const char *names[] = {"zeta", "Alpha", "idx", "long", "beta"};
  const tlrt_buffer *bufs[] = {f1.get(), f2.get(), i1.get(), l1.get(), f1.get()};
  const char *keys[] = {"zz", "", "format", "note"};
  const char *values[] = {"last", "empty key", "pt", "line\nbreak \"quoted\" \xe2\x82\xac"};
  const std::string p = path_of("order.safetensors");
  TH_OK(tlrt_safetensors_save(p.c_str(), 5, names, bufs, nullptr, nullptr, 4, keys, values));
  const std::string text = read_file(p);
  // Layout: I64 ("long"), then F32 by name ("Alpha" < "beta" < "zeta"), then I32 ("idx"); the
  // metadata first, keys in byte order.
  const size_t m = text.find("{\"__metadata__\":{\"\":\"empty key\",\"format\":\"pt\","
                             "\"note\":\"line\\nbreak \\\"quoted\\\" \xe2\x82\xac\","
                             "\"zz\":\"last\"},\"long\":{\"dtype\":\"I64\",\"shape\":[2],"
                             "\"data_offsets\":[0,16]},\"Alpha\":{\"dtype\":\"F32\",\"shape\":[2],"
                             "\"data_offsets\":[16,24]},\"beta\":{\"dtype\":\"F32\",\"shape\":[1],"
                             "\"data_offsets\":[24,28]},\"zeta\":{\"dtype\":\"F32\",\"shape\":[1],"
                             "\"data_offsets\":[28,32]},\"idx\":{\"dtype\":\"I32\",\"shape\":[1],"
                             "\"data_offsets\":[32,36]}}");
  TH_CHECK_MSG(m == 8, "header of order.safetensors: %s", text.substr(8).c_str());
  File f(p);
  const char *want[] = {"Alpha", "beta", "idx", "long", "zeta"};  // byte order
  for (uint64_t i = 0; i < 5; ++i) {
    const char *n = nullptr;
    TH_OK(tlrt_safetensors_name(f.h, i, &n));
    TH_CHECK_MSG(n != nullptr && std::strcmp(n, want[i]) == 0, "name %llu: %s",
                 (unsigned long long)i, n ? n : "(null)");
  }
  uint64_t mc = 0;
  TH_OK(tlrt_safetensors_metadata_count(f.h, &mc));
  TH_CHECK(mc == 4);
  const char *want_keys[] = {"", "format", "note", "zz"};
  const char *want_values[] = {"empty key", "pt", values[3], "last"};
  for (uint64_t k = 0; k < 4 && k < mc; ++k) {
    const char *key = nullptr, *value = nullptr;
    TH_OK(tlrt_safetensors_metadata_key(f.h, k, &key));
    TH_CHECK(key != nullptr && std::strcmp(key, want_keys[k]) == 0);
    TH_OK(tlrt_safetensors_metadata(f.h, want_keys[k], &value));
    TH_CHECK(value != nullptr && std::strcmp(value, want_values[k]) == 0);
  }
  const char *value = reinterpret_cast<const char *>(1);
  TH_STATUS(tlrt_safetensors_metadata(f.h, "absent", &value), TLRT_ERR_INDEX);
  TH_CHECK(value == nullptr);
  // Values of the one tensor that reached the file twice under two names.
  Buf a, z;
  TH_OK(tlrt_safetensors_load(f.h, "beta", TLRT_DEVICE_CPU, a.out()));
  TH_OK(tlrt_safetensors_load(f.h, "zeta", TLRT_DEVICE_CPU, z.out()));
  TH_CHECK(th::download(a.get()) == std::vector<float>{1} &&
           th::download(z.get()) == std::vector<float>{1});

  // The empty name is a name (the reference writer takes it): these are its bytes for
  // {"": [0, 0], "a": [1]}, and the file reads back.
  {
    Buf e2(th::upload({0, 0})), a1(th::upload({1}));
    const char *en[] = {"a", ""};
    const tlrt_buffer *eb[] = {a1.get(), e2.get()};
    const std::string pe = path_of("empty_name.safetensors");
    TH_OK(tlrt_safetensors_save(pe.c_str(), 2, en, eb, nullptr, nullptr, 0, nullptr, nullptr));
    const std::string et = read_file(pe);
    const std::string want_header =
        "{\"\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
    TH_CHECK_MSG(et.size() > 8 && et.compare(8, want_header.size(), want_header) == 0,
                 "header of empty_name.safetensors: %s", et.size() > 8 ? et.substr(8).c_str() : "");
    File ef(pe);
    const char *n0 = nullptr;
    TH_OK(tlrt_safetensors_name(ef.h, 0, &n0));
    TH_CHECK(n0 != nullptr && *n0 == '\0');
    Buf back;
    TH_OK(tlrt_safetensors_load(ef.h, "", TLRT_DEVICE_CPU, back.out()));
    TH_CHECK((th::download(back.get()) == std::vector<float>{0, 0}));
  }

  // A file written by another writer, in a different order (names unsorted, the data in
  // reverse order, whitespace, escapes that our writer never uses): listed in byte order all the
  // same, each tensor's bytes where its offsets say.
  const std::string header =
      "{ \"zz\" : {\"shape\":[2], \"data_offsets\":[0,8], \"dtype\":\"F32\"},\n"
      "  \"\\u0041\\/b\": {\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[8,12]},\n"
      "  \"__metadata__\": {\"k\\ud83d\\ude00\": \"v\\u00e9\"} }";
  const std::string data = le_bytes<float>({1.5f, -2.0f}) + le_bytes<int32_t>({-9});
  const std::string q = path_of("foreign.safetensors");
  write_file(q, file_bytes(header, data));
  File g(q);
  const char *n0 = nullptr, *n1 = nullptr;
  TH_OK(tlrt_safetensors_name(g.h, 0, &n0));
  TH_OK(tlrt_safetensors_name(g.h, 1, &n1));
  TH_CHECK(n0 && n1 && std::strcmp(n0, "A/b") == 0 && std::strcmp(n1, "zz") == 0);
  const char *key = nullptr;
  TH_OK(tlrt_safetensors_metadata_key(g.h, 0, &key));
  TH_CHECK(key && std::strcmp(key, "k\xf0\x9f\x98\x80") == 0);
  TH_OK(tlrt_safetensors_metadata(g.h, key, &value));
  TH_CHECK(value && std::strcmp(value, "v\xc3\xa9") == 0);
  Buf x, y;
  TH_OK(tlrt_safetensors_load(g.h, "zz", TLRT_DEVICE_CPU, x.out()));
  TH_OK(tlrt_safetensors_load(g.h, "A/b", TLRT_DEVICE_CPU, y.out()));
  TH_CHECK((th::download(x.get()) == std::vector<float>{1.5f, -2.0f}));
  int32_t iv = 0;
  TH_OK(tlrt_buffer_to_i32(y.get(), &iv, 1));
  TH_CHECK(iv == -9);
}

// ---- conversions ---------------------------------------------------------------------------------

// The binary32 bits of a binary16, from its definition (a value formula, not bit surgery):
// (-1)^s 2^(e-15) (1 + m/1024) for normals, (-1)^s 2^-14 (m/1024) for subnormals.
uint32_t f16_reference(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  float v;
  if (e == 31) {
    if (m == 0) return s ? 0xFF800000u : 0x7F800000u;
    return (s ? 0x80000000u : 0u) | 0x7F800000u | (uint32_t)m << 13;  // NaN payload kept
  }
  v = e == 0 ? std::ldexp((float)m, -24) : std::ldexp((float)(1024 + m), e - 25);
  if (s) v = -v;
  return th::bits_of(v);
}

void test_conversions(tlrt_device dev) {
  // Every binary16 and every bfloat16 pattern, in one file, loaded on `dev`.
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = (uint16_t)i;
  // F64 cases: (value, the float32 bits it must round to).
  const double tiny = std::ldexp(1.0, -149);
  const std::vector<std::pair<double, uint32_t>> f64 = {
      {0.1, 0x3DCCCCCDu},
      {1.0 + std::ldexp(1.0, -24), 0x3F800000u},       // a tie: to the even 1
      {1.0 + 3 * std::ldexp(1.0, -24), 0x3F800002u},   // a tie: to the even 1 + 2^-22
      {1.0 + std::ldexp(1.0, -24) + std::ldexp(1.0, -40), 0x3F800001u},  // above the tie
      {-0.0, 0x80000000u},
      {0.0, 0u},
      {1e300, 0x7F800000u},
      {-1e300, 0xFF800000u},
      {3.4028235677973366e38, 0x7F800000u},            // FLT_MAX + half an ulp: a tie, to inf
      {3.4028235677973362e38, 0x7F7FFFFFu},            // just below: FLT_MAX
      {tiny, 0x00000001u},                             // the smallest subnormal
      {tiny / 2, 0u},                                  // a tie between 0 and it: 0
      {tiny * 1.5, 0x00000002u},                       // a tie: to the even 2 * 2^-149
      {std::ldexp(1.0, -1074), 0u},                    // a binary64 subnormal
      {-123456789.0, 0xCCEB79A3u},
      {INFINITY, 0x7F800000u},
      {-INFINITY, 0xFF800000u},
  };
  std::vector<double> f64v;
  for (const auto &c : f64) f64v.push_back(c.first);
  f64v.push_back(NAN);
  // Large enough to need several staging pieces (2^21 elements each): 2.5 * 2^21 binary16.
  const uint64_t big = 5u << 20;
  std::string big_data(big * 2, '\0');
  for (uint64_t i = 0; i < big; ++i) {
    const uint16_t h = (uint16_t)(i * 2654435761u >> 7);
    big_data[2 * i] = (char)(h & 0xFF);
    big_data[2 * i + 1] = (char)(h >> 8);
  }
  const std::string header =
      "{\"h\":{\"dtype\":\"F16\",\"shape\":[256,256],\"data_offsets\":[0,131072]},"
      "\"b\":{\"dtype\":\"BF16\",\"shape\":[65536],\"data_offsets\":[131072,262144]},"
      "\"d\":{\"dtype\":\"F64\",\"shape\":[" + std::to_string(f64v.size()) +
      "],\"data_offsets\":[262144," + std::to_string(262144 + 8 * f64v.size()) + "]},"
      "\"big\":{\"dtype\":\"F16\",\"shape\":[" + std::to_string(big) + "],\"data_offsets\":[" +
      std::to_string(262144 + 8 * f64v.size()) + "," +
      std::to_string(262144 + 8 * f64v.size() + 2 * big) + "]}}";
  const std::string p = path_of("convert.safetensors");
  write_file(p, file_bytes(header, le_bytes(all) + le_bytes(all) + le_bytes(f64v) + big_data));
  File f(p);
  uint32_t dtype = 99, rank = 0;
  uint64_t d[2];
  TH_OK(tlrt_safetensors_info(f.h, "h", &dtype, d, 2, &rank));
  TH_CHECK(dtype == TLRT_SAFETENSORS_F16 && rank == 2 && d[0] == 256 && d[1] == 256);
  TH_OK(tlrt_safetensors_info(f.h, "b", &dtype, d, 2, &rank));
  TH_CHECK(dtype == TLRT_SAFETENSORS_BF16 && rank == 1);
  TH_OK(tlrt_safetensors_info(f.h, "d", &dtype, d, 2, &rank));
  TH_CHECK(dtype == TLRT_SAFETENSORS_F64);

  Buf h, b, dd, bg;
  TH_OK(tlrt_safetensors_load(f.h, "h", dev, h.out()));
  TH_OK(tlrt_safetensors_load(f.h, "b", dev, b.out()));
  TH_OK(tlrt_safetensors_load(f.h, "d", dev, dd.out()));
  TH_OK(tlrt_safetensors_load(f.h, "big", dev, bg.out()));
  for (tlrt_buffer *x : {h.get(), b.get(), dd.get(), bg.get()}) {
    tlrt_dtype t = TLRT_DTYPE_I64;
    TH_OK(tlrt_buffer_dtype(x, &t));
    TH_CHECK(t == TLRT_DTYPE_F32);
  }
  const std::vector<uint32_t> hb = bits_of_buffer(h.get()), bb = bits_of_buffer(b.get());
  int bad16 = 0, badb = 0;
  for (uint32_t i = 0; i < 65536 && hb.size() == 65536 && bb.size() == 65536; ++i) {
    if (hb[i] != f16_reference((uint16_t)i) && ++bad16 < 5)
      TH_CHECK_MSG(false, "F16 0x%04x -> 0x%08x, expected 0x%08x", i, hb[i],
                   f16_reference((uint16_t)i));
    if (bb[i] != i << 16 && ++badb < 5)
      TH_CHECK_MSG(false, "BF16 0x%04x -> 0x%08x, expected 0x%08x", i, bb[i], i << 16);
  }
  TH_CHECK(hb.size() == 65536 && bad16 == 0 && bb.size() == 65536 && badb == 0);
  // Spot values, spelled out: 1, 65504 (the largest binary16), 2^-24 (its smallest subnormal),
  // -0, +-inf, a quiet and a signalling NaN (payload kept).
  if (hb.size() == 65536) {
    TH_CHECK(hb[0x3C00] == th::bits_of(1.0f) && hb[0x7BFF] == th::bits_of(65504.0f));
    TH_CHECK(hb[0x0001] == th::bits_of(std::ldexp(1.0f, -24)) && hb[0x8000] == 0x80000000u);
    TH_CHECK(hb[0x03FF] == th::bits_of(1023 * std::ldexp(1.0f, -24)));
    TH_CHECK(hb[0x7C00] == 0x7F800000u && hb[0xFC00] == 0xFF800000u);
    TH_CHECK(hb[0x7E00] == 0x7FC00000u && hb[0x7C01] == 0x7F802000u && hb[0xFE01] == 0xFFC02000u);
  }
  const std::vector<uint32_t> db = bits_of_buffer(dd.get());
  TH_CHECK(db.size() == f64v.size());
  for (size_t i = 0; i < f64.size() && i < db.size(); ++i)
    TH_CHECK_MSG(db[i] == f64[i].second, "F64 %.17g -> 0x%08x, expected 0x%08x", f64[i].first,
                 db[i], f64[i].second);
  if (db.size() == f64v.size()) {
    float nan_back;
    std::memcpy(&nan_back, &db.back(), 4);
    TH_CHECK(std::isnan(nan_back));
  }
  const std::vector<uint32_t> gb = bits_of_buffer(bg.get());
  TH_CHECK(gb.size() == big);
  int badg = 0;
  for (uint64_t i = 0; i < big && gb.size() == big; ++i) {
    const uint16_t hv = (uint16_t)(i * 2654435761u >> 7);
    if (gb[i] != f16_reference(hv)) ++badg;
  }
  TH_CHECK_MSG(badg == 0, "%d of the large F16 tensor's values differ", badg);

  // Types that are listed but not loaded.
  const std::string q = path_of("other.safetensors");
  write_file(q, file_bytes("{\"u\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]},"
                           "\"p\":{\"dtype\":\"F4\",\"shape\":[2,1],\"data_offsets\":[3,4]}}",
                           std::string("\x01\x02\x03\x45", 4)));
  File g(q);
  TH_OK(tlrt_safetensors_info(g.h, "p", &dtype, d, 2, &rank));
  TH_CHECK(dtype == TLRT_SAFETENSORS_F4 && rank == 2 && d[0] == 2 && d[1] == 1);
  Buf none;
  TH_STATUS(tlrt_safetensors_load(g.h, "u", dev, none.out()), TLRT_ERR_DTYPE);
  TH_CHECK(none.get() == nullptr);
  TH_CHECK(std::strstr(tlrt_last_error(), "U8") != nullptr);
}

// ---- the atomic write ----------------------------------------------------------------------------

bool no_tmp_files() {
  DIR *d = ::opendir(g_dir.c_str());
  bool none = true;
  while (dirent *e = d ? ::readdir(d) : nullptr) {
    const std::string n = e->d_name;
    if (n.size() >= 4 && n.compare(n.size() - 4, 4, ".tmp") == 0) none = false;
  }
  if (d) ::closedir(d);
  return none;
}

void test_atomic_write() {
  Buf small(th::upload({1, 2, 3}));
  const char *names[] = {"w"};
  const tlrt_buffer *bufs[] = {small.get()};
  const std::string p = path_of("atomic.safetensors");
  TH_OK(tlrt_safetensors_save(p.c_str(), 1, names, bufs, nullptr, nullptr, 0, nullptr, nullptr));
  const std::string old = read_file(p);
  TH_CHECK(!old.empty() && no_tmp_files());

  // A missing directory: nothing is created anywhere.
  const std::string missing = path_of("no/such/dir/x.safetensors");
  TH_STATUS(tlrt_safetensors_save(missing.c_str(), 1, names, bufs, nullptr, nullptr, 0, nullptr,
                                  nullptr),
            TLRT_ERR_IO);
  TH_CHECK(std::strstr(tlrt_last_error(), "no/such/dir/x.safetensors.tmp") != nullptr);
  TH_CHECK(!exists(path_of("no")) && no_tmp_files());

  // A write cut short (the file size limit is below what the file needs): the old file is intact
  // and the partial ".tmp" is gone.
  std::vector<float> many(1 << 16, 0.5f);
  Buf large(th::upload(many));
  const tlrt_buffer *lbufs[] = {large.get()};
  struct rlimit before;
  TH_CHECK(::getrlimit(RLIMIT_FSIZE, &before) == 0);
  void (*previous)(int) = ::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
  struct rlimit cut = before;
  cut.rlim_cur = 4096;
  if (::setrlimit(RLIMIT_FSIZE, &cut) == 0) {
    const tlrt_status st = tlrt_safetensors_save(p.c_str(), 1, names, lbufs, nullptr, nullptr, 0,
                                                 nullptr, nullptr);
    const std::string msg = tlrt_last_error();
    ::setrlimit(RLIMIT_FSIZE, &before);
    TH_CHECK_MSG(st == TLRT_ERR_IO, "a cut write returned %s", tlrt_status_string(st));
    TH_CHECK_MSG(msg.find("writing failed") != std::string::npos, "message: %s", msg.c_str());
    TH_CHECK(read_file(p) == old && no_tmp_files());
  } else {
    std::printf("note: setrlimit(RLIMIT_FSIZE) refused; the cut write is not tested\n");
  }
  ::signal(SIGXFSZ, previous);

  // A rename onto a directory fails after the file was written: the ".tmp" is removed.
  const std::string dir = path_of("a_directory");
  TH_CHECK(::mkdir(dir.c_str(), 0700) == 0);
  TH_STATUS(tlrt_safetensors_save(dir.c_str(), 1, names, bufs, nullptr, nullptr, 0, nullptr,
                                  nullptr),
            TLRT_ERR_IO);
  TH_CHECK(std::strstr(tlrt_last_error(), "renaming") != nullptr);
  TH_CHECK(no_tmp_files());
  ::rmdir(dir.c_str());

  // A symbolic link in the ".tmp" place is removed, never followed: its target stays as it was.
  const std::string victim = path_of("victim");
  write_file(victim, "not to be touched");
  TH_CHECK(::symlink(victim.c_str(), (p + ".tmp").c_str()) == 0);
  TH_OK(tlrt_safetensors_save(p.c_str(), 1, names, bufs, nullptr, nullptr, 0, nullptr, nullptr));
  TH_CHECK(read_file(victim) == "not to be touched" && read_file(p) == old && no_tmp_files());
  ::unlink(victim.c_str());

  // A stale ".tmp" of an earlier crash is replaced; a successful save replaces the old file.
  write_file(p + ".tmp", "left over");
  TH_OK(tlrt_safetensors_save(p.c_str(), 1, names, lbufs, nullptr, nullptr, 0, nullptr, nullptr));
  TH_CHECK(no_tmp_files() && read_file(p) != old);
  File f(p);
  Buf back;
  TH_OK(tlrt_safetensors_load(f.h, "w", TLRT_DEVICE_CPU, back.out()));
  TH_CHECK(th::download(back.get()) == many);
}

// ---- threads, faults, devices --------------------------------------------------------------------

void test_concurrent_loads() {
  std::vector<float> v = th::Rng(5).vec(10000);
  Buf b(th::upload(v));
  const char *names[] = {"x"};
  const tlrt_buffer *bufs[] = {b.get()};
  const std::string p = path_of("threads.safetensors");
  TH_OK(tlrt_safetensors_save(p.c_str(), 1, names, bufs, nullptr, nullptr, 0, nullptr, nullptr));
  File f(p);
  std::vector<int> ok(4, 0);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      int good = 0;
      for (int k = 0; k < 20; ++k) {
        tlrt_buffer *out = nullptr;
        if (tlrt_safetensors_load(f.h, "x", TLRT_DEVICE_CPU, &out) != TLRT_OK) continue;
        std::vector<float> got(v.size());
        if (tlrt_buffer_to_f32(out, got.data(), got.size()) == TLRT_OK && got == v) ++good;
        tlrt_buffer_free(out);
      }
      ok[t] = good;
    });
  for (auto &t : ts) t.join();
  for (int t = 0; t < 4; ++t) TH_CHECK(ok[t] == 20);
}

void test_fault_injection() {
  Buf b(th::upload({1, 2}));
  const char *names[] = {"x"};
  const tlrt_buffer *bufs[] = {b.get()};
  const std::string p = path_of("faults.safetensors");
  TH_OK(tlrt_safetensors_save(p.c_str(), 1, names, bufs, nullptr, nullptr, 0, nullptr, nullptr));
  File f(p);
  const tlrt_allocator_stats start = th::stats();
  for (uint64_t n = 1; n <= 2; ++n) {  // the payload, then the handle
    tlrt_buffer *out = reinterpret_cast<tlrt_buffer *>(uintptr_t{1});
    tlrt_debug_fail_nth_allocation(n);
    TH_STATUS(tlrt_safetensors_load(f.h, "x", TLRT_DEVICE_CPU, &out), TLRT_ERR_OUT_OF_MEMORY);
    TH_CHECK(tlrt_debug_fail_nth_allocation(0) == 0);
    TH_CHECK(out == nullptr);
    TH_CHECK(std::strstr(tlrt_last_error(), "injected") != nullptr);
  }
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK(end.live_bytes == start.live_bytes && end.live_handles == start.live_handles);
  Buf again;  // and the next call works
  TH_OK(tlrt_safetensors_load(f.h, "x", TLRT_DEVICE_CPU, again.out()));
}

void test_dtype_names() {
  const char *want[] = {"F32", "I32", "I64", "F16", "BF16", "F64", "BOOL", "U8", "I8", "I16",
                        "U16", "U32", "U64", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ",
                        "F8_E5M2FNUZ", "F4", "F6_E2M3", "F6_E3M2", "C64"};
  for (uint32_t i = 0; i < sizeof want / sizeof want[0]; ++i)
    TH_CHECK_MSG(std::strcmp(tlrt_safetensors_dtype_name(i), want[i]) == 0, "code %u: %s", i,
                 tlrt_safetensors_dtype_name(i));
  TH_CHECK(TLRT_SAFETENSORS_C64 == 21 && TLRT_SAFETENSORS_F32 == (uint32_t)TLRT_DTYPE_F32 &&
           TLRT_SAFETENSORS_I32 == (uint32_t)TLRT_DTYPE_I32 &&
           TLRT_SAFETENSORS_I64 == (uint32_t)TLRT_DTYPE_I64);
  TH_CHECK(std::strcmp(tlrt_safetensors_dtype_name(22), "UNKNOWN") == 0);
  TH_CHECK(std::strcmp(tlrt_safetensors_dtype_name(UINT32_MAX), "UNKNOWN") == 0);
}

void remove_dir(const std::string &dir) {
  DIR *d = ::opendir(dir.c_str());
  while (dirent *e = d ? ::readdir(d) : nullptr) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") ::unlink((dir + "/" + n).c_str());
  }
  if (d) ::closedir(d);
  ::rmdir(dir.c_str());
}

}  // namespace

int main() {
  const uint16_t probe = 1;
  if (*reinterpret_cast<const unsigned char *>(&probe) != 1) {
    std::printf("test_checkpoint: the hand-written files assume a little-endian host\n");
    return 77;
  }
  char tmpl[] = "/tmp/tlrt_checkpoint_XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::printf("test_checkpoint: mkdtemp failed\n");
    return 1;
  }
  g_dir = tmpl;
  const tlrt_allocator_stats start = th::stats();
  test_dtype_names();
  test_known_bytes();
  test_round_trips(TLRT_DEVICE_CPU);
  test_metadata_and_order();
  test_conversions(TLRT_DEVICE_CPU);
  test_atomic_write();
  test_concurrent_loads();
  test_fault_injection();
  if (th::cuda_ready()) {
    const tlrt_allocator_stats cuda_start = th::stats(TLRT_DEVICE_CUDA(0));
    test_round_trips(TLRT_DEVICE_CUDA(0));
    test_conversions(TLRT_DEVICE_CUDA(0));
    const tlrt_allocator_stats cuda_end = th::stats(TLRT_DEVICE_CUDA(0));
    TH_CHECK(cuda_end.live_bytes == cuda_start.live_bytes);
  }
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK_MSG(end.live_bytes == start.live_bytes && end.live_handles == start.live_handles,
               "leak: live bytes %llu -> %llu, handles %llu -> %llu",
               (unsigned long long)start.live_bytes, (unsigned long long)end.live_bytes,
               (unsigned long long)start.live_handles, (unsigned long long)end.live_handles);
  remove_dir(g_dir);
  return th::finish("test_checkpoint");
}
