//! Safe Rust binding of libtorchlean_rt, a float32 tensor runtime with a plain-C ABI.
//!
//! * [`Buffer`] owns one reference to a `tlrt_buffer *`: `Drop` frees it (`tlrt_buffer_free`
//!   never fails or blocks), `Clone` retains it (a second owner of the same handle).
//! * [`Tape`] owns a `tlrt_tape *` (autograd); `Drop` frees it. One thread at a time (`Send`,
//!   not `Sync`).
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

use std::ffi::CStr;
use std::fmt;

mod ops;
pub use ops::*;

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
    pub const CPU: Device = Device(sys::TLRT_DEVICE_CPU);
    pub const fn cuda(ordinal: u32) -> Device {
        Device(sys::TLRT_DEVICE_CUDA(ordinal))
    }
    pub fn is_cuda(self) -> bool {
        (self.0 >> 16) & 0xFF == sys::TLRT_DEVICE_KIND_CUDA
    }
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

/// float32 values on one device; owns one reference to the handle.
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
    pub fn zeros(n: u64, device: Device) -> Result<Buffer> {
        out_buffer("tlrt_buffer_zeros", |o| unsafe { sys::tlrt_buffer_zeros(device.0, n, o) })
    }
    pub fn full(n: u64, value: f64, device: Device) -> Result<Buffer> {
        out_buffer("tlrt_buffer_full", |o| unsafe { sys::tlrt_buffer_full(device.0, n, value, o) })
    }

    pub fn size(&self) -> Result<u64> {
        let mut n = 0u64;
        check("tlrt_buffer_size", unsafe { sys::tlrt_buffer_size(self.raw, &mut n) })?;
        Ok(n)
    }
    pub fn device(&self) -> Result<Device> {
        let mut d = 0;
        check("tlrt_buffer_device", unsafe { sys::tlrt_buffer_device(self.raw, &mut d) })?;
        Ok(Device(d))
    }
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

pub fn abi_version() -> u32 {
    unsafe { sys::tlrt_abi_version() }
}
pub fn build_info() -> String {
    cstr(unsafe { sys::tlrt_build_info() })
}
pub fn runtime_status() -> u32 {
    unsafe { sys::tlrt_runtime_status() }
}
pub fn device_count(kind: u32) -> Result<u32> {
    let mut n = 0;
    check("tlrt_device_count", unsafe { sys::tlrt_device_count(kind, &mut n) })?;
    Ok(n)
}
pub fn synchronize(device: Device) -> Result<()> {
    check("tlrt_synchronize", unsafe { sys::tlrt_synchronize(device.0) })
}
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
pub fn get_deterministic() -> bool {
    unsafe { sys::tlrt_get_deterministic() }
}
/// Returns the previous value.
pub fn set_allow_tf32(on: bool) -> bool {
    unsafe { sys::tlrt_set_allow_tf32(on) }
}
pub fn get_allow_tf32() -> bool {
    unsafe { sys::tlrt_get_allow_tf32() }
}
/// Fault injection for tests (abi/tlrt_runtime.h).
pub fn debug_fail_nth_allocation(n: u64) -> u64 {
    unsafe { sys::tlrt_debug_fail_nth_allocation(n) }
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
