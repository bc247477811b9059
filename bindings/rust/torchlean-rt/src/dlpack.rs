//! A minimal `#[repr(C)]` mirror of the DLPack 1.0 structs (as written in abi/tlrt_dlpack.h, which
//! follows the DLPack specification): enough to read and build the managed tensors that
//! [`Buffer::to_dlpack`](crate::Buffer::to_dlpack) returns and
//! [`Buffer::from_dlpack`](crate::Buffer::from_dlpack) takes, which travel as `*mut c_void`.
//! Hand-written; the layout is checked by the tests (`tests/dlpack.rs`) against what the library
//! writes.
#![allow(non_upper_case_globals)]

use std::ffi::c_void;

/// `DLPackVersion`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

/// The version the library exports (`DLPACK_MAJOR_VERSION`.`DLPACK_MINOR_VERSION`) and the only
/// major version it imports.
pub const DLPACK_MAJOR_VERSION: u32 = 1;
pub const DLPACK_MINOR_VERSION: u32 = 0;
/// `flags` bits of [`DLManagedTensorVersioned`].
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;

/// `DLDeviceType` (a C enum: int-sized).
pub type DLDeviceType = i32;
pub const kDLCPU: DLDeviceType = 1;
pub const kDLCUDA: DLDeviceType = 2;
pub const kDLCUDAHost: DLDeviceType = 3;

/// `DLDevice`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDevice {
    pub device_type: DLDeviceType,
    pub device_id: i32,
}

/// `DLDataTypeCode` values (the `code` byte of [`DLDataType`]).
pub const kDLInt: u8 = 0;
pub const kDLUInt: u8 = 1;
pub const kDLFloat: u8 = 2;

/// `DLDataType`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

/// `DLTensor`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

/// `DLManagedTensor` (the legacy struct of DLPack 0.x).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLManagedTensorVersioned` (DLPack 1.x).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

/// Calls the deleter of a versioned managed tensor (if it has one): what a consumer does once it
/// no longer needs a tensor, e.g. one from [`Buffer::to_dlpack`](crate::Buffer::to_dlpack) that
/// is not imported anywhere.
///
/// # Safety
/// `managed` must be null or a live `DLManagedTensorVersioned *` that nobody else owns; it must not
/// be used afterwards.
pub unsafe fn delete_versioned(managed: *mut c_void) {
    let m = managed as *mut DLManagedTensorVersioned;
    if !m.is_null() {
        if let Some(d) = (*m).deleter {
            d(m);
        }
    }
}
