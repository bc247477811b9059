// Checkpoints in the safetensors format (abi/tlrt_checkpoint.h): tlrt_safetensors_save writes
// buffers of any device through a ".tmp" file renamed into place; tlrt_safetensors_open validates
// a file's whole header (core/checkpoint_json.cpp parses it) into a handle of a handle table
// (core/handle_table.hpp), and tlrt_safetensors_load reads one tensor with pread into a new buffer.
// No backend code: device buffers move through the memory backend's upload / download, in host
// pieces of at most kPieceBytes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "abi/tlrt_checkpoint.h"
#include "core/backend/memory.hpp"
#include "core/buffer.hpp"
#include "core/checkpoint_json.hpp"
#include "core/error.hpp"
#include "core/handle_table.hpp"

namespace tlrt {
namespace {

using ull = unsigned long long;

constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
// The reference implementation's limit on the header (larger headers are refused as a defence
// against files built to exhaust memory); the writer keeps to it too.
constexpr uint64_t kMaxHeaderBytes = 100000000;
// Host staging of device transfers and conversions: at most this many bytes per piece (a
// multiple of every element size).
constexpr uint64_t kPieceBytes = uint64_t{16} << 20;

// ---- dtypes -------------------------------------------------------------------------------------

struct DtypeInfo {
  const char *name;
  uint32_t code;  // TLRT_SAFETENSORS_*
  uint32_t bits;  // per element
};

// Indexed by code.
constexpr DtypeInfo kDtypes[] = {
    {"F32", TLRT_SAFETENSORS_F32, 32},
    {"I32", TLRT_SAFETENSORS_I32, 32},
    {"I64", TLRT_SAFETENSORS_I64, 64},
    {"F16", TLRT_SAFETENSORS_F16, 16},
    {"BF16", TLRT_SAFETENSORS_BF16, 16},
    {"F64", TLRT_SAFETENSORS_F64, 64},
    {"BOOL", TLRT_SAFETENSORS_BOOL, 8},
    {"U8", TLRT_SAFETENSORS_U8, 8},
    {"I8", TLRT_SAFETENSORS_I8, 8},
    {"I16", TLRT_SAFETENSORS_I16, 16},
    {"U16", TLRT_SAFETENSORS_U16, 16},
    {"U32", TLRT_SAFETENSORS_U32, 32},
    {"U64", TLRT_SAFETENSORS_U64, 64},
    {"F8_E5M2", TLRT_SAFETENSORS_F8_E5M2, 8},
    {"F8_E4M3", TLRT_SAFETENSORS_F8_E4M3, 8},
    {"F8_E8M0", TLRT_SAFETENSORS_F8_E8M0, 8},
    {"F8_E4M3FNUZ", TLRT_SAFETENSORS_F8_E4M3FNUZ, 8},
    {"F8_E5M2FNUZ", TLRT_SAFETENSORS_F8_E5M2FNUZ, 8},
    {"F4", TLRT_SAFETENSORS_F4, 4},
    {"F6_E2M3", TLRT_SAFETENSORS_F6_E2M3, 6},
    {"F6_E3M2", TLRT_SAFETENSORS_F6_E3M2, 6},
    {"C64", TLRT_SAFETENSORS_C64, 64},
};
constexpr uint32_t kDtypeCount = sizeof kDtypes / sizeof kDtypes[0];
constexpr bool dtypes_indexed_by_code() {
  for (uint32_t i = 0; i < kDtypeCount; ++i)
    if (kDtypes[i].code != i) return false;
  return true;
}
static_assert(dtypes_indexed_by_code(), "kDtypes[code].code == code");

const DtypeInfo *dtype_by_name(const std::string &s) {
  for (const DtypeInfo &d : kDtypes)
    if (s == d.name) return &d;
  return nullptr;
}

uint32_t code_of(tlrt_dtype t) {
  switch (t) {
    case TLRT_DTYPE_F32: return TLRT_SAFETENSORS_F32;
    case TLRT_DTYPE_I32: return TLRT_SAFETENSORS_I32;
    case TLRT_DTYPE_I64: return TLRT_SAFETENSORS_I64;
  }
  fail(TLRT_ERR_INTERNAL, "a buffer of unknown element type %d", (int)t);
}

// The position of a type in the reference writer's order (its Dtype enum, descending: I64, F32,
// I32 among the types written here).
int write_order(uint32_t code) {
  return code == TLRT_SAFETENSORS_I64 ? 0 : code == TLRT_SAFETENSORS_F32 ? 1 : 2;
}

// ---- little-endian values and conversions -------------------------------------------------------

inline uint16_t load_le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
inline uint32_t load_le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
inline uint64_t load_le64(const unsigned char *p) {
  return (uint64_t)load_le32(p) | (uint64_t)load_le32(p + 4) << 32;
}

// IEEE binary16 -> the binary32 of the same value (exact: every binary16 is a binary32). NaNs
// keep their sign and payload (shifted to the top of the binary32 significand).
inline uint32_t f16_to_f32_bits(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return sign | 0x7F800000u | mant << 13;  // infinities and NaNs
  if (exp != 0) return sign | (exp + 112u) << 23 | mant << 13;  // 127 - 15 = 112
  if (mant == 0) return sign;                                  // signed zeros
  // A subnormal mant * 2^-24: shift its leading one to bit 10 (the implicit bit of a normal).
  uint32_t shift = 0;
  while (!(mant & 0x400u)) {
    mant <<= 1;
    ++shift;
  }
  return sign | (113u - shift) << 23 | (mant & 0x3FFu) << 13;
}

// Converts k elements of a file dtype at src (little-endian) to the host's representation of the
// loaded type at dst (float32 for F16, BF16 and F64; the same type otherwise). dst may equal src
// when the widths are equal (the same type).
void convert(uint32_t code, const unsigned char *src, unsigned char *dst, uint64_t k) {
  switch (code) {
    case TLRT_SAFETENSORS_F32:
    case TLRT_SAFETENSORS_I32:
      if (kLittleEndian) {
        if (dst != src) std::memcpy(dst, src, k * 4);
      } else {
        for (uint64_t j = 0; j < k; ++j) {
          const uint32_t v = load_le32(src + 4 * j);
          std::memcpy(dst + 4 * j, &v, 4);
        }
      }
      return;
    case TLRT_SAFETENSORS_I64:
      if (kLittleEndian) {
        if (dst != src) std::memcpy(dst, src, k * 8);
      } else {
        for (uint64_t j = 0; j < k; ++j) {
          const uint64_t v = load_le64(src + 8 * j);
          std::memcpy(dst + 8 * j, &v, 8);
        }
      }
      return;
    case TLRT_SAFETENSORS_F16:
      for (uint64_t j = 0; j < k; ++j) {
        const uint32_t v = f16_to_f32_bits(load_le16(src + 2 * j));
        std::memcpy(dst + 4 * j, &v, 4);
      }
      return;
    case TLRT_SAFETENSORS_BF16:
      for (uint64_t j = 0; j < k; ++j) {
        const uint32_t v = (uint32_t)load_le16(src + 2 * j) << 16;
        std::memcpy(dst + 4 * j, &v, 4);
      }
      return;
    case TLRT_SAFETENSORS_F64:
      for (uint64_t j = 0; j < k; ++j) {
        const uint64_t u = load_le64(src + 8 * j);
        double d;
        std::memcpy(&d, &u, 8);
        const float f = static_cast<float>(d);  // round to nearest, ties to even
        std::memcpy(dst + 4 * j, &f, 4);
      }
      return;
  }
  fail(TLRT_ERR_INTERNAL, "no conversion for dtype code %u", code);
}

// The element bytes of k host values of a buffer type as the file stores them (little-endian).
void to_little_endian(unsigned char *p, uint64_t k, uint32_t size) {
  if (kLittleEndian) return;
  for (uint64_t j = 0; j < k; ++j) std::reverse(p + size * j, p + size * (j + 1));
}

// ---- files --------------------------------------------------------------------------------------

// strerror_r in either of its two forms (GNU returns the text, XSI fills the buffer).
[[maybe_unused]] const char *pick_error(int r, const char *buf) {
  return r == 0 ? buf : "unknown error";
}
[[maybe_unused]] const char *pick_error(const char *r, const char *) { return r; }

std::string sys_error(int e) {
  char buf[256] = "";
  return pick_error(strerror_r(e, buf, sizeof buf), buf);
}

[[noreturn]] void io_fail(const char *what, const std::string &path, int e) {
  fail(TLRT_ERR_IO, "argument path (\"%s\"): %s: %s", path.c_str(), what, sys_error(e).c_str());
}

void write_all(int fd, const void *data, uint64_t n, const std::string &path) {
  const char *p = static_cast<const char *>(data);
  while (n > 0) {
    const size_t step = (size_t)std::min<uint64_t>(n, uint64_t{1} << 30);
    const ssize_t w = ::write(fd, p, step);
    if (w < 0) {
      if (errno == EINTR) continue;
      io_fail("writing failed", path, errno);
    }
    p += w;
    n -= (uint64_t)w;
  }
}

// ---- the handle ---------------------------------------------------------------------------------

struct Entry {
  std::string name;
  uint32_t code = 0;            // TLRT_SAFETENSORS_*
  std::vector<uint64_t> shape;
  uint64_t elements = 0;
  uint64_t begin = 0, end = 0;  // within the data
};

struct File {
  int fd = -1;
  std::string path;
  uint64_t data_start = 0;  // 8 + header length
  uint64_t data_bytes = 0;
  std::vector<Entry> entries;                                  // by name
  std::vector<std::pair<std::string, std::string>> metadata;  // by key

  File() = default;
  File(const File &) = delete;
  File &operator=(const File &) = delete;
  ~File() {
    if (fd >= 0) ::close(fd);
  }
};

struct Slot {
  std::unique_ptr<File> file;
};

using Table = HandleTable<Slot>;

// Allocated once and never destroyed: a host may close files from static destructors.
Table &table() {
  static Table *t = new Table;
  return *t;
}

uint64_t token_of(const tlrt_safetensors *f) { return reinterpret_cast<uintptr_t>(f); }

const File &file_ref(const tlrt_safetensors *f) {
  if (f == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument file is NULL");
  Table::Slot *slot = table().find(token_of(f));
  if (slot == nullptr || !slot->object.file)
    fail(TLRT_ERR_STALE_HANDLE,
         "argument file is not an open tlrt_safetensors (closed, or never one)");
  return *slot->object.file;
}

void check_name_arg(const char *s, const char *arg) {
  if (s == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL", arg);
}

const Entry &entry_of(const File &f, const char *name) {
  check_name_arg(name, "name");
  const auto it = std::lower_bound(f.entries.begin(), f.entries.end(), name,
                                   [](const Entry &e, const char *n) { return e.name < n; });
  if (it == f.entries.end() || it->name != name)
    fail(TLRT_ERR_INDEX, "argument name: the file has no tensor \"%s\"", name);
  return *it;
}

// Reads exactly n bytes at offset `at` of the file.
void read_at(const File &f, uint64_t at, void *dst, uint64_t n) {
  char *p = static_cast<char *>(dst);
  while (n > 0) {
    const size_t step = (size_t)std::min<uint64_t>(n, uint64_t{1} << 30);
    const ssize_t r = ::pread(f.fd, p, step, (off_t)at);
    if (r < 0) {
      if (errno == EINTR) continue;
      io_fail("reading failed", f.path, errno);
    }
    if (r == 0)
      fail(TLRT_ERR_IO, "argument path (\"%s\"): the file ends at byte %llu, before the data its "
           "header describes (was it shortened since it was opened?)", f.path.c_str(), (ull)at);
    p += r;
    at += (uint64_t)r;
    n -= (uint64_t)r;
  }
}

// ---- save ---------------------------------------------------------------------------------------

struct Item {
  std::string name;
  const Buffer *buffer = nullptr;
  uint32_t code = 0;
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;
};

// A file being written: closed and removed unless committed.
struct TmpFile {
  int fd = -1;
  std::string path;
  bool committed = false;
  ~TmpFile() {
    if (fd >= 0) ::close(fd);
    if (!committed) ::unlink(path.c_str());
  }
};

// fsync of the directory holding path, so that the rename survives a crash (best effort: some
// file systems refuse fsync on a directory, and the file itself is already complete).
void sync_directory(const std::string &path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0              ? "/"
                                                    : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

void write_tensor(int fd, const Item &it, const std::string &path) {
  const Buffer &b = *it.buffer;
  if (it.bytes == 0) return;
  const uint32_t size = (uint32_t)dtype_size(b.dtype);
  if (!b.dev.cuda && kLittleEndian) {  // the payload is the file's bytes
    write_all(fd, b.data, it.bytes, path);
    return;
  }
  std::vector<unsigned char> piece((size_t)std::min(it.bytes, kPieceBytes));
  for (uint64_t off = 0; off < it.bytes; off += kPieceBytes) {
    const uint64_t len = std::min(kPieceBytes, it.bytes - off);
    TLRT_DISPATCH(b.dev, download, b.dev.ordinal, piece.data(),
                  reinterpret_cast<const char *>(b.data) + off, len);
    to_little_endian(piece.data(), len / size, size);
    write_all(fd, piece.data(), len, path);
  }
}

void save(const char *path, uint64_t count, const char *const *names,
          const tlrt_buffer *const *buffers, const uint64_t *const *dims, const uint32_t *ranks,
          uint64_t meta_count, const char *const *meta_keys, const char *const *meta_values) {
  if (path == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument path is NULL");
  if (*path == '\0') fail(TLRT_ERR_INVALID_ARGUMENT, "argument path is empty");
  if (count > 0 && names == nullptr)
    fail(TLRT_ERR_NULL_ARGUMENT, "argument names is NULL with count = %llu", (ull)count);
  if (count > 0 && buffers == nullptr)
    fail(TLRT_ERR_NULL_ARGUMENT, "argument buffers is NULL with count = %llu", (ull)count);
  if (meta_count > 0 && meta_keys == nullptr)
    fail(TLRT_ERR_NULL_ARGUMENT, "argument meta_keys is NULL with meta_count = %llu",
         (ull)meta_count);
  if (meta_count > 0 && meta_values == nullptr)
    fail(TLRT_ERR_NULL_ARGUMENT, "argument meta_values is NULL with meta_count = %llu",
         (ull)meta_count);

  // The tensors, checked one by one.
  std::vector<Item> items;
  std::map<std::string, uint64_t> seen;
  for (uint64_t i = 0; i < count; ++i) {
    if (names[i] == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument names[%llu] is NULL", (ull)i);
    Item it;
    it.name = names[i];
    if (!st::valid_utf8(it.name.data(), it.name.size()))
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument names[%llu] is not valid UTF-8", (ull)i);
    if (it.name == "__metadata__")
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument names[%llu] is \"__metadata__\", the format's key "
           "of the metadata", (ull)i);
    const auto dup = seen.emplace(it.name, i);
    if (!dup.second)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument names: names[%llu] = \"%s\" repeats names[%llu]",
           (ull)i, names[i], (ull)dup.first->second);
    char arg[48];
    std::snprintf(arg, sizeof arg, "buffers[%llu]", (ull)i);
    const Buffer &b = input_any(buffers[i], arg);
    const uint32_t rank = ranks == nullptr ? 1u : ranks[i];
    if (rank > TLRT_SAFETENSORS_MAX_RANK)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument ranks[%llu] = %u exceeds TLRT_SAFETENSORS_MAX_RANK "
           "(%u)", (ull)i, rank, TLRT_SAFETENSORS_MAX_RANK);
    const uint64_t *d = dims == nullptr ? nullptr : dims[i];
    if (d == nullptr && rank > 1)
      fail(TLRT_ERR_NULL_ARGUMENT, "argument dims[%llu] is NULL with ranks[%llu] = %u", (ull)i,
           (ull)i, rank);
    if (d == nullptr) {
      if (rank == 1) it.shape.push_back(b.size);
    } else {
      it.shape.assign(d, d + rank);
    }
    uint64_t product = 1;
    bool fits = true, zero = false;
    for (const uint64_t v : it.shape) {
      zero = zero || v == 0;
      if (v != 0 && product > UINT64_MAX / v) fits = false;
      product *= v;
    }
    if (zero) product = 0, fits = true;
    if (!fits || product != b.size)
      fail(TLRT_ERR_SHAPE, "argument dims: dims[%llu] describe %s elements, buffers[%llu] has %llu",
           (ull)i, fits ? std::to_string(product).c_str() : "more than 2^64", (ull)i,
           (ull)b.size);
    it.buffer = &b;
    it.code = code_of(b.dtype);
    it.bytes = b.bytes();
    items.push_back(std::move(it));
  }

  // The metadata.
  std::map<std::string, std::string> meta;
  for (uint64_t k = 0; k < meta_count; ++k) {
    if (meta_keys[k] == nullptr)
      fail(TLRT_ERR_NULL_ARGUMENT, "argument meta_keys[%llu] is NULL", (ull)k);
    if (meta_values[k] == nullptr)
      fail(TLRT_ERR_NULL_ARGUMENT, "argument meta_values[%llu] is NULL", (ull)k);
    std::string key = meta_keys[k], value = meta_values[k];
    if (!st::valid_utf8(key.data(), key.size()))
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument meta_keys[%llu] is not valid UTF-8", (ull)k);
    if (!st::valid_utf8(value.data(), value.size()))
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument meta_values[%llu] is not valid UTF-8", (ull)k);
    if (!meta.emplace(std::move(key), std::move(value)).second)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument meta_keys: meta_keys[%llu] = \"%s\" appears twice",
           (ull)k, meta_keys[k]);
  }

  // The reference writer's order, and the header.
  std::sort(items.begin(), items.end(), [](const Item &a, const Item &b) {
    const int oa = write_order(a.code), ob = write_order(b.code);
    return oa != ob ? oa < ob : a.name < b.name;
  });
  std::string header = "{";
  if (!meta.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto &kv : meta) {
      if (!first) header += ',';
      first = false;
      st::append_json_string(header, kv.first);
      header += ':';
      st::append_json_string(header, kv.second);
    }
    header += '}';
  }
  uint64_t offset = 0;
  for (const Item &it : items) {
    if (header.size() > 1) header += ',';
    st::append_json_string(header, it.name);
    header += ":{\"dtype\":\"";
    header += kDtypes[it.code].name;
    header += "\",\"shape\":[";
    for (size_t k = 0; k < it.shape.size(); ++k) {
      if (k) header += ',';
      header += std::to_string(it.shape[k]);
    }
    header += "],\"data_offsets\":[";
    header += std::to_string(offset);
    header += ',';
    offset = checked_add(offset, it.bytes, "the data's size in bytes");
    header += std::to_string(offset);
    header += "]}";
    if (header.size() > kMaxHeaderBytes) break;  // refused below
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxHeaderBytes)
    fail(TLRT_ERR_OVERFLOW, "the header would exceed the format's limit of %llu bytes (the names "
         "and metadata are too long)", (ull)kMaxHeaderBytes);

  // Write path.tmp, flush it, rename it over path. A path.tmp left by a crash is removed first
  // (a symbolic link there too, never followed), and ours is created exclusively.
  TmpFile tmp;
  tmp.path = std::string(path) + ".tmp";
  ::unlink(tmp.path.c_str());
  tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (tmp.fd < 0) {
    const int e = errno;
    tmp.committed = true;  // nothing of ours to remove
    io_fail(("cannot create \"" + tmp.path + "\"").c_str(), path, e);
  }
  unsigned char length[8];
  for (int k = 0; k < 8; ++k) length[k] = (unsigned char)((uint64_t)header.size() >> (8 * k));
  write_all(tmp.fd, length, 8, path);
  write_all(tmp.fd, header.data(), header.size(), path);
  for (const Item &it : items) write_tensor(tmp.fd, it, path);
  if (::fsync(tmp.fd) != 0) io_fail("flushing to the disk (fsync) failed", path, errno);
  const int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0) io_fail("closing the written file failed", path, errno);
  if (::rename(tmp.path.c_str(), path) != 0)
    io_fail(("renaming \"" + tmp.path + "\" to it failed").c_str(), path, errno);
  tmp.committed = true;
  sync_directory(path);
}

// ---- open ---------------------------------------------------------------------------------------

[[noreturn]] void bad_file(const char *path, const std::string &what) {
  fail(TLRT_ERR_FORMAT, "argument path (\"%s\"): %s", path, what.c_str());
}

std::string str(uint64_t v) { return std::to_string(v); }

// "tensor "w": data_offsets [0, 16]", the start of most messages about one entry.
std::string about(const std::string &name, uint64_t begin, uint64_t end) {
  return "tensor \"" + name + "\": data_offsets [" + str(begin) + ", " + str(end) + "]";
}

std::unique_ptr<File> open_file(const char *path) {
  if (path == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument path is NULL");
  if (*path == '\0') fail(TLRT_ERR_INVALID_ARGUMENT, "argument path is empty");
  std::unique_ptr<File> f(new File);
  f->path = path;
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below; reads of a
  // regular file are not affected).
  f->fd = ::open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f->fd < 0) io_fail("cannot open it", f->path, errno);
  struct stat st;
  if (::fstat(f->fd, &st) != 0) io_fail("fstat failed", f->path, errno);
  if (!S_ISREG(st.st_mode)) fail(TLRT_ERR_IO, "argument path (\"%s\"): not a regular file", path);
  const uint64_t size = (uint64_t)st.st_size;

  // From here on every defect is the file's: TLRT_ERR_FORMAT, "argument path ("..."): ...".
  if (size < 8)
    bad_file(path, "the file has " + str(size) + " bytes, fewer than the 8 of the header "
             "length: not a safetensors file");
  unsigned char length[8];
  read_at(*f, 0, length, 8);
  const uint64_t n = load_le64(length);
  if (n > kMaxHeaderBytes)
    bad_file(path, "the header length " + str(n) + " exceeds the format's limit of " +
             str(kMaxHeaderBytes) + " bytes");
  if (n > size - 8)
    bad_file(path, "the header length " + str(n) + " runs past the end of the file (" +
             str(size) + " bytes): truncated, or not a safetensors file");
  std::string text((size_t)n, '\0');
  read_at(*f, 8, &text[0], n);
  st::Header h;
  try {
    h = st::parse_header(text.data(), text.size(), TLRT_SAFETENSORS_MAX_RANK);
  } catch (Error &e) {
    bad_file(path, e.message);
  }
  f->data_start = 8 + n;
  f->data_bytes = size - 8 - n;

  // Every tensor's dtype, element count and byte range.
  f->entries.reserve(h.tensors.size());
  for (st::HeaderTensor &t : h.tensors) {
    const std::string tensor = "tensor \"" + t.name + "\": ";
    const DtypeInfo *d = dtype_by_name(t.dtype);
    if (d == nullptr) bad_file(path, tensor + "unknown dtype \"" + t.dtype + "\"");
    uint64_t elements = 1;
    bool zero = false, fits = true;
    for (const uint64_t v : t.shape) {
      zero = zero || v == 0;
      if (v != 0 && elements > UINT64_MAX / v) fits = false;
      elements *= v;
    }
    if (zero) elements = 0, fits = true;
    if (!fits || elements > UINT64_MAX / d->bits)
      bad_file(path, tensor + "its shape has more than 2^64 bits of " + d->name);
    const uint64_t bits = elements * d->bits;
    if (bits % 8 != 0)
      bad_file(path, tensor + str(elements) + " elements of " + d->name + " are not a whole "
               "number of bytes");
    if (t.end < t.begin) bad_file(path, about(t.name, t.begin, t.end) + " end before they begin");
    if (t.end - t.begin != bits / 8)
      bad_file(path, about(t.name, t.begin, t.end) + " hold " + str(t.end - t.begin) +
               " bytes, its shape of " + d->name + " needs " + str(bits / 8));
    if (t.end > f->data_bytes)
      bad_file(path, about(t.name, t.begin, t.end) + " run past the end of the data (" +
               str(f->data_bytes) + " bytes): the file is truncated");
    Entry e;
    e.name = std::move(t.name);
    e.code = d->code;
    e.shape = std::move(t.shape);
    e.elements = elements;
    e.begin = t.begin;
    e.end = t.end;
    f->entries.push_back(std::move(e));
  }

  // The byte ranges cover the data exactly: in order of offsets, each begins where the one before
  // ended, and the last ends at the end of the file.
  std::vector<const Entry *> by_offset;
  by_offset.reserve(f->entries.size());
  for (const Entry &e : f->entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry *a, const Entry *b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const Entry *previous = nullptr;
  for (const Entry *e : by_offset) {
    if (e->begin < covered)
      bad_file(path, about(e->name, e->begin, e->end) + " overlap those of tensor \"" +
               previous->name + "\"");
    if (e->begin > covered)
      bad_file(path, about(e->name, e->begin, e->end) + " leave the bytes [" + str(covered) +
               ", " + str(e->begin) + ") of the data to no tensor (a gap)");
    covered = e->end;
    previous = e;
  }
  if (covered != f->data_bytes)
    bad_file(path, "the tensors end at byte " + str(covered) + " of the data, which has " +
             str(f->data_bytes) + " bytes: the rest belongs to no tensor");

  std::sort(f->entries.begin(), f->entries.end(),
            [](const Entry &a, const Entry &b) { return a.name < b.name; });
  f->metadata = std::move(h.metadata);
  std::sort(f->metadata.begin(), f->metadata.end());
  return f;
}

// ---- load ---------------------------------------------------------------------------------------

void load(const tlrt_safetensors *file, const char *name, tlrt_device device, tlrt_buffer **out) {
  clear_out(out, "out");
  const File &f = file_ref(file);
  const Entry &e = entry_of(f, name);
  tlrt_dtype type;
  switch (e.code) {
    case TLRT_SAFETENSORS_I32: type = TLRT_DTYPE_I32; break;
    case TLRT_SAFETENSORS_I64: type = TLRT_DTYPE_I64; break;
    case TLRT_SAFETENSORS_F32:
    case TLRT_SAFETENSORS_F16:
    case TLRT_SAFETENSORS_BF16:
    case TLRT_SAFETENSORS_F64: type = TLRT_DTYPE_F32; break;
    default:
      fail(TLRT_ERR_DTYPE, "argument name: tensor \"%s\" is %s, which this library does not load "
           "(F32, I32, I64, F16, BF16 and F64 are loaded)", name, kDtypes[e.code].name);
  }
  const Dev dev = resolve_device(device, "device");
  if (e.elements > TLRT_MAX_ELEMENTS)
    fail(TLRT_ERR_OVERFLOW, "argument name: tensor \"%s\" has %llu elements, more than "
         "TLRT_MAX_ELEMENTS (2^60)", name, (ull)e.elements);
  const uint64_t n = e.elements;
  Owned b = new_buffer(dev, n, type);
  if (n != 0) {
    const uint64_t in_size = kDtypes[e.code].bits / 8, out_size = dtype_size(type);
    const bool same = in_size == out_size;  // F32, I32, I64: no conversion
    unsigned char *dst = reinterpret_cast<unsigned char *>(b->data);
    const uint64_t start = f.data_start + e.begin;
    if (same && !dev.cuda && kLittleEndian) {
      read_at(f, start, dst, n * in_size);  // straight into the payload
    } else {
      const uint64_t per = kPieceBytes / 8;  // elements per piece
      const uint64_t first = std::min(per, n);
      std::vector<unsigned char> raw((size_t)(first * in_size));
      std::vector<unsigned char> converted(dev.cuda && !same ? (size_t)(first * out_size) : 0);
      for (uint64_t i = 0; i < n; i += per) {
        const uint64_t k = std::min(per, n - i);
        read_at(f, start + i * in_size, raw.data(), k * in_size);
        unsigned char *target = !dev.cuda ? dst + i * out_size
                                : same    ? raw.data()
                                          : converted.data();
        convert(e.code, raw.data(), target, k);
        if (dev.cuda)
          TLRT_DISPATCH(dev, upload, dev.ordinal, dst + i * out_size, target, k * out_size);
      }
    }
  }
  *out = b.release();
}

}  // namespace
}  // namespace tlrt

using namespace tlrt;

extern "C" {

TLRT_API const char *tlrt_safetensors_dtype_name(uint32_t dtype) {
  return dtype < kDtypeCount ? kDtypes[dtype].name : "UNKNOWN";
}

TLRT_API tlrt_status tlrt_safetensors_save(const char *path, uint64_t count,
                                           const char *const *names,
                                           const tlrt_buffer *const *buffers,
                                           const uint64_t *const *dims, const uint32_t *ranks,
                                           uint64_t meta_count, const char *const *meta_keys,
                                           const char *const *meta_values) {
  return guarded(__func__, [&] {
    save(path, count, names, buffers, dims, ranks, meta_count, meta_keys, meta_values);
  });
}

TLRT_API tlrt_status tlrt_safetensors_open(const char *path, tlrt_safetensors **out) {
  return guarded(__func__, [&] {
    clear_out(out, "out");
    std::unique_ptr<File> f = open_file(path);
    Table::Slot *slot = nullptr;
    const uint64_t token = table().create(&slot);
    if (token == 0)
      fail(TLRT_ERR_OUT_OF_MEMORY, "out of host memory allocating a tlrt_safetensors handle");
    slot->object.file = std::move(f);
    *out = reinterpret_cast<tlrt_safetensors *>(static_cast<uintptr_t>(token));
  });
}

TLRT_API void tlrt_safetensors_close(tlrt_safetensors *file) {
  if (file == nullptr) return;
  Table::Slot *slot = table().find(token_of(file));
  if (slot == nullptr) return;
  std::unique_ptr<File> f = std::move(slot->object.file);
  table().destroy(token_of(file));
  // f's destructor closes the file and frees the strings.
}

TLRT_API tlrt_status tlrt_safetensors_count(const tlrt_safetensors *file, uint64_t *count) {
  return guarded(__func__, [&] {
    clear_out_value(count, "count");
    *count = file_ref(file).entries.size();
  });
}

TLRT_API tlrt_status tlrt_safetensors_name(const tlrt_safetensors *file, uint64_t index,
                                           const char **name) {
  return guarded(__func__, [&] {
    clear_out(name, "name");
    const File &f = file_ref(file);
    if (index >= f.entries.size())
      fail(TLRT_ERR_INDEX, "argument index = %llu, but the file has %llu tensors", (ull)index,
           (ull)f.entries.size());
    *name = f.entries[index].name.c_str();
  });
}

TLRT_API tlrt_status tlrt_safetensors_info(const tlrt_safetensors *file, const char *name,
                                           uint32_t *dtype, uint64_t *dims, uint32_t capacity,
                                           uint32_t *rank) {
  if (dims != nullptr)
    for (uint32_t k = 0; k < capacity; ++k) dims[k] = 0;
  if (dtype != nullptr) *dtype = 0;
  if (rank != nullptr) *rank = 0;
  return guarded(__func__, [&] {
    clear_out_value(dtype, "dtype");
    clear_out_value(rank, "rank");
    if (dims == nullptr && capacity > 0)
      fail(TLRT_ERR_NULL_ARGUMENT, "argument dims is NULL with capacity = %u", capacity);
    const File &f = file_ref(file);
    const Entry &e = entry_of(f, name);
    const bool query = dims == nullptr && capacity == 0;  // the dtype and rank only
    if (!query && e.shape.size() > capacity)
      fail(TLRT_ERR_SHAPE, "argument capacity = %u, but tensor \"%s\" has rank %llu", capacity,
           name, (ull)e.shape.size());
    if (!query)
      for (size_t k = 0; k < e.shape.size(); ++k) dims[k] = e.shape[k];
    *dtype = e.code;
    *rank = (uint32_t)e.shape.size();
  });
}

TLRT_API tlrt_status tlrt_safetensors_load(const tlrt_safetensors *file, const char *name,
                                           tlrt_device device, tlrt_buffer **out) {
  return guarded(__func__, [&] { load(file, name, device, out); });
}

TLRT_API tlrt_status tlrt_safetensors_metadata_count(const tlrt_safetensors *file,
                                                     uint64_t *count) {
  return guarded(__func__, [&] {
    clear_out_value(count, "count");
    *count = file_ref(file).metadata.size();
  });
}

TLRT_API tlrt_status tlrt_safetensors_metadata_key(const tlrt_safetensors *file, uint64_t index,
                                                   const char **key) {
  return guarded(__func__, [&] {
    clear_out(key, "key");
    const File &f = file_ref(file);
    if (index >= f.metadata.size())
      fail(TLRT_ERR_INDEX, "argument index = %llu, but the file has %llu metadata entries",
           (ull)index, (ull)f.metadata.size());
    *key = f.metadata[index].first.c_str();
  });
}

TLRT_API tlrt_status tlrt_safetensors_metadata(const tlrt_safetensors *file, const char *key,
                                               const char **value) {
  return guarded(__func__, [&] {
    clear_out(value, "value");
    const File &f = file_ref(file);
    check_name_arg(key, "key");
    const auto it = std::lower_bound(
        f.metadata.begin(), f.metadata.end(), key,
        [](const std::pair<std::string, std::string> &kv, const char *k) { return kv.first < k; });
    if (it == f.metadata.end() || it->first != key)
      fail(TLRT_ERR_INDEX, "argument key: the file has no metadata entry \"%s\"", key);
    *value = it->second.c_str();
  });
}

}  // extern "C"
