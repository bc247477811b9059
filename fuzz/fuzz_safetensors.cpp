// libFuzzer target for the safetensors reader (abi/tlrt_checkpoint.h): the input is a file's
// bytes, written to a scratch file and opened with tlrt_safetensors_open, which parses and
// validates the header (core/checkpoint_json.cpp, core/checkpoint.cpp). The contract checked:
//   - open returns TLRT_OK or TLRT_ERR_FORMAT (nothing else can go wrong with a readable regular
//     file of this size), with the out-parameter NULL and a message naming the function and the
//     argument path on failure;
//   - on success the handle is consistent: names strictly ascending, every name found by info and
//     load, every dtype a known code, the byte sizes of the tensors (from their dtypes and shapes)
//     adding up to exactly the data after the header (the format's coverage rule), metadata keys
//     strictly ascending and each value found by its key;
//   - every loadable tensor (F32, I32, I64, F16, BF16, F64) loads into a buffer of its element
//     count and the right type; the others fail with TLRT_ERR_DTYPE;
//   - when every tensor is F32, I32 or I64, saving them again (names, shapes, metadata) and
//     reopening gives the same names, types, shapes, metadata and bits.
// Sanitizers (ASan/UBSan in the fuzz build, valgrind over the replay test) catch out-of-bounds
// reads in the parser. Built as a fuzzer with -Dfuzz=true (clang) and as the replay driver
// fuzz_replay_safetensors (meson suite 'fuzz'); the corpus (fuzz/corpus/safetensors) holds valid
// files of every loadable dtype and broken ones.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "torchlean_rt.h"

namespace {

[[noreturn]] void violated(const char *what, tlrt_status s) {
  std::fprintf(stderr, "contract violated: %s (status %s, last error: %s)\n", what,
               tlrt_status_string(s), tlrt_last_error());
  std::abort();
}

void expect(bool ok, const char *what) {
  if (!ok) violated(what, TLRT_OK);
}

// A scratch directory for this process: on tmpfs where there is one (/dev/shm), so that the
// files and the writer's fsync cost little. Removed at exit.
std::string g_scratch;

void remove_scratch() {
  for (const char *f : {"/input.safetensors", "/again.safetensors", "/again.safetensors.tmp"})
    ::unlink((g_scratch + f).c_str());
  ::rmdir(g_scratch.c_str());
}

const std::string &scratch() {
  if (g_scratch.empty()) {
    for (const char *base : {"/dev/shm", "/tmp"}) {
      std::string tmpl = std::string(base) + "/tlrt_fuzz_st_XXXXXX";
      if (::mkdtemp(&tmpl[0]) != nullptr) {
        g_scratch = tmpl;
        std::atexit(remove_scratch);
        return g_scratch;
      }
    }
    std::fprintf(stderr, "fuzz_safetensors: no scratch directory\n");
    std::abort();
  }
  return g_scratch;
}

bool write_input(const std::string &path, const uint8_t *data, size_t size) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = size == 0 || std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

struct Tensor {
  std::string name;
  uint32_t dtype = 0;
  std::vector<uint64_t> dims;
  tlrt_buffer *buffer = nullptr;  // loaded (F32, I32, I64 and the converted types)
};

uint32_t bits_of(uint32_t dtype) {
  switch (dtype) {
    case TLRT_SAFETENSORS_F4: return 4;
    case TLRT_SAFETENSORS_F6_E2M3:
    case TLRT_SAFETENSORS_F6_E3M2: return 6;
    case TLRT_SAFETENSORS_BOOL: case TLRT_SAFETENSORS_U8: case TLRT_SAFETENSORS_I8:
    case TLRT_SAFETENSORS_F8_E5M2: case TLRT_SAFETENSORS_F8_E4M3: case TLRT_SAFETENSORS_F8_E8M0:
    case TLRT_SAFETENSORS_F8_E4M3FNUZ: case TLRT_SAFETENSORS_F8_E5M2FNUZ: return 8;
    case TLRT_SAFETENSORS_F16: case TLRT_SAFETENSORS_BF16: case TLRT_SAFETENSORS_I16:
    case TLRT_SAFETENSORS_U16: return 16;
    case TLRT_SAFETENSORS_F32: case TLRT_SAFETENSORS_I32: case TLRT_SAFETENSORS_U32: return 32;
    default: return 64;
  }
}

bool loadable(uint32_t dtype) {
  return dtype <= TLRT_SAFETENSORS_F64;  // F32 I32 I64 F16 BF16 F64
}

// Everything a handle says, checked for consistency; buffers loaded where possible.
void read_all(tlrt_safetensors *h, std::vector<Tensor> &tensors,
              std::vector<std::pair<std::string, std::string>> &meta, uint64_t *data_bytes) {
  uint64_t count = 0, bytes = 0;
  tlrt_status s = tlrt_safetensors_count(h, &count);
  if (s != TLRT_OK) violated("count of an open file", s);
  for (uint64_t i = 0; i < count; ++i) {
    Tensor t;
    const char *name = nullptr;
    s = tlrt_safetensors_name(h, i, &name);
    if (s != TLRT_OK || name == nullptr) violated("name of an index below the count", s);
    t.name = name;
    if (!tensors.empty()) expect(tensors.back().name < t.name, "names strictly ascending");
    uint64_t dims[TLRT_SAFETENSORS_MAX_RANK];
    uint32_t rank = 0;
    s = tlrt_safetensors_info(h, name, &t.dtype, dims, TLRT_SAFETENSORS_MAX_RANK, &rank);
    if (s != TLRT_OK) violated("info of a listed name", s);
    expect(t.dtype <= TLRT_SAFETENSORS_C64, "a known dtype code");
    expect(rank <= TLRT_SAFETENSORS_MAX_RANK, "rank within the limit");
    t.dims.assign(dims, dims + rank);
    // Element count and bytes, in 128 bits (open guarantees they fit; check that too).
    unsigned __int128 elements = 1;
    bool zero = false;
    for (uint64_t d : t.dims) {
      zero = zero || d == 0;
      if (!zero) {
        elements *= d;
        expect(elements <= ((unsigned __int128)1 << 64), "element count fits 64 bits");
      }
    }
    if (zero) elements = 0;
    const unsigned __int128 nbits = elements * bits_of(t.dtype);
    expect(nbits % 8 == 0, "whole bytes");
    bytes += (uint64_t)(nbits / 8);
    tlrt_buffer *b = nullptr;
    s = tlrt_safetensors_load(h, name, TLRT_DEVICE_CPU, &b);
    if (loadable(t.dtype) && elements <= TLRT_MAX_ELEMENTS) {
      if (s != TLRT_OK) violated("load of a loadable tensor", s);
      uint64_t n = 0;
      tlrt_dtype type = TLRT_DTYPE_F32;
      expect(tlrt_buffer_size(b, &n) == TLRT_OK && n == (uint64_t)elements, "loaded size");
      expect(tlrt_buffer_dtype(b, &type) == TLRT_OK, "loaded dtype");
      expect(type == (t.dtype <= TLRT_SAFETENSORS_I64 ? (tlrt_dtype)t.dtype : TLRT_DTYPE_F32),
             "loaded element type");
      t.buffer = b;
    } else if (!loadable(t.dtype)) {
      if (s != TLRT_ERR_DTYPE || b != nullptr) violated("load of an unloadable dtype", s);
    } else if (s != TLRT_ERR_OVERFLOW || b != nullptr) {
      violated("load of more than TLRT_MAX_ELEMENTS elements", s);
    }
    tensors.push_back(std::move(t));
  }
  uint64_t mcount = 0;
  s = tlrt_safetensors_metadata_count(h, &mcount);
  if (s != TLRT_OK) violated("metadata count", s);
  for (uint64_t k = 0; k < mcount; ++k) {
    const char *key = nullptr, *value = nullptr;
    s = tlrt_safetensors_metadata_key(h, k, &key);
    if (s != TLRT_OK || key == nullptr) violated("metadata key below the count", s);
    if (!meta.empty()) expect(meta.back().first < key, "metadata keys strictly ascending");
    s = tlrt_safetensors_metadata(h, key, &value);
    if (s != TLRT_OK || value == nullptr) violated("metadata value of a listed key", s);
    meta.emplace_back(key, value);
  }
  *data_bytes = bytes;
}

std::vector<unsigned char> bytes_of(tlrt_buffer *b) {
  uint64_t n = 0;
  tlrt_dtype type = TLRT_DTYPE_F32;
  tlrt_buffer_size(b, &n);
  tlrt_buffer_dtype(b, &type);
  std::vector<unsigned char> out(n * (type == TLRT_DTYPE_I64 ? 8 : 4));
  if (type == TLRT_DTYPE_F32)
    tlrt_buffer_to_f32(b, reinterpret_cast<float *>(out.data()), n);
  else if (type == TLRT_DTYPE_I32)
    tlrt_buffer_to_i32(b, reinterpret_cast<int32_t *>(out.data()), n);
  else
    tlrt_buffer_to_i64(b, reinterpret_cast<int64_t *>(out.data()), n);
  return out;
}

void free_all(std::vector<Tensor> &ts) {
  for (Tensor &t : ts) tlrt_buffer_free(t.buffer);
  ts.clear();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string path = scratch() + "/input.safetensors";
  if (!write_input(path, data, size)) return 0;
  tlrt_safetensors *h = reinterpret_cast<tlrt_safetensors *>(uintptr_t{1});
  const tlrt_status s = tlrt_safetensors_open(path.c_str(), &h);
  if (s != TLRT_OK) {
    if (s != TLRT_ERR_FORMAT) violated("open: a status other than TLRT_OK / TLRT_ERR_FORMAT", s);
    if (h != nullptr) violated("open failed but out is not NULL", s);
    if (std::strncmp(tlrt_last_error(), "tlrt_safetensors_open: argument path", 36) != 0)
      violated("open's message does not name the function and path", s);
    return 0;
  }
  std::vector<Tensor> tensors;
  std::vector<std::pair<std::string, std::string>> meta;
  uint64_t data_bytes = 0;
  read_all(h, tensors, meta, &data_bytes);
  tlrt_safetensors_close(h);
  // The coverage rule: the tensors' bytes are exactly the data after the header.
  expect(size >= 8, "a file that opened has the length prefix");
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = n << 8 | data[k];
  expect(n <= size - 8 && data_bytes == size - 8 - n, "tensors cover the data exactly");

  // Round trip through the writer when every tensor was loaded as it is.
  bool native = true;
  for (const Tensor &t : tensors) native = native && t.dtype <= TLRT_SAFETENSORS_I64 && t.buffer;
  if (native) {
    std::vector<const char *> names, keys, values;
    std::vector<const tlrt_buffer *> bufs;
    std::vector<const uint64_t *> dims;
    std::vector<uint32_t> ranks;
    for (const Tensor &t : tensors) {
      names.push_back(t.name.c_str());
      bufs.push_back(t.buffer);
      dims.push_back(t.dims.data());
      ranks.push_back((uint32_t)t.dims.size());
    }
    for (const auto &kv : meta) {
      keys.push_back(kv.first.c_str());
      values.push_back(kv.second.c_str());
    }
    const std::string out = scratch() + "/again.safetensors";
    tlrt_status w = tlrt_safetensors_save(out.c_str(), tensors.size(), names.data(), bufs.data(),
                                          dims.data(), ranks.data(), meta.size(), keys.data(),
                                          values.data());
    // A header that grew past the format's limit through escaping is the one refusal possible.
    if (w != TLRT_OK && w != TLRT_ERR_OVERFLOW) violated("save of what was read", w);
    if (w == TLRT_OK) {
      tlrt_safetensors *g = nullptr;
      w = tlrt_safetensors_open(out.c_str(), &g);
      if (w != TLRT_OK) violated("open of what the writer wrote", w);
      std::vector<Tensor> again;
      std::vector<std::pair<std::string, std::string>> meta2;
      uint64_t bytes2 = 0;
      read_all(g, again, meta2, &bytes2);
      tlrt_safetensors_close(g);
      expect(again.size() == tensors.size() && meta2 == meta && bytes2 == data_bytes,
             "round trip: the same entries");
      for (size_t i = 0; i < again.size() && i < tensors.size(); ++i) {
        expect(again[i].name == tensors[i].name && again[i].dtype == tensors[i].dtype &&
                   again[i].dims == tensors[i].dims,
               "round trip: the same names, dtypes and shapes");
        expect(bytes_of(again[i].buffer) == bytes_of(tensors[i].buffer),
               "round trip: the same bits");
      }
      free_all(again);
    }
    ::unlink(out.c_str());
  }
  free_all(tensors);
  return 0;
}

#ifdef TLRT_FUZZ_REPLAY
#include "replay_main.hpp"
#endif
