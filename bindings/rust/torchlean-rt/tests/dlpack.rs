//! cargo test --offline (TLRT_LIB_DIR = a build directory): int32 / int64 buffers and their element
//! type, DLPack export and import through the safe crate (the payload shared, never copied; the
//! deleters called once), and the errors of a wrong element type.
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use torchlean_rt::dlpack::{self, DLManagedTensorVersioned, DLTensor};
use torchlean_rt::{self as rt, sys, Buffer, Device, Dtype};

const CPU: Device = Device::CPU;

/// The DLTensor of a versioned managed tensor.
unsafe fn tensor<'a>(m: *mut c_void) -> &'a DLTensor {
    &(*(m as *mut DLManagedTensorVersioned)).dl_tensor
}

unsafe fn shape_of(t: &DLTensor) -> (Vec<i64>, Vec<i64>) {
    let n = t.ndim as usize;
    (std::slice::from_raw_parts(t.shape, n).to_vec(), std::slice::from_raw_parts(t.strides, n).to_vec())
}

#[test]
fn dtype_values_match_the_header() {
    assert_eq!(Dtype::F32.raw(), sys::TLRT_DTYPE_F32);
    assert_eq!(Dtype::I32.raw(), sys::TLRT_DTYPE_I32);
    assert_eq!(Dtype::I64.raw(), sys::TLRT_DTYPE_I64);
    for d in [Dtype::F32, Dtype::I32, Dtype::I64] {
        assert_eq!(Dtype::from_raw(d.raw()), Some(d));
    }
    assert_eq!(Dtype::from_raw(3), None);
    assert_eq!((Dtype::F32.size_of(), Dtype::I32.size_of(), Dtype::I64.size_of()), (4, 4, 8));
}

#[test]
fn int_buffers_round_trip() {
    let v32 = [0, -1, 1, i32::MIN, i32::MAX, 123_456_789];
    let b = Buffer::from_i32(&v32, CPU).unwrap();
    assert_eq!(b.dtype().unwrap(), Dtype::I32);
    assert_eq!(b.size().unwrap(), v32.len() as u64);
    assert_eq!(b.to_vec_i32().unwrap(), v32);
    // A copy (and a copy on the same device) keeps the element type.
    let c = b.copy().unwrap();
    assert_eq!((c.dtype().unwrap(), c.to_vec_i32().unwrap()), (Dtype::I32, v32.to_vec()));
    let d = b.to_device(CPU).unwrap();
    assert_eq!(d.to_vec_i32().unwrap(), v32);

    let v64 = [0, -1, i64::MIN, i64::MAX, 1 << 40, -(1 << 53) - 1];
    let b = Buffer::from_i64(&v64, CPU).unwrap();
    assert_eq!(b.dtype().unwrap(), Dtype::I64);
    assert_eq!(b.to_vec_i64().unwrap(), v64);

    // Empty buffers, zeros of a type.
    let e = Buffer::from_i64(&[], CPU).unwrap();
    assert_eq!((e.dtype().unwrap(), e.to_vec_i64().unwrap()), (Dtype::I64, vec![]));
    assert_eq!(Buffer::from_i32(&[], CPU).unwrap().to_vec_i32().unwrap(), Vec::<i32>::new());
    let z = Buffer::zeros_of(Dtype::I64, 3, CPU).unwrap();
    assert_eq!((z.dtype().unwrap(), z.to_vec_i64().unwrap()), (Dtype::I64, vec![0; 3]));
    let z = Buffer::zeros_of(Dtype::I32, 2, CPU).unwrap();
    assert_eq!(z.to_vec_i32().unwrap(), vec![0; 2]);
    let z = Buffer::zeros_of(Dtype::F32, 2, CPU).unwrap();
    assert_eq!((z.dtype().unwrap(), z.to_vec().unwrap()), (Dtype::F32, vec![0.0; 2]));
    assert_eq!(Buffer::from_f32(&[1.0], CPU).unwrap().dtype().unwrap(), Dtype::F32);
}

#[test]
fn a_wrong_element_type_is_an_error() {
    let i = Buffer::from_i32(&[1, 2, 3], CPU).unwrap();
    let l = Buffer::from_i64(&[1, 2, 3], CPU).unwrap();
    let f = Buffer::from_f32(&[1.0, 2.0, 3.0], CPU).unwrap();
    let e = i.to_vec().unwrap_err();
    assert_eq!((e.status, e.function), (sys::TLRT_ERR_DTYPE, "tlrt_buffer_to_f32"));
    assert_eq!(e.name, "TLRT_ERR_DTYPE");
    assert_eq!(i.to_f64_vec().unwrap_err().status, sys::TLRT_ERR_DTYPE);
    assert_eq!(i.to_bytes().unwrap_err().status, sys::TLRT_ERR_DTYPE);
    let e = i.to_vec_i64().unwrap_err();
    assert_eq!((e.status, e.function), (sys::TLRT_ERR_DTYPE, "tlrt_buffer_to_i64"));
    assert_eq!(l.to_vec_i32().unwrap_err().status, sys::TLRT_ERR_DTYPE);
    assert_eq!(f.to_vec_i32().unwrap_err().status, sys::TLRT_ERR_DTYPE);
    assert_eq!(f.to_vec_i64().unwrap_err().status, sys::TLRT_ERR_DTYPE);
    // An op's float32 argument refuses an integer buffer.
    let e = rt::exp(&i).unwrap_err();
    assert_eq!((e.status, e.function), (sys::TLRT_ERR_DTYPE, "tlrt_exp"));
    assert_eq!(rt::add(&f, &l).unwrap_err().status, sys::TLRT_ERR_DTYPE);
    // An unknown element type.
    let mut out = std::ptr::null_mut();
    let st = unsafe { sys::tlrt_buffer_zeros_of(sys::TLRT_DEVICE_CPU, 3, 1, &mut out) };
    assert_eq!((st, out.is_null()), (sys::TLRT_ERR_INVALID_ARGUMENT, true));
}

#[test]
fn dlpack_round_trip_shares_the_payload() {
    let vals = [1.5f32, -2.0, 0.0, f32::from_bits(0x7FC0_0001)];
    let b = Buffer::from_f32(&vals, CPU).unwrap();
    let m = b.to_dlpack(None).unwrap();
    assert!(!m.is_null());
    let data = unsafe {
        let mv = &*(m as *mut DLManagedTensorVersioned);
        assert_eq!((mv.version.major, mv.version.minor),
                   (dlpack::DLPACK_MAJOR_VERSION, dlpack::DLPACK_MINOR_VERSION));
        assert_eq!(mv.flags, 0);
        assert!(mv.deleter.is_some());
        let t = tensor(m);
        assert_eq!(t.device, dlpack::DLDevice { device_type: dlpack::kDLCPU, device_id: 0 });
        assert_eq!(t.dtype, dlpack::DLDataType { code: dlpack::kDLFloat, bits: 32, lanes: 1 });
        assert_eq!(shape_of(t), (vec![4], vec![1]));
        assert_eq!(t.byte_offset, 0);
        assert!(!t.data.is_null() && t.data as usize % 16 == 0);
        assert_eq!(std::slice::from_raw_parts(t.data as *const f32, 4)
                       .iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                   vals.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        t.data
    };
    // The tensor holds its own reference: it outlives the exported Buffer.
    drop(b);
    let back = unsafe { Buffer::from_dlpack(m) }.unwrap();
    assert_eq!(back.dtype().unwrap(), Dtype::F32);
    assert_eq!(back.device().unwrap(), CPU);
    assert_eq!(back.to_vec().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
               vals.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    // Exported again, the imported buffer shows the same payload (no copy either way), in the
    // caller's shape.
    let m2 = back.to_dlpack(Some(&[2, 2])).unwrap();
    unsafe {
        let t = tensor(m2);
        assert_eq!(t.data, data);
        assert_eq!(t.ndim, 2);
        assert_eq!(shape_of(t), (vec![2, 2], vec![2, 1]));
        dlpack::delete_versioned(m2);
    }
    // Ops read the imported buffer.
    assert_eq!(rt::scale(&back, 2.0).unwrap().to_vec().unwrap()[..3], [3.0, -4.0, 0.0]);
    drop(back); // drops the reference m held: the original payload is freed now

    // A scalar (ndim 0) for a buffer of one element; a shape that does not match the size.
    let one = Buffer::from_f32(&[7.0], CPU).unwrap();
    let m = one.to_dlpack(Some(&[])).unwrap();
    unsafe {
        assert_eq!(tensor(m).ndim, 0);
        let s = Buffer::from_dlpack(m).unwrap();
        assert_eq!(s.to_vec().unwrap(), vec![7.0]);
    }
    let e = one.to_dlpack(Some(&[2])).unwrap_err();
    assert_eq!((e.status, e.function), (sys::TLRT_ERR_SHAPE, "tlrt_buffer_to_dlpack_versioned"));
    let e = one.to_dlpack(Some(&[1; 33])).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_INVALID_ARGUMENT);
    let e = unsafe { Buffer::from_dlpack(std::ptr::null_mut()) }.unwrap_err();
    assert_eq!((e.status, e.function), (sys::TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_from_dlpack_versioned"));
}

#[test]
fn dlpack_int_buffers_round_trip() {
    let v32 = [i32::MIN, -1, 0, 1, i32::MAX, 42];
    let b = Buffer::from_i32(&v32, CPU).unwrap();
    let m = b.to_dlpack(Some(&[3, 2])).unwrap();
    let data = unsafe {
        let t = tensor(m);
        assert_eq!(t.dtype, dlpack::DLDataType { code: dlpack::kDLInt, bits: 32, lanes: 1 });
        assert_eq!(shape_of(t), (vec![3, 2], vec![2, 1]));
        assert_eq!(std::slice::from_raw_parts(t.data as *const i32, 6), v32);
        t.data
    };
    let back = unsafe { Buffer::from_dlpack(m) }.unwrap();
    assert_eq!((back.dtype().unwrap(), back.size().unwrap()), (Dtype::I32, 6));
    assert_eq!(back.to_vec_i32().unwrap(), v32);
    let m2 = back.to_dlpack(None).unwrap();
    unsafe {
        assert_eq!(tensor(m2).data, data);
        dlpack::delete_versioned(m2);
    }

    let v64 = [i64::MIN, -1, 0, i64::MAX];
    let b = Buffer::from_i64(&v64, CPU).unwrap();
    let m = b.to_dlpack(None).unwrap();
    let data = unsafe {
        let t = tensor(m);
        assert_eq!(t.dtype, dlpack::DLDataType { code: dlpack::kDLInt, bits: 64, lanes: 1 });
        assert_eq!(std::slice::from_raw_parts(t.data as *const i64, 4), v64);
        t.data
    };
    let back = unsafe { Buffer::from_dlpack(m) }.unwrap();
    assert_eq!((back.dtype().unwrap(), back.to_vec_i64().unwrap()), (Dtype::I64, v64.to_vec()));
    assert_eq!(back.to_vec().unwrap_err().status, sys::TLRT_ERR_DTYPE);
    let m2 = back.to_dlpack(None).unwrap();
    unsafe {
        assert_eq!(tensor(m2).data, data);
        dlpack::delete_versioned(m2);
    }
    // An exported tensor nobody imports: its deleter drops the reference it holds.
    let m = b.to_dlpack(None).unwrap();
    unsafe { dlpack::delete_versioned(m) };
    assert_eq!(b.to_vec_i64().unwrap(), v64);
}

// ---- a producer's tensor (host memory of this test), imported and deleted exactly once ---------

#[repr(C, align(16))]
struct Payload([f64; 4]);

struct Producer {
    managed: DLManagedTensorVersioned,
    shape: [i64; 1],
    payload: Payload,
}

static DELETED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn delete_producer(m: *mut DLManagedTensorVersioned) {
    DELETED.fetch_add(1, Ordering::SeqCst);
    drop(Box::from_raw((*m).manager_ctx as *mut Producer));
}

/// A heap tensor of 4 elements of `dtype` over the producer's own (16-byte aligned) payload.
fn producer(dtype: dlpack::DLDataType, major: u32) -> *mut c_void {
    let p = Box::into_raw(Box::new(Producer {
        managed: DLManagedTensorVersioned {
            version: dlpack::DLPackVersion { major, minor: 0 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_producer),
            flags: 0,
            dl_tensor: DLTensor {
                data: std::ptr::null_mut(),
                device: dlpack::DLDevice { device_type: dlpack::kDLCPU, device_id: 0 },
                ndim: 1,
                dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        shape: [4],
        payload: Payload([0.0; 4]),
    }));
    unsafe {
        (*p).managed.manager_ctx = p as *mut c_void;
        (*p).managed.dl_tensor.shape = (*p).shape.as_mut_ptr();
        (*p).managed.dl_tensor.data = (*p).payload.0.as_mut_ptr() as *mut c_void;
        &mut (*p).managed as *mut DLManagedTensorVersioned as *mut c_void
    }
}

#[test]
fn dlpack_import_of_a_producer_tensor() {
    // One test owns DELETED (the tests of this file run in parallel threads).
    let base = DELETED.load(Ordering::SeqCst);

    // int64: imported without a copy; the buffer calls the producer's deleter once, at the end.
    let m = producer(dlpack::DLDataType { code: dlpack::kDLInt, bits: 64, lanes: 1 }, 1);
    let data = unsafe { tensor(m).data };
    unsafe { std::slice::from_raw_parts_mut(data as *mut i64, 4).copy_from_slice(&[5, -6, 7, i64::MIN]) };
    let b = unsafe { Buffer::from_dlpack(m) }.unwrap();
    assert_eq!((b.dtype().unwrap(), b.to_vec_i64().unwrap()), (Dtype::I64, vec![5, -6, 7, i64::MIN]));
    let m2 = b.to_dlpack(None).unwrap();
    unsafe {
        assert_eq!(tensor(m2).data, data);
        dlpack::delete_versioned(m2);
    }
    let c = b.clone();
    drop(b);
    assert_eq!(DELETED.load(Ordering::SeqCst), base);
    drop(c);
    assert_eq!(DELETED.load(Ordering::SeqCst), base + 1);

    // float64 is not an element type of the library: refused, and the caller keeps the tensor.
    let m = producer(dlpack::DLDataType { code: dlpack::kDLFloat, bits: 64, lanes: 1 }, 1);
    let e = unsafe { Buffer::from_dlpack(m) }.unwrap_err();
    assert_eq!((e.status, e.function), (sys::TLRT_ERR_UNSUPPORTED, "tlrt_buffer_from_dlpack_versioned"));
    assert_eq!(DELETED.load(Ordering::SeqCst), base + 1);
    // Another major version: refused too.
    let m_old = producer(dlpack::DLDataType { code: dlpack::kDLFloat, bits: 32, lanes: 1 }, 0);
    assert_eq!(unsafe { Buffer::from_dlpack(m_old) }.unwrap_err().status, sys::TLRT_ERR_UNSUPPORTED);
    unsafe {
        dlpack::delete_versioned(m);
        dlpack::delete_versioned(m_old);
    }
    assert_eq!(DELETED.load(Ordering::SeqCst), base + 3);

    // Released storage calls the deleter at once.
    let m = producer(dlpack::DLDataType { code: dlpack::kDLInt, bits: 32, lanes: 1 }, 1);
    let b = unsafe { Buffer::from_dlpack(m) }.unwrap();
    assert_eq!((b.dtype().unwrap(), b.size().unwrap()), (Dtype::I32, 4));
    assert_eq!(b.to_vec_i32().unwrap(), vec![0; 4]);
    assert!(unsafe { b.release_storage() }.unwrap());
    assert_eq!(DELETED.load(Ordering::SeqCst), base + 4);
    assert_eq!(b.dtype().unwrap(), Dtype::I32); // the type of a released buffer is still known
    drop(b);
    assert_eq!(DELETED.load(Ordering::SeqCst), base + 4);
}
