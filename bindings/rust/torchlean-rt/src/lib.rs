//! Safe Rust binding of libtorchlean_rt, a float32 tensor runtime with a plain-C ABI.
//!
//! * [`Tensor`] is a buffer with a shape: constructors (`from_f32`, `zeros`, `ones`, ...), NumPy
//!   broadcasting for `add` / `sub` / `mul` / `div` / `maximum` / `minimum`, `matmul` with
//!   NumPy's rules, reshape / transpose / permute, unary ops and reductions, and the operators
//!   `+ - * /` and unary `-` whose output is a [`Result`] (module [`tensor`]).
//! * [`Buffer`] owns one reference to a `tlrt_buffer *`: `Drop` frees it (`tlrt_buffer_free`
//!   never fails or blocks), `Clone` retains it (a second owner of the same handle). A buffer holds
//!   float32 values (what every op computes on) or int32 / int64 values ([`Dtype`]:
//!   [`Buffer::from_i32`], [`Buffer::to_vec_i64`], ...).
//! * DLPack (abi/tlrt_dlpack.h): [`Buffer::to_dlpack`] / [`Buffer::from_dlpack`] exchange
//!   buffers with other tensor libraries without a copy, as `DLManagedTensorVersioned *` (mirrored
//!   in [`dlpack`]).
//! * [`Tape`] owns a `tlrt_tape *` (autograd); `Drop` frees it. One thread at a time (`Send`,
//!   not `Sync`).
//! * Checkpoints (abi/tlrt_checkpoint.h, module [`checkpoint`]): [`save_safetensors`] writes
//!   named tensors to a safetensors file, [`SafeTensors`] reads one lazily (`Drop` closes it),
//!   [`load_safetensors`] loads every tensor of a file.
//! * CUDA streams and events of other libraries (cudarc, ...) order work with the library's:
//!   [`stream_set`], [`use_stream`], [`stream_record_event`], [`stream_wait_event`],
//!   [`stream_wait_for_library`] (raw handles, hence `unsafe`).
//! * Every fallible call returns [`Result`]; an [`Error`] carries the `tlrt_status`, its name and
//!   `tlrt_last_error()` taken right after the failure.
//! * The ops (one free function per op of the headers: `add`, `matmul`, `softmax`, `adam_step`,
//!   ...) and the tape's recording methods are generated from the headers into `ops.rs` by
//!   `bindings/gen/gen_bindings.py`; this file holds what is written by hand.
//!
//! ```no_run
//! use torchlean_rt::{Buffer, Device};
//! let a = Buffer::from_f32(&[1.0, 2.0], Device::CPU)?;
//! let b = torchlean_rt::exp(&a)?;
//! println!("{:?}", b.to_vec()?);
//! # Ok::<(), torchlean_rt::Error>(())
//! ```
pub use torchlean_rt_sys as sys;

use std::ffi::{c_void, CStr};
use std::fmt;

pub mod checkpoint;
pub use checkpoint::{load_safetensors, save_safetensors, FileDtype, SafeTensors};
pub mod dlpack;
// The generated docs quote the headers' comments, whose `x[i]` rustdoc would read as links.
#[allow(rustdoc::broken_intra_doc_links)]
mod ops;
pub use ops::*;
pub mod tensor;
pub use tensor::Tensor;

/// A failed call: the library's status code, its name and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The `tlrt_status` (`sys::TLRT_ERR_SHAPE`, ...).
    pub status: i32,
    /// `tlrt_status_string(status)`, e.g. "TLRT_ERR_SHAPE".
    pub name: String,
    /// `tlrt_last_error()` right after the failure, e.g. "tlrt_add: argument b has 2 elements...".
    pub message: String,
    /// The C function that failed (or the binding's check that refused the call).
    pub function: &'static str,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({}): {}", self.function, self.name, self.status, self.message)
    }
}

impl std::error::Error for Error {}

/// `std::result::Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

fn cstr(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// Name of a status code ("TLRT_ERR_SHAPE").
pub fn status_string(status: i32) -> String {
    cstr(unsafe { sys::tlrt_status_string(status) })
}

/// Message of the last failure on this thread.
pub fn last_error() -> String {
    cstr(unsafe { sys::tlrt_last_error() })
}

pub(crate) fn check(function: &'static str, status: sys::tlrt_status) -> Result<()> {
    if status == sys::TLRT_OK {
        Ok(())
    } else {
        Err(Error { status, name: status_string(status), message: last_error(), function })
    }
}

/// An error raised by the binding itself (before calling the library), in the library's style.
pub(crate) fn binding_error(function: &'static str, status: sys::tlrt_status, message: String) -> Error {
    Error { status, name: status_string(status), message, function }
}

/// An uncounted array (a permutation, an axis map, labels) must have the length the library will
/// read, or it would read past it.
pub(crate) fn check_len(function: &'static str, what: &str, got: usize, want: usize) -> Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(binding_error(function, sys::TLRT_ERR_SHAPE,
                          format!("{function}: argument {what} has {got} entries, expected {want}")))
    }
}

pub(crate) fn count_u32(function: &'static str, what: &str, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| binding_error(function, sys::TLRT_ERR_OVERFLOW,
                                              format!("{function}: {what} = {n} does not fit uint32_t")))
}

pub(crate) fn count_u64(_function: &'static str, _what: &str, n: usize) -> Result<u64> {
    Ok(n as u64)
}

/// A device: `Device::CPU` or `Device::cuda(ordinal)` (bits 16..23 kind, 0..15 ordinal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device(pub sys::tlrt_device);

impl Device {
    /// The host CPU.
    pub const CPU: Device = Device(sys::TLRT_DEVICE_CPU);
    /// CUDA device `ordinal` (0 .. 65535).
    pub const fn cuda(ordinal: u32) -> Device {
        Device(sys::TLRT_DEVICE_CUDA(ordinal))
    }
    /// Whether this is a CUDA device.
    pub fn is_cuda(self) -> bool {
        (self.0 >> 16) & 0xFF == sys::TLRT_DEVICE_KIND_CUDA
    }
    /// The ordinal (0 for the CPU).
    pub fn ordinal(self) -> u32 {
        self.0 & 0xFFFF
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_cuda() {
            write!(f, "cuda:{}", self.ordinal())
        } else {
            write!(f, "cpu")
        }
    }
}

/// The element type of a buffer (`tlrt_dtype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Dtype {
    /// IEEE binary32: what every op computes on.
    F32 = sys::TLRT_DTYPE_F32,
    /// Two's complement 32-bit integers.
    I32 = sys::TLRT_DTYPE_I32,
    /// Two's complement 64-bit integers.
    I64 = sys::TLRT_DTYPE_I64,
}

impl Dtype {
    /// The `tlrt_dtype` value.
    pub const fn raw(self) -> sys::tlrt_dtype {
        self as sys::tlrt_dtype
    }
    /// The element type of a `tlrt_dtype` value; None for a value this binding does not know.
    pub const fn from_raw(raw: sys::tlrt_dtype) -> Option<Dtype> {
        match raw {
            sys::TLRT_DTYPE_F32 => Some(Dtype::F32),
            sys::TLRT_DTYPE_I32 => Some(Dtype::I32),
            sys::TLRT_DTYPE_I64 => Some(Dtype::I64),
            _ => None,
        }
    }
    /// Bytes per element.
    pub const fn size_of(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::I64 => 8,
        }
    }
    /// A `tlrt_dtype` the library returned: an error (TLRT_ERR_UNSUPPORTED) for a type newer than
    /// this binding (the enum is append-only).
    pub(crate) fn from_out(function: &'static str, raw: sys::tlrt_dtype) -> Result<Dtype> {
        Dtype::from_raw(raw).ok_or_else(|| {
            binding_error(function, sys::TLRT_ERR_UNSUPPORTED,
                          format!("{function}: element type {raw} is unknown to this binding"))
        })
    }
}

/// Values of one element type ([`Dtype`]: float32, int32 or int64) on one device; owns one
/// reference to the handle.
pub struct Buffer {
    pub(crate) raw: *mut sys::tlrt_buffer,
}

// The reference count is atomic and handles may be read from several threads at once
// (abi/tlrt_buffer.h); the one racy operation, release_storage, is an unsafe fn.
unsafe impl Send for Buffer {}
unsafe impl Sync for Buffer {}

impl Drop for Buffer {
    fn drop(&mut self) {
        // Never fails, never blocks on the device, NULL is a no-op.
        unsafe { sys::tlrt_buffer_free(self.raw) }
    }
}

impl Clone for Buffer {
    /// A second owner of the same handle (tlrt_buffer_retain), not a copy of the values:
    /// use [`Buffer::copy`] for that.
    fn clone(&self) -> Self {
        // retain fails only for NULL, which a Buffer never holds.
        let st = unsafe { sys::tlrt_buffer_retain(self.raw) };
        assert_eq!(st, sys::TLRT_OK, "tlrt_buffer_retain of a live handle failed");
        Buffer { raw: self.raw }
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.size(), self.device()) {
            (Ok(n), Ok(d)) => write!(f, "Buffer(size={n}, device={d})"),
            (Err(e), _) | (_, Err(e)) => write!(f, "Buffer(<{}>)", e.name),
        }
    }
}

fn out_buffer(function: &'static str, f: impl FnOnce(*mut *mut sys::tlrt_buffer) -> sys::tlrt_status) -> Result<Buffer> {
    let mut raw = std::ptr::null_mut();
    check(function, f(&mut raw))?;
    Ok(Buffer { raw })
}

impl Buffer {
    /// Takes over one reference of a raw handle.
    ///
    /// # Safety
    /// `raw` must be a live handle whose reference the caller gives up.
    pub unsafe fn from_raw(raw: *mut sys::tlrt_buffer) -> Buffer {
        Buffer { raw }
    }
    /// Gives up ownership: the caller must free the handle.
    pub fn into_raw(self) -> *mut sys::tlrt_buffer {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }
    /// The raw handle, still owned by this `Buffer` (for the `sys` functions).
    pub fn as_ptr(&self) -> *const sys::tlrt_buffer {
        self.raw
    }

    /// Uploads float32 values (bit for bit).
    pub fn from_f32(data: &[f32], device: Device) -> Result<Buffer> {
        out_buffer("tlrt_buffer_from_f32", |o| unsafe {
            sys::tlrt_buffer_from_f32(device.0, data.as_ptr(), data.len() as u64, o)
        })
    }
    /// Uploads float64 values rounded to the nearest float32 by the library.
    pub fn from_f64(data: &[f64], device: Device) -> Result<Buffer> {
        out_buffer("tlrt_buffer_from_f64", |o| unsafe {
            sys::tlrt_buffer_from_f64(device.0, data.as_ptr(), data.len() as u64, o)
        })
    }
    /// Uploads little-endian float32 bytes (a multiple of 4).
    pub fn from_bytes(bytes: &[u8], device: Device) -> Result<Buffer> {
        out_buffer("tlrt_buffer_from_bytes", |o| unsafe {
            sys::tlrt_buffer_from_bytes(device.0, bytes.as_ptr(), bytes.len() as u64, o)
        })
    }
    /// Uploads int32 values: a buffer of [`Dtype::I32`].
    pub fn from_i32(data: &[i32], device: Device) -> Result<Buffer> {
        out_buffer("tlrt_buffer_from_i32", |o| unsafe {
            sys::tlrt_buffer_from_i32(device.0, data.as_ptr(), data.len() as u64, o)
        })
    }
    /// Uploads int64 values: a buffer of [`Dtype::I64`].
    pub fn from_i64(data: &[i64], device: Device) -> Result<Buffer> {
        out_buffer("tlrt_buffer_from_i64", |o| unsafe {
            sys::tlrt_buffer_from_i64(device.0, data.as_ptr(), data.len() as u64, o)
        })
    }
    /// n float32 zeros (+0).
    pub fn zeros(n: u64, device: Device) -> Result<Buffer> {
        out_buffer("tlrt_buffer_zeros", |o| unsafe { sys::tlrt_buffer_zeros(device.0, n, o) })
    }
    /// n zeros of an element type (`tlrt_buffer_zeros_of`).
    pub fn zeros_of(dtype: Dtype, n: u64, device: Device) -> Result<Buffer> {
        out_buffer("tlrt_buffer_zeros_of", |o| unsafe {
            sys::tlrt_buffer_zeros_of(device.0, dtype.raw(), n, o)
        })
    }
    /// n copies of `value` rounded once to float32 (NaN and the infinities included).
    pub fn full(n: u64, value: f64, device: Device) -> Result<Buffer> {
        out_buffer("tlrt_buffer_full", |o| unsafe { sys::tlrt_buffer_full(device.0, n, value, o) })
    }

    /// The element count (TLRT_ERR_RELEASED after [`Buffer::release_storage`]).
    pub fn size(&self) -> Result<u64> {
        let mut n = 0u64;
        check("tlrt_buffer_size", unsafe { sys::tlrt_buffer_size(self.raw, &mut n) })?;
        Ok(n)
    }
    /// The device holding the values.
    pub fn device(&self) -> Result<Device> {
        let mut d = 0;
        check("tlrt_buffer_device", unsafe { sys::tlrt_buffer_device(self.raw, &mut d) })?;
        Ok(Device(d))
    }
    /// The element type (also of a released buffer).
    pub fn dtype(&self) -> Result<Dtype> {
        let mut t: sys::tlrt_dtype = sys::TLRT_DTYPE_F32;
        check("tlrt_buffer_dtype", unsafe { sys::tlrt_buffer_dtype(self.raw, &mut t) })?;
        Dtype::from_out("tlrt_buffer_dtype", t)
    }
    /// Whether the storage was released ([`Buffer::release_storage`]).
    pub fn is_released(&self) -> Result<bool> {
        let mut r = false;
        check("tlrt_buffer_is_released", unsafe { sys::tlrt_buffer_is_released(self.raw, &mut r) })?;
        Ok(r)
    }
    /// Frees the payload now (the explicit free); later use fails with TLRT_ERR_RELEASED.
    /// Returns true if this call freed it.
    ///
    /// # Safety
    /// No other thread may use this handle (or a clone of it) during the call: releasing storage
    /// concurrently with a read is a data race (abi/tlrt_buffer.h).
    pub unsafe fn release_storage(&self) -> Result<bool> {
        let mut freed = false;
        check("tlrt_buffer_release_storage", sys::tlrt_buffer_release_storage(self.raw, &mut freed))?;
        Ok(freed)
    }
    /// A new buffer with the same values on the same device.
    pub fn copy(&self) -> Result<Buffer> {
        out_buffer("tlrt_buffer_copy", |o| unsafe { sys::tlrt_buffer_copy(self.raw, o) })
    }
    /// A copy on `device`.
    pub fn to_device(&self, device: Device) -> Result<Buffer> {
        out_buffer("tlrt_buffer_to_device", |o| unsafe { sys::tlrt_buffer_to_device(self.raw, device.0, o) })
    }

    /// Downloads the values.
    pub fn to_vec(&self) -> Result<Vec<f32>> {
        let n = self.size()?;
        let mut v = vec![0f32; n as usize];
        check("tlrt_buffer_to_f32", unsafe { sys::tlrt_buffer_to_f32(self.raw, v.as_mut_ptr(), n) })?;
        Ok(v)
    }
    /// Downloads the values widened to float64 (exact).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        let n = self.size()?;
        let mut v = vec![0f64; n as usize];
        check("tlrt_buffer_to_f64", unsafe { sys::tlrt_buffer_to_f64(self.raw, v.as_mut_ptr(), n) })?;
        Ok(v)
    }
    /// Downloads little-endian float32 bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let n = self.size()? * 4;
        let mut v = vec![0u8; n as usize];
        check("tlrt_buffer_to_bytes", unsafe { sys::tlrt_buffer_to_bytes(self.raw, v.as_mut_ptr(), n) })?;
        Ok(v)
    }
    /// Downloads the values of an int32 buffer (TLRT_ERR_DTYPE for another element type).
    pub fn to_vec_i32(&self) -> Result<Vec<i32>> {
        let n = self.size()?;
        let mut v = vec![0i32; n as usize];
        check("tlrt_buffer_to_i32", unsafe { sys::tlrt_buffer_to_i32(self.raw, v.as_mut_ptr(), n) })?;
        Ok(v)
    }
    /// Downloads the values of an int64 buffer (TLRT_ERR_DTYPE for another element type).
    pub fn to_vec_i64(&self) -> Result<Vec<i64>> {
        let n = self.size()?;
        let mut v = vec![0i64; n as usize];
        check("tlrt_buffer_to_i64", unsafe { sys::tlrt_buffer_to_i64(self.raw, v.as_mut_ptr(), n) })?;
        Ok(v)
    }

    /// Exports the buffer as a DLPack 1.0 `DLManagedTensorVersioned *`
    /// (`tlrt_buffer_to_dlpack_versioned`; [`dlpack::DLManagedTensorVersioned`] mirrors it) that
    /// shares the payload, no copy: of shape `dims` (their product must be the size; `&[]` is a
    /// scalar, for a buffer of one element), or one dimension of the buffer's size for `None`,
    /// with compact row-major strides. The tensor holds a reference to the buffer, so it outlives
    /// this `Buffer`. The caller owns the tensor: hand it to a consumer (another library, or
    /// [`Buffer::from_dlpack`]) or call its deleter ([`dlpack::delete_versioned`]) exactly once;
    /// dropping the pointer leaks the buffer. Buffers are immutable: a consumer must not write
    /// through the tensor while the library may read the buffer.
    pub fn to_dlpack(&self, dims: Option<&[u64]>) -> Result<*mut c_void> {
        const F: &str = "tlrt_buffer_to_dlpack_versioned";
        let (ptr, ndim) = match dims {
            None => (std::ptr::null(), 1u32),
            Some(d) => (if d.is_empty() { std::ptr::null() } else { d.as_ptr() },
                        count_u32(F, "dims", d.len())?),
        };
        let mut out: *mut c_void = std::ptr::null_mut();
        check(F, unsafe { sys::tlrt_buffer_to_dlpack_versioned(self.raw, ptr, ndim, &mut out) })?;
        Ok(out)
    }

    /// Imports a DLPack 1.x `DLManagedTensorVersioned *` (`tlrt_buffer_from_dlpack_versioned`):
    /// a new buffer over its payload, no copy (the tensor's elements flattened in row-major
    /// order). On success the buffer owns `managed` and calls its deleter once, when the last
    /// reference is dropped or the storage released; on failure the caller keeps `managed` (its
    /// deleter is not called). Accepted: float32, int32 or int64 with one lane, on the CPU, CUDA
    /// host memory or a CUDA device of this process, compact row-major, data 16-byte aligned
    /// (else TLRT_ERR_UNSUPPORTED and the rest of abi/tlrt_dlpack.h).
    ///
    /// # Safety
    /// `managed` must be null or point to a live `DLManagedTensorVersioned` (shape, strides and
    /// data valid as DLPack requires) whose ownership the caller gives up on success; the data
    /// must stay valid until its deleter runs, and the producer's pending writes must be ordered
    /// before the library reads it (abi/tlrt_dlpack.h, "Ordering").
    pub unsafe fn from_dlpack(managed: *mut c_void) -> Result<Buffer> {
        out_buffer("tlrt_buffer_from_dlpack_versioned", |o| {
            sys::tlrt_buffer_from_dlpack_versioned(managed, o)
        })
    }
}

/// An autograd tape (abi/tlrt_tape.h). Nodes are `u64` ids; `Drop` frees the tape.
pub struct Tape {
    pub(crate) raw: *mut sys::tlrt_tape,
}

// A tape may move to another thread, but is not thread-safe (one thread at a time).
unsafe impl Send for Tape {}

impl Drop for Tape {
    fn drop(&mut self) {
        unsafe { sys::tlrt_tape_free(self.raw) }
    }
}

impl Tape {
    /// A new empty tape whose nodes live on `device`.
    pub fn new(device: Device) -> Result<Tape> {
        let mut raw = std::ptr::null_mut();
        check("tlrt_tape_new", unsafe { sys::tlrt_tape_new(device.0, &mut raw) })?;
        Ok(Tape { raw })
    }
    /// (dims, requires_grad) of a node.
    pub fn shape(&self, node: u64) -> Result<(Vec<u64>, bool)> {
        let mut dims = [0u64; sys::TLRT_TAPE_MAX_RANK as usize];
        let mut rank = 0u32;
        let mut rg = false;
        check("tlrt_tape_shape", unsafe {
            sys::tlrt_tape_shape(self.raw, node, dims.as_mut_ptr(), &mut rank, &mut rg)
        })?;
        Ok((dims[..rank as usize].to_vec(), rg))
    }
}

// ---- runtime ---------------------------------------------------------------------------------

/// The library's ABI version (`TLRT_ABI_VERSION` of the loaded library: major << 16 | minor).
pub fn abi_version() -> u32 {
    unsafe { sys::tlrt_abi_version() }
}
/// A description of the library build: version, backends compiled in, CUDA version and GPU
/// architectures, BLAS provider.
pub fn build_info() -> String {
    cstr(unsafe { sys::tlrt_build_info() })
}
/// `sys::TLRT_RUNTIME_CPU_ONLY`, `TLRT_RUNTIME_CUDA_READY` or `TLRT_RUNTIME_CUDA_NO_DEVICE`.
pub fn runtime_status() -> u32 {
    unsafe { sys::tlrt_runtime_status() }
}
/// The number of devices of a kind (`sys::TLRT_DEVICE_KIND_CPU` / `TLRT_DEVICE_KIND_CUDA`).
pub fn device_count(kind: u32) -> Result<u32> {
    let mut n = 0;
    check("tlrt_device_count", unsafe { sys::tlrt_device_count(kind, &mut n) })?;
    Ok(n)
}
/// Waits for the library's queued work on `device`.
pub fn synchronize(device: Device) -> Result<()> {
    check("tlrt_synchronize", unsafe { sys::tlrt_synchronize(device.0) })
}
/// Returns the allocator's pooled (unused) memory of `device` to the system.
pub fn allocator_trim(device: Device) -> Result<()> {
    check("tlrt_allocator_trim", unsafe { sys::tlrt_allocator_trim(device.0) })
}
/// Allocator telemetry of `device` (live bytes, live handles, ...).
pub fn stats(device: Device) -> Result<sys::tlrt_allocator_stats> {
    let mut s = sys::tlrt_allocator_stats {
        struct_size: std::mem::size_of::<sys::tlrt_allocator_stats>() as u64,
        ..Default::default()
    };
    check("tlrt_allocator_stats_get", unsafe { sys::tlrt_allocator_stats_get(device.0, &mut s) })?;
    Ok(s)
}
/// Returns the previous value.
pub fn set_deterministic(on: bool) -> bool {
    unsafe { sys::tlrt_set_deterministic(on) }
}
/// Whether deterministic mode is on (every reduction follows its fixed tree; abi/tlrt_runtime.h).
pub fn get_deterministic() -> bool {
    unsafe { sys::tlrt_get_deterministic() }
}
/// Threads of the CPU backend's kernels (results do not depend on it; 0 restores the default,
/// abi/tlrt_runtime.h). Returns the previous count.
pub fn set_num_threads(n: u32) -> u32 {
    unsafe { sys::tlrt_set_num_threads(n) }
}
/// The CPU backend's thread count.
pub fn get_num_threads() -> u32 {
    unsafe { sys::tlrt_get_num_threads() }
}
/// Returns the previous value.
pub fn set_allow_tf32(on: bool) -> bool {
    unsafe { sys::tlrt_set_allow_tf32(on) }
}
/// Whether TF32 is allowed in the CUDA float32 products.
pub fn get_allow_tf32() -> bool {
    unsafe { sys::tlrt_get_allow_tf32() }
}
/// Fault injection for tests (abi/tlrt_runtime.h).
pub fn debug_fail_nth_allocation(n: u64) -> u64 {
    unsafe { sys::tlrt_debug_fail_nth_allocation(n) }
}

// ---- streams (abi/tlrt_stream.h) -------------------------------------------------------------
//
// CUDA handles (a `cudaStream_t`, a `cudaEvent_t`: cudarc's raw `CUstream` / `CUevent`, or any
// other binding's) travel as `*mut c_void`. The library cannot check that a handle is live, so the
// functions that take one are `unsafe fn`s; the CPU device has no stream (TLRT_ERR_UNSUPPORTED).

/// `TLRT_CUDA_STREAM_LEGACY` as a stream handle: the device's legacy default stream.
pub const CUDA_STREAM_LEGACY: *mut c_void = sys::TLRT_CUDA_STREAM_LEGACY as usize as *mut c_void;

/// The current stream of `device` (`tlrt_stream_get`): the host's as it was set, or the library's
/// own stream (never null; alive for the process; not to be destroyed).
pub fn stream_get(device: Device) -> Result<*mut c_void> {
    let mut s: *mut c_void = std::ptr::null_mut();
    check("tlrt_stream_get", unsafe { sys::tlrt_stream_get(device.0, &mut s) })?;
    Ok(s)
}

/// Queue all of the library's work on `device` on `stream` from now on (`tlrt_stream_set`); null
/// (or the library's own stream) goes back to the library's own. The new stream waits on the device
/// for the work queued before the switch.
///
/// # Safety
/// `stream` must be null, [`CUDA_STREAM_LEGACY`], or a live `cudaStream_t` of `device` that stays
/// alive until another stream is set; no other call of the library on `device` may run meanwhile
/// (frees excepted).
pub unsafe fn stream_set(device: Device, stream: *mut c_void) -> Result<()> {
    check("tlrt_stream_set", sys::tlrt_stream_set(device.0, stream))
}

/// Record `event` on the current stream of `device` (`tlrt_stream_record_event`): it completes
/// when the library's work queued so far has.
///
/// # Safety
/// `event` must be a live `cudaEvent_t` created on `device`.
pub unsafe fn stream_record_event(device: Device, event: *mut c_void) -> Result<()> {
    check("tlrt_stream_record_event", sys::tlrt_stream_record_event(device.0, event))
}

/// The library's later work on `device` waits, on the device, for `event`'s last record
/// (`tlrt_stream_wait_event`).
///
/// # Safety
/// `event` must be a live `cudaEvent_t`.
pub unsafe fn stream_wait_event(device: Device, event: *mut c_void) -> Result<()> {
    check("tlrt_stream_wait_event", sys::tlrt_stream_wait_event(device.0, event))
}

/// `stream` waits, on the device, for all work the library has queued on `device` so far
/// (`tlrt_stream_wait_for_library`).
///
/// # Safety
/// `stream` must be a live `cudaStream_t`, [`CUDA_STREAM_LEGACY`] or `cudaStreamPerThread` (2).
pub unsafe fn stream_wait_for_library(device: Device, stream: *mut c_void) -> Result<()> {
    check("tlrt_stream_wait_for_library", sys::tlrt_stream_wait_for_library(device.0, stream))
}

/// A stream set for a scope: [`use_stream`] sets it, `Drop` sets back the stream that was current
/// before (errors at that point are ignored: a drop has nobody to report to).
pub struct StreamGuard {
    device: Device,
    previous: *mut c_void,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        unsafe { sys::tlrt_stream_set(self.device.0, self.previous) };
    }
}

/// Sets `stream` as the current stream of `device` until the guard is dropped.
///
/// # Safety
/// As [`stream_set`], for the guard's whole life.
pub unsafe fn use_stream(device: Device, stream: *mut c_void) -> Result<StreamGuard> {
    let previous = stream_get(device)?;
    stream_set(device, stream)?;
    Ok(StreamGuard { device, previous })
}

/// C = A B in float64 on the host: A (m, n), B (n, p), row-major.
pub fn dgemm(a: &[f64], b: &[f64], m: u64, n: u64, p: u64) -> Result<Vec<f64>> {
    let size = |x: u64, y: u64, what| {
        x.checked_mul(y).filter(|&s| s <= sys::TLRT_MAX_ELEMENTS).ok_or_else(|| {
            binding_error("tlrt_dgemm", sys::TLRT_ERR_OVERFLOW, format!("tlrt_dgemm: {what} overflows"))
        })
    };
    check_len("tlrt_dgemm", "a", a.len(), size(m, n, "m * n")? as usize)?;
    check_len("tlrt_dgemm", "b", b.len(), size(n, p, "n * p")? as usize)?;
    let mut c = vec![0f64; size(m, p, "m * p")? as usize];
    check("tlrt_dgemm", unsafe { sys::tlrt_dgemm(a.as_ptr(), b.as_ptr(), m, n, p, c.as_mut_ptr()) })?;
    Ok(c)
}

/// Clips `grads` in place by their global L2 norm (`tlrt_clip_grad_norm`, abi/tlrt_optim.h:
/// torch.nn.utils.clip_grad_norm_ without a host synchronisation) and returns the norm as a fresh
/// 1-element buffer on their device (on the CPU for an empty slice).
pub fn clip_grad_norm(grads: &[&Buffer], max_norm: f64) -> Result<Buffer> {
    let ptrs: Vec<*mut sys::tlrt_buffer> = grads.iter().map(|b| b.raw).collect();
    out_buffer("tlrt_clip_grad_norm", |o| unsafe {
        sys::tlrt_clip_grad_norm(ptrs.len() as u64, ptrs.as_ptr(), max_norm, o)
    })
}

/// One Adam (`decoupled == false`) or AdamW step of many tensors in one call
/// (`tlrt_adam_step_multi`, abi/tlrt_optim.h): [`adam_step`] on every `(params[i], grads[i], m[i],
/// v[i])` with weight decay `weight_decays[i]`, bit for bit, with one kernel launch on CUDA. The
/// five slices have one entry per tensor (else `TLRT_ERR_SHAPE` from the binding); every buffer
/// appears once across the four slices.
#[allow(clippy::too_many_arguments)]
pub fn adam_step_multi(params: &[&Buffer], grads: &[&Buffer], m: &[&Buffer], v: &[&Buffer],
                       weight_decays: &[f64], step: u64, lr: f64, beta1: f64, beta2: f64, eps: f64,
                       decoupled: bool) -> Result<()> {
    const F: &str = "tlrt_adam_step_multi";
    check_len(F, "grads", grads.len(), params.len())?;
    check_len(F, "m", m.len(), params.len())?;
    check_len(F, "v", v.len(), params.len())?;
    check_len(F, "weight_decays", weight_decays.len(), params.len())?;
    let raw = |xs: &[&Buffer]| xs.iter().map(|b| b.raw).collect::<Vec<*mut sys::tlrt_buffer>>();
    let (p, mm, vv) = (raw(params), raw(m), raw(v));
    let g: Vec<*const sys::tlrt_buffer> = grads.iter().map(|b| b.raw as *const sys::tlrt_buffer).collect();
    check(F, unsafe {
        sys::tlrt_adam_step_multi(p.len() as u64, p.as_ptr(), g.as_ptr(), mm.as_ptr(), vv.as_ptr(),
                                  weight_decays.as_ptr(), step, lr, beta1, beta2, eps, decoupled)
    })
}

// ---- geometry as data (abi/tlrt_conv.h, abi/tlrt_pool.h) --------------------------------------
//
// The geometry structs are plain `#[repr(C)]` values of the sys crate, filled by field name; the
// generated `*_geom` ops (`conv_fwd_geom`, `maxpool_fwd_geom`, ...) take them by reference, and the
// queries below give the output shape the library computes for one.

/// Copies `values` (one entry per spatial axis) into a geometry struct's fixed array.
fn axes(function: &'static str, what: &str, values: &[u64], rank: usize, dst: &mut [u64]) -> Result<()> {
    check_len(function, what, values.len(), rank)?;
    if rank > dst.len() {
        return Err(binding_error(function, sys::TLRT_ERR_INVALID_ARGUMENT,
                                 format!("{function}: rank = {rank} must be in 1 .. {}", dst.len())));
    }
    dst[..rank].copy_from_slice(values);
    Ok(())
}

/// A `tlrt_conv_geometry` with `struct_size` set, `rank = in_spatial.len()`, stride 1, padding 0,
/// dilation 1 on every axis and one group; change any field by name afterwards
/// (`g.stride[1] = 2; g.groups = 4;`). The values are validated by the library (the ops and
/// [`conv_output_dims`]); here only the lengths of the slices (one entry per axis).
pub fn conv_geometry(batch: u64, in_channels: u64, out_channels: u64, in_spatial: &[u64],
                     kernel_size: &[u64]) -> Result<sys::tlrt_conv_geometry> {
    const F: &str = "conv_geometry";
    let rank = in_spatial.len();
    let mut g = sys::tlrt_conv_geometry {
        struct_size: std::mem::size_of::<sys::tlrt_conv_geometry>() as u64,
        rank: rank as u64,
        batch,
        in_channels,
        out_channels,
        groups: 1,
        ..Default::default()
    };
    axes(F, "in_spatial", in_spatial, rank, &mut g.in_spatial)?;
    axes(F, "kernel_size", kernel_size, rank, &mut g.kernel_size)?;
    axes(F, "stride", &vec![1; rank], rank, &mut g.stride)?;
    axes(F, "dilation", &vec![1; rank], rank, &mut g.dilation)?;
    Ok(g)
}

/// A `tlrt_pool_geometry` with `struct_size` set, `rank = in_spatial.len()`, stride = kernel
/// (PyTorch's pooling default) and padding 0; change any field by name afterwards. Validated by
/// the library, as [`conv_geometry`].
pub fn pool_geometry(batch: u64, channels: u64, in_spatial: &[u64], kernel: &[u64])
                     -> Result<sys::tlrt_pool_geometry> {
    const F: &str = "pool_geometry";
    let rank = in_spatial.len();
    let mut g = sys::tlrt_pool_geometry {
        struct_size: std::mem::size_of::<sys::tlrt_pool_geometry>() as u64,
        rank: rank as u64,
        batch,
        channels,
        ..Default::default()
    };
    axes(F, "in_spatial", in_spatial, rank, &mut g.in_spatial)?;
    axes(F, "kernel", kernel, rank, &mut g.kernel)?;
    axes(F, "stride", kernel, rank, &mut g.stride)?;
    Ok(g)
}

/// (dims, element count) of an output-shape query.
fn output_dims(function: &'static str, capacity: u32,
               f: impl FnOnce(*mut u64, u32, *mut u32, *mut u64) -> sys::tlrt_status)
               -> Result<(Vec<u64>, u64)> {
    let mut dims = vec![0u64; capacity as usize];
    let (mut rank, mut elements) = (0u32, 0u64);
    check(function, f(dims.as_mut_ptr(), capacity, &mut rank, &mut elements))?;
    dims.truncate(rank as usize);
    Ok((dims, elements))
}

/// The output shape `[batch, out_channels, out...]` and element count of [`conv_fwd_geom`] for
/// `g` (`tlrt_conv_output_dims`), with the library's validation.
pub fn conv_output_dims(g: &sys::tlrt_conv_geometry) -> Result<(Vec<u64>, u64)> {
    output_dims("tlrt_conv_output_dims", sys::TLRT_CONV_MAX_DIMS, |d, c, r, e| unsafe {
        sys::tlrt_conv_output_dims(g, d, c, r, e)
    })
}

/// The output shape and element count of [`convtranspose_fwd_geom`] for `g`
/// (`tlrt_convtranspose_output_dims`).
pub fn convtranspose_output_dims(g: &sys::tlrt_conv_geometry) -> Result<(Vec<u64>, u64)> {
    output_dims("tlrt_convtranspose_output_dims", sys::TLRT_CONV_MAX_DIMS, |d, c, r, e| unsafe {
        sys::tlrt_convtranspose_output_dims(g, d, c, r, e)
    })
}

/// The output shape `[batch, channels, out...]` and element count of every pool forward for `g`
/// (`tlrt_pool_output_dims`).
pub fn pool_output_dims(g: &sys::tlrt_pool_geometry) -> Result<(Vec<u64>, u64)> {
    output_dims("tlrt_pool_output_dims", sys::TLRT_POOL_MAX_DIMS, |d, c, r, e| unsafe {
        sys::tlrt_pool_output_dims(g, d, c, r, e)
    })
}
