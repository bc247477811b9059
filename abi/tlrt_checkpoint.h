/* libtorchlean_rt: checkpoints in the safetensors format.
 *
 * The format is Hugging Face's safetensors (https://github.com/huggingface/safetensors), which
 * PyTorch, NumPy, JAX and the Hugging Face Hub read and write:
 *   - 8 bytes: N, the header's length, an unsigned 64-bit little-endian integer;
 *   - N bytes: the header, UTF-8 JSON: one object mapping each tensor's name to
 *     {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, plus an optional
 *     "__metadata__" object of string keys to string values; it may end in spaces (writers pad it
 *     to a multiple of 8 bytes, so that the data starts aligned);
 *   - the data: every tensor's elements, little-endian, row-major (the last axis fastest), at
 *     [begin, end) counted from the first byte after the header. The tensors cover the data
 *     exactly: no gap, no overlap, nothing after the last one.
 * A tensor of rank 0 (shape []) is a scalar of one element; an axis of 0 makes it empty (no bytes).
 *
 * Element types. The library's buffers hold float32, int32 or int64 (tlrt_buffer.h), and files
 * are written in those ("F32", "I32", "I64"). Reading understands every dtype of the format (the
 * TLRT_SAFETENSORS_* codes below); tlrt_safetensors_load gives F32 / I32 / I64 as buffers of
 * that type, and converts F16, BF16 and F64 to float32 (F16 and BF16 exactly, F64 rounded to the
 * nearest float32, ties to even) so that half-precision PyTorch checkpoints load; the other
 * dtypes are refused (TLRT_ERR_DTYPE), but still listed with their shape.
 *
 * Devices. Buffers on any device are saved (CUDA buffers are downloaded, in pieces of at most
 * 16 MiB, waiting for the work queued on them), and tensors load onto any device (CPU buffers
 * are read in place; CUDA ones through host pieces of at most 16 MiB).
 *
 * Strictness. tlrt_safetensors_open checks the whole header before it returns, so a handle only
 * ever describes a consistent file; every defect is TLRT_ERR_FORMAT with a message naming what
 * is wrong and where (the header's byte offset, the tensor's name). The JSON is read by a strict
 * parser that takes exactly the structure above: objects, arrays, strings (with every JSON escape,
 * \uXXXX and surrogate pairs included), and integers 0 .. 2^64 - 1; a header that is not valid
 * UTF-8, does not start with '{', repeats a name or key, gives a tensor a field other than the
 * three, uses a negative, fractional or exponent number, true / false / null, or has anything but
 * JSON whitespace after the object is refused. So are names, keys and values holding U+0000,
 * which a C string cannot return. The reference reader is more lenient on a few of these (it
 * skips unknown fields); every file the reference writer writes is accepted.
 *
 * Errors of the file itself (beside the argument errors each function lists):
 *   TLRT_ERR_IO      the operating system refused a file operation (the file does not exist,
 *                    no permission, the disk is full, the path is a directory, ...); the message
 *                    names the path and the system's reason;
 *   TLRT_ERR_FORMAT  the file is not a valid safetensors file (truncated, a header length past the
 *                    end of the file or above the format's 100,000,000-byte limit, malformed JSON,
 *                    an unknown dtype, a shape that does not match its byte range, offsets that
 *                    overlap, leave a gap or do not end at the end of the file, rank above
 *                    TLRT_SAFETENSORS_MAX_RANK).
 *
 * Thread safety: a tlrt_safetensors handle is read-only after tlrt_safetensors_open, so any
 * number of threads may call the functions below on one handle at once (loads read the file with
 * pread, at explicit offsets); tlrt_safetensors_close must not run concurrently with another call
 * on the same handle. A handle is a token like a tlrt_buffer (tlrt_buffer.h): one that was closed,
 * or never was a handle, fails with TLRT_ERR_STALE_HANDLE, never read. Saving one path from two
 * threads or processes at once is not supported (both write path + ".tmp"). */
#ifndef TLRT_CHECKPOINT_H
#define TLRT_CHECKPOINT_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An open safetensors file: its validated header, and the file, kept open for loads. */
typedef struct tlrt_safetensors tlrt_safetensors;

/* The largest rank of a tensor this library writes or reads (a file with a larger one is
 * TLRT_ERR_FORMAT); a dims capacity of tlrt_safetensors_info that always suffices. */
#define TLRT_SAFETENSORS_MAX_RANK 64u

/* The dtypes of the format, as tlrt_safetensors_info reports them (tlrt_safetensors_dtype_name
 * gives the string of the file). The first three equal the tlrt_dtype of the same type. Loaded:
 * F32, I32, I64 as they are; F16, BF16, F64 as float32. Listed but refused by
 * tlrt_safetensors_load: the rest. */
#define TLRT_SAFETENSORS_F32 0u          /* "F32": IEEE binary32 */
#define TLRT_SAFETENSORS_I32 1u          /* "I32" */
#define TLRT_SAFETENSORS_I64 2u          /* "I64" */
#define TLRT_SAFETENSORS_F16 3u          /* "F16": IEEE binary16 */
#define TLRT_SAFETENSORS_BF16 4u         /* "BF16": bfloat16 (the top half of a binary32) */
#define TLRT_SAFETENSORS_F64 5u          /* "F64": IEEE binary64 */
#define TLRT_SAFETENSORS_BOOL 6u         /* "BOOL": one byte per element */
#define TLRT_SAFETENSORS_U8 7u           /* "U8" */
#define TLRT_SAFETENSORS_I8 8u           /* "I8" */
#define TLRT_SAFETENSORS_I16 9u          /* "I16" */
#define TLRT_SAFETENSORS_U16 10u         /* "U16" */
#define TLRT_SAFETENSORS_U32 11u         /* "U32" */
#define TLRT_SAFETENSORS_U64 12u         /* "U64" */
#define TLRT_SAFETENSORS_F8_E5M2 13u     /* "F8_E5M2" */
#define TLRT_SAFETENSORS_F8_E4M3 14u     /* "F8_E4M3" */
#define TLRT_SAFETENSORS_F8_E8M0 15u     /* "F8_E8M0" */
#define TLRT_SAFETENSORS_F8_E4M3FNUZ 16u /* "F8_E4M3FNUZ" */
#define TLRT_SAFETENSORS_F8_E5M2FNUZ 17u /* "F8_E5M2FNUZ" */
#define TLRT_SAFETENSORS_F4 18u          /* "F4": 4 bits per element, packed */
#define TLRT_SAFETENSORS_F6_E2M3 19u     /* "F6_E2M3": 6 bits per element, packed */
#define TLRT_SAFETENSORS_F6_E3M2 20u     /* "F6_E3M2": 6 bits per element, packed */
#define TLRT_SAFETENSORS_C64 21u         /* "C64": complex, two binary32 */

/* Static name of a TLRT_SAFETENSORS_* code as the file spells it ("BF16"); "UNKNOWN" for any
 * other value. Never NULL; the string lives for the whole process. Never fails. */
TLRT_API const char *tlrt_safetensors_dtype_name(uint32_t dtype);

/* Writes `count` buffers and `meta_count` metadata entries to the safetensors file `path`.
 *
 * Tensor i is named names[i] (UTF-8, NUL-terminated) and holds the values of buffers[i] (its
 * dtype: "F32", "I32" or "I64"), of shape dims[i][0 .. ranks[i] - 1], whose product must be the
 * buffer's size. Shorthands, as tlrt_buffer_to_dlpack: dims[i] NULL with ranks[i] == 1 is one
 * dimension of the buffer's size, dims[i] NULL with ranks[i] == 0 a scalar (for a buffer of one
 * element); dims NULL makes every dims[i] NULL, and ranks NULL every rank 1, so
 * (dims, ranks) = (NULL, NULL) saves every buffer as a 1-D tensor. The buffers may live on any
 * devices, mixed; they are only read. Names must be unique, valid UTF-8 and not "__metadata__"
 * (the empty name is allowed, as the reference writer allows it). The metadata ("__metadata__":
 * string to string) has the keys meta_keys[k] and values meta_values[k], k < meta_count, valid
 * UTF-8, keys unique (an empty key is allowed); with meta_count == 0 the file has no
 * "__metadata__" entry. Array arguments may be NULL only when
 * their count is 0.
 *
 * Layout, as the reference writer (the safetensors Python / Rust package) makes it, so that the
 * two write the same bytes for the same tensors (and metadata of at most one entry: theirs
 * follows a hash order): the tensors are stored by element type, "I64" first, then "F32", then
 * "I32" (the reference's descending dtype order, which keeps every tensor's data aligned to its
 * element size), and by name within a type (byte order, which is code point order); the header
 * lists "__metadata__" first (keys in byte order), then the tensors in that order, as compact
 * JSON (no spaces; in strings '"', '\\' and the control characters escaped as \" \\ \b \f \n \r
 * \t or \u00XX, everything else, non-ASCII included, as its UTF-8 bytes), padded with spaces to a
 * multiple of 8 bytes.
 *
 * Atomic: the file is written to path + ".tmp" (a file or symbolic link of that name, left by a
 * crash, is removed first; a link is never followed), flushed to the disk (fsync), then renamed
 * to `path` (replacing a file of that name), and the directory is flushed. If anything fails, the
 * ".tmp" file is removed and `path` is left as it was; a crash at any point leaves either the old
 * file or the complete new one under `path` (and possibly a stale path + ".tmp"). Every argument
 * is checked before anything is created.
 *
 * Errors: TLRT_ERR_NULL_ARGUMENT (path; names, buffers with count > 0; meta_keys, meta_values
 * with meta_count > 0; an entry of names, buffers, meta_keys or meta_values; dims[i] NULL with
 * ranks[i] > 1); TLRT_ERR_INVALID_ARGUMENT (path empty; a name not valid UTF-8, equal to
 * "__metadata__" or repeated; a metadata key or value not valid UTF-8; a key repeated;
 * ranks[i] > TLRT_SAFETENSORS_MAX_RANK); TLRT_ERR_STALE_HANDLE, TLRT_ERR_RELEASED (a buffer);
 * TLRT_ERR_SHAPE (the product of dims[i] is not the size of buffers[i]); TLRT_ERR_OVERFLOW (the
 * header above the format's 100,000,000 bytes, or the data above 2^64 bytes); TLRT_ERR_IO
 * (creating, writing, flushing or renaming failed: the message names the file and the reason);
 * TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA, TLRT_ERR_DEVICE_LOST (downloading a CUDA buffer).
 * Numeric class: exact (the bytes of the buffers). */
TLRT_API tlrt_status tlrt_safetensors_save(const char *path, uint64_t count,
                                           const char *const *names,
                                           const tlrt_buffer *const *buffers,
                                           const uint64_t *const *dims, const uint32_t *ranks,
                                           uint64_t meta_count, const char *const *meta_keys,
                                           const char *const *meta_values);

/* Opens the safetensors file `path`, reads its header and checks all of it (see "Strictness"
 * above: the header length against the file's size and the format's limit, the JSON, every
 * tensor's dtype, shape and byte range, the ranges covering the data exactly, names and keys
 * unique); *out = a new handle, which keeps the file open until tlrt_safetensors_close. No tensor
 * data is read. The handle's strings (names, metadata) stay valid until it is closed.
 * Errors: TLRT_ERR_NULL_ARGUMENT (path, out); TLRT_ERR_INVALID_ARGUMENT (path empty);
 * TLRT_ERR_IO (opening, reading, not a regular file: a directory, a FIFO, a device);
 * TLRT_ERR_FORMAT; TLRT_ERR_OUT_OF_MEMORY.
 * On failure *out is NULL and the file is closed. */
TLRT_API tlrt_status tlrt_safetensors_open(const char *path, tlrt_safetensors **out);

/* Closes the file and frees the handle and everything it returned (names, metadata strings).
 * NULL, a closed handle and a value that never was a handle are ignored. Buffers loaded from the
 * file are independent of it and stay valid. Never fails. */
TLRT_API void tlrt_safetensors_close(tlrt_safetensors *file);

/* *count = the number of tensors in the file (0 for a file of metadata only).
 * Errors: TLRT_ERR_NULL_ARGUMENT (file, count); TLRT_ERR_STALE_HANDLE (file). */
TLRT_API tlrt_status tlrt_safetensors_count(const tlrt_safetensors *file, uint64_t *count);

/* *name = the name of tensor `index`, 0 <= index < count, in the order of the names' bytes
 * (code point order), whatever the order of the file. The string belongs to the handle and stays
 * valid until tlrt_safetensors_close. Errors: TLRT_ERR_NULL_ARGUMENT (file, name);
 * TLRT_ERR_STALE_HANDLE (file); TLRT_ERR_INDEX (index >= count). */
TLRT_API tlrt_status tlrt_safetensors_name(const tlrt_safetensors *file, uint64_t index,
                                           const char **name);

/* The dtype and shape of the tensor `name`: *dtype = its TLRT_SAFETENSORS_* code, *rank = its
 * rank, dims[0 .. *rank - 1] = its shape. capacity is the number of entries dims has room for;
 * every one of them is written (those past *rank with 0), and TLRT_SAFETENSORS_MAX_RANK always
 * suffices. With dims NULL and capacity 0, only *dtype and *rank are written (a query of the
 * rank, whatever it is).
 * Errors: TLRT_ERR_NULL_ARGUMENT (file, name, dtype, rank; dims with capacity > 0);
 * TLRT_ERR_STALE_HANDLE (file); TLRT_ERR_INDEX (no tensor of that name); TLRT_ERR_SHAPE
 * (capacity below the rank, dims not NULL). On failure *dtype and *rank are 0 (where not NULL)
 * and dims[0 .. capacity - 1] are 0. */
TLRT_API tlrt_status tlrt_safetensors_info(const tlrt_safetensors *file, const char *name,
                                           uint32_t *dtype, uint64_t *dims, uint32_t capacity,
                                           uint32_t *rank);

/* *out = a new buffer on `device` holding the tensor `name`, flattened in row-major order (the
 * element count is the product of its shape; the shape itself comes from
 * tlrt_safetensors_info). F32, I32 and I64 tensors give buffers of that type, bit for bit; F16
 * and BF16 tensors give float32 buffers, exactly (every value, infinities, subnormals and signed
 * zeros included, is a float32; a NaN stays a NaN with its payload shifted into the float32
 * one); F64 tensors give float32 buffers rounded to nearest, ties to even (beyond the float32
 * range +-inf, NaN stays NaN). Reads the tensor's bytes from the file with pread.
 * Errors: TLRT_ERR_NULL_ARGUMENT (file, name, out); TLRT_ERR_STALE_HANDLE (file); TLRT_ERR_INDEX
 * (no tensor of that name); TLRT_ERR_DTYPE (a dtype other than F32, I32, I64, F16, BF16, F64);
 * TLRT_ERR_INVALID_ARGUMENT (malformed device); TLRT_ERR_BACKEND_UNAVAILABLE; TLRT_ERR_NO_DEVICE;
 * TLRT_ERR_OVERFLOW (more than TLRT_MAX_ELEMENTS elements); TLRT_ERR_IO (reading failed, or the
 * file was shortened since it was opened); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA;
 * TLRT_ERR_DEVICE_LOST. Numeric class: exact (F64: one rounding). */
TLRT_API tlrt_status tlrt_safetensors_load(const tlrt_safetensors *file, const char *name,
                                           tlrt_device device, tlrt_buffer **out);

/* *count = the number of "__metadata__" entries (0 when the file has none).
 * Errors: TLRT_ERR_NULL_ARGUMENT (file, count); TLRT_ERR_STALE_HANDLE (file). */
TLRT_API tlrt_status tlrt_safetensors_metadata_count(const tlrt_safetensors *file,
                                                     uint64_t *count);

/* *key = the metadata key `index`, 0 <= index < count, in the order of the keys' bytes. The
 * string stays valid until tlrt_safetensors_close. Errors: TLRT_ERR_NULL_ARGUMENT (file, key);
 * TLRT_ERR_STALE_HANDLE (file); TLRT_ERR_INDEX (index >= count). */
TLRT_API tlrt_status tlrt_safetensors_metadata_key(const tlrt_safetensors *file, uint64_t index,
                                                   const char **key);

/* *value = the metadata value of `key`. The string stays valid until tlrt_safetensors_close.
 * Errors: TLRT_ERR_NULL_ARGUMENT (file, key, value); TLRT_ERR_STALE_HANDLE (file);
 * TLRT_ERR_INDEX (no such key). */
TLRT_API tlrt_status tlrt_safetensors_metadata(const tlrt_safetensors *file, const char *key,
                                               const char **value);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_CHECKPOINT_H */
