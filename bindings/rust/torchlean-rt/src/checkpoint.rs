//! Checkpoints in the safetensors format (abi/tlrt_checkpoint.h), the format of Hugging Face's
//! `safetensors` package that PyTorch, NumPy, JAX and the Hub read and write.
//!
//! * [`save_safetensors`] writes named [`Tensor`]s (float32, int32 or int64, any device, each with
//!   its shape) and string metadata, atomically (a `.tmp` file renamed over the path), in the
//!   reference writer's layout.
//! * [`SafeTensors`] is an open file whose header was validated as a whole by
//!   [`SafeTensors::open`]: names (sorted), dtypes, shapes and metadata at once, each tensor's
//!   values when asked for ([`SafeTensors::load`]); `Drop` closes it. F16, BF16 and F64 tensors
//!   load as float32 (F16 and BF16 exactly, F64 rounded to nearest), so PyTorch's half-precision
//!   checkpoints load; other dtypes are listed but refused (`TLRT_ERR_DTYPE`).
//! * [`load_safetensors`] loads every tensor of a file.
//!
//! ```no_run
//! use torchlean_rt::{checkpoint, Device, Tensor};
//! let w = Tensor::from_f32(&[1.0, 2.0, 3.0, 4.0], &[2, 2], Device::CPU)?;
//! checkpoint::save_safetensors("model.safetensors", &[("w", &w)], &[("format", "pt")])?;
//! let f = checkpoint::SafeTensors::open("model.safetensors")?;
//! assert_eq!(f.names()?, vec!["w".to_string()]);
//! let (dtype, shape) = f.info("w")?;
//! assert_eq!((dtype.name(), shape), ("F32", vec![2, 2]));
//! let w2 = f.load("w", Device::CPU)?;
//! # Ok::<(), torchlean_rt::Error>(())
//! ```
//! Hand-written over the raw `sys` functions (the generator does not make the safe layer of
//! `tlrt_checkpoint.h`).
use crate::{binding_error, check, cstr, sys, Buffer, Device, Result, Tensor};
use std::collections::BTreeMap;
use std::ffi::{c_char, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The dtype of a tensor in a safetensors file: a `TLRT_SAFETENSORS_*` code
/// (`sys::TLRT_SAFETENSORS_BF16`, ...), whatever this binding's version knows of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileDtype(pub u32);

impl FileDtype {
    /// The name the file spells ("F32", "BF16", ...; "UNKNOWN" for a code the library does not
    /// have).
    pub fn name(self) -> &'static str {
        let p = unsafe { sys::tlrt_safetensors_dtype_name(self.0) };
        // A static string of the library (never NULL, never freed), ASCII.
        unsafe { std::ffi::CStr::from_ptr(p) }.to_str().unwrap_or("UNKNOWN")
    }
    /// Whether [`SafeTensors::load`] takes it: F32, I32, I64 (as they are), F16, BF16, F64 (as
    /// float32).
    pub fn loadable(self) -> bool {
        self.0 <= sys::TLRT_SAFETENSORS_F64
    }
}

fn c_string(function: &'static str, what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| {
        binding_error(function, sys::TLRT_ERR_INVALID_ARGUMENT,
                      format!("{function}: argument {what} holds a NUL character"))
    })
}

fn c_path(function: &'static str, path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        binding_error(function, sys::TLRT_ERR_INVALID_ARGUMENT,
                      format!("{function}: argument path holds a NUL byte"))
    })
}

/// Writes `tensors` (name, tensor) and `metadata` (key, value) to the safetensors file `path`
/// (`tlrt_safetensors_save`): each tensor with its shape and element type ("F32", "I32",
/// "I64"), from any device; the metadata as the file's `"__metadata__"` (none when empty). The
/// file is written to `path` + ".tmp", flushed and renamed: `path` is replaced whole or left as
/// it was. Errors are the library's: `TLRT_ERR_INVALID_ARGUMENT` for an empty, repeated or
/// `"__metadata__"` name or a repeated key (a NUL inside a string is refused by the binding with
/// the same code), `TLRT_ERR_IO` for a file that cannot be written, ...
pub fn save_safetensors<P: AsRef<Path>>(path: P, tensors: &[(&str, &Tensor)],
                                        metadata: &[(&str, &str)]) -> Result<()> {
    const F: &str = "tlrt_safetensors_save";
    let path = c_path(F, path.as_ref())?;
    let names = tensors.iter().map(|(n, _)| c_string(F, "names", n)).collect::<Result<Vec<_>>>()?;
    let keys = metadata.iter().map(|(k, _)| c_string(F, "meta_keys", k)).collect::<Result<Vec<_>>>()?;
    let values =
        metadata.iter().map(|(_, v)| c_string(F, "meta_values", v)).collect::<Result<Vec<_>>>()?;
    let name_ptrs: Vec<*const c_char> = names.iter().map(|s| s.as_ptr()).collect();
    let key_ptrs: Vec<*const c_char> = keys.iter().map(|s| s.as_ptr()).collect();
    let value_ptrs: Vec<*const c_char> = values.iter().map(|s| s.as_ptr()).collect();
    let buffers: Vec<*const sys::tlrt_buffer> = tensors.iter().map(|(_, t)| t.buffer().as_ptr()).collect();
    // A scalar's empty shape is passed as NULL with rank 0 (the C shorthand for a scalar).
    let dims: Vec<*const u64> = tensors
        .iter()
        .map(|(_, t)| if t.shape().is_empty() { std::ptr::null() } else { t.shape().as_ptr() })
        .collect();
    let ranks: Vec<u32> = tensors.iter().map(|(_, t)| t.shape().len() as u32).collect();
    check(F, unsafe {
        sys::tlrt_safetensors_save(path.as_ptr(), tensors.len() as u64, name_ptrs.as_ptr(),
                                   buffers.as_ptr(), dims.as_ptr(), ranks.as_ptr(),
                                   metadata.len() as u64, key_ptrs.as_ptr(), value_ptrs.as_ptr())
    })
}

/// An open safetensors file (`tlrt_safetensors *`). `Drop` closes it; buffers and tensors loaded
/// from it stay valid. The handle is read-only, so it may be shared between threads (`Sync`):
/// loads read the file at explicit offsets.
pub struct SafeTensors {
    raw: *mut sys::tlrt_safetensors,
}

// abi/tlrt_checkpoint.h: every call but close only reads the handle and may run concurrently;
// close runs in Drop, which has the handle to itself.
unsafe impl Send for SafeTensors {}
unsafe impl Sync for SafeTensors {}

impl Drop for SafeTensors {
    fn drop(&mut self) {
        unsafe { sys::tlrt_safetensors_close(self.raw) }
    }
}

impl std::fmt::Debug for SafeTensors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.len() {
            Ok(n) => write!(f, "SafeTensors(tensors={n})"),
            Err(e) => write!(f, "SafeTensors(<{}>)", e.name),
        }
    }
}

impl SafeTensors {
    /// Opens `path` and validates its whole header (`tlrt_safetensors_open`; no tensor data is
    /// read): `TLRT_ERR_IO` when the file cannot be read, `TLRT_ERR_FORMAT` when it is not a valid
    /// safetensors file (the message says what and where).
    pub fn open<P: AsRef<Path>>(path: P) -> Result<SafeTensors> {
        const F: &str = "tlrt_safetensors_open";
        let path = c_path(F, path.as_ref())?;
        let mut raw = std::ptr::null_mut();
        check(F, unsafe { sys::tlrt_safetensors_open(path.as_ptr(), &mut raw) })?;
        Ok(SafeTensors { raw })
    }

    /// The number of tensors.
    pub fn len(&self) -> Result<usize> {
        let mut n = 0u64;
        check("tlrt_safetensors_count", unsafe { sys::tlrt_safetensors_count(self.raw, &mut n) })?;
        Ok(n as usize)
    }

    /// Whether the file holds no tensor.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The tensor names, sorted (by their UTF-8 bytes, which is code point order).
    pub fn names(&self) -> Result<Vec<String>> {
        (0..self.len()? as u64)
            .map(|i| {
                let mut p: *const c_char = std::ptr::null();
                check("tlrt_safetensors_name", unsafe { sys::tlrt_safetensors_name(self.raw, i, &mut p) })?;
                Ok(cstr(p))
            })
            .collect()
    }

    /// The `"__metadata__"` entries, by key (empty when the file has none).
    pub fn metadata(&self) -> Result<BTreeMap<String, String>> {
        let mut n = 0u64;
        check("tlrt_safetensors_metadata_count", unsafe {
            sys::tlrt_safetensors_metadata_count(self.raw, &mut n)
        })?;
        let mut out = BTreeMap::new();
        for i in 0..n {
            let mut k: *const c_char = std::ptr::null();
            let mut v: *const c_char = std::ptr::null();
            check("tlrt_safetensors_metadata_key", unsafe {
                sys::tlrt_safetensors_metadata_key(self.raw, i, &mut k)
            })?;
            check("tlrt_safetensors_metadata", unsafe { sys::tlrt_safetensors_metadata(self.raw, k, &mut v) })?;
            out.insert(cstr(k), cstr(v));
        }
        Ok(out)
    }

    /// The dtype and shape of tensor `name` (`tlrt_safetensors_info`; `TLRT_ERR_INDEX` for a name
    /// the file does not have).
    pub fn info(&self, name: &str) -> Result<(FileDtype, Vec<u64>)> {
        const F: &str = "tlrt_safetensors_info";
        let name = c_string(F, "name", name)?;
        let mut dims = vec![0u64; sys::TLRT_SAFETENSORS_MAX_RANK as usize];
        let (mut dtype, mut rank) = (0u32, 0u32);
        check(F, unsafe {
            sys::tlrt_safetensors_info(self.raw, name.as_ptr(), &mut dtype, dims.as_mut_ptr(),
                                       sys::TLRT_SAFETENSORS_MAX_RANK, &mut rank)
        })?;
        dims.truncate(rank as usize);
        Ok((FileDtype(dtype), dims))
    }

    /// Tensor `name` as a flat buffer on `device` (`tlrt_safetensors_load`): F32, I32 and I64 as
    /// they are, F16 and BF16 exactly as float32, F64 rounded to float32; `TLRT_ERR_DTYPE` for the
    /// other dtypes, `TLRT_ERR_INDEX` for a name the file does not have.
    pub fn load_buffer(&self, name: &str, device: Device) -> Result<Buffer> {
        const F: &str = "tlrt_safetensors_load";
        let name = c_string(F, "name", name)?;
        let mut raw = std::ptr::null_mut();
        check(F, unsafe { sys::tlrt_safetensors_load(self.raw, name.as_ptr(), device.0, &mut raw) })?;
        Ok(unsafe { Buffer::from_raw(raw) })
    }

    /// Tensor `name` with its shape on `device` ([`SafeTensors::load_buffer`]'s conversions; a
    /// rank above [`crate::tensor::MAX_RANK`] is `TLRT_ERR_SHAPE`: use `load_buffer` and `info`).
    pub fn load(&self, name: &str, device: Device) -> Result<Tensor> {
        let (_, shape) = self.info(name)?;
        Tensor::from_buffer(self.load_buffer(name, device)?, &shape)
    }

    /// The raw handle, still owned by this value (for the `sys` functions).
    pub fn as_ptr(&self) -> *const sys::tlrt_safetensors {
        self.raw
    }
}

/// Every tensor of the safetensors file `path`, by name, on `device` (see [`SafeTensors::load`]).
pub fn load_safetensors<P: AsRef<Path>>(path: P, device: Device) -> Result<BTreeMap<String, Tensor>> {
    let f = SafeTensors::open(path)?;
    f.names()?.into_iter().map(|n| {
        let t = f.load(&n, device)?;
        Ok((n, t))
    }).collect()
}
