//! cargo test --offline (TLRT_LIB_DIR = a build directory): the stream functions' errors on the
//! CPU and on CUDA devices this process cannot use; with a GPU, the current stream round trip and
//! the scoped guard.
use std::ptr::null_mut;
use torchlean_rt::{self as rt, sys, Buffer, Device};

#[test]
fn the_cpu_has_no_stream() {
    let cpu = Device::CPU;
    let fake = 0x1000usize as *mut std::ffi::c_void; // the calls fail before using it
    assert_eq!(rt::stream_get(cpu).unwrap_err().status, sys::TLRT_ERR_UNSUPPORTED);
    unsafe {
        assert_eq!(rt::stream_set(cpu, null_mut()).unwrap_err().status, sys::TLRT_ERR_UNSUPPORTED);
        assert_eq!(rt::stream_record_event(cpu, fake).unwrap_err().status, sys::TLRT_ERR_UNSUPPORTED);
        assert_eq!(rt::stream_wait_event(cpu, fake).unwrap_err().status, sys::TLRT_ERR_UNSUPPORTED);
        let e = rt::stream_wait_for_library(cpu, fake).unwrap_err();
        assert_eq!((e.status, e.function), (sys::TLRT_ERR_UNSUPPORTED, "tlrt_stream_wait_for_library"));
        // NULL comes before the device.
        assert_eq!(rt::stream_record_event(cpu, null_mut()).unwrap_err().status, sys::TLRT_ERR_NULL_ARGUMENT);
        assert_eq!(rt::stream_wait_for_library(cpu, null_mut()).unwrap_err().status,
                   sys::TLRT_ERR_NULL_ARGUMENT);
        assert!(rt::use_stream(cpu, rt::CUDA_STREAM_LEGACY).is_err());
    }
}

#[test]
fn cuda_streams() {
    let g = Device::cuda(0);
    match rt::runtime_status() {
        sys::TLRT_RUNTIME_CPU_ONLY => {
            assert_eq!(rt::stream_get(g).unwrap_err().status, sys::TLRT_ERR_BACKEND_UNAVAILABLE)
        }
        sys::TLRT_RUNTIME_CUDA_NO_DEVICE => {
            assert_eq!(rt::stream_get(g).unwrap_err().status, sys::TLRT_ERR_NO_DEVICE)
        }
        _ => {
            let own = rt::stream_get(g).unwrap();
            assert!(!own.is_null());
            {
                let _guard = unsafe { rt::use_stream(g, rt::CUDA_STREAM_LEGACY) }.unwrap();
                assert_eq!(rt::stream_get(g).unwrap(), rt::CUDA_STREAM_LEGACY);
                let a = Buffer::full(1000, 2.0, g).unwrap();
                let b = rt::add(&a, &a).unwrap();
                unsafe { rt::stream_wait_for_library(g, own) }.unwrap();
                assert_eq!(b.to_vec().unwrap(), vec![4.0f32; 1000]);
            }
            assert_eq!(rt::stream_get(g).unwrap(), own);
            rt::synchronize(g).unwrap();
        }
    }
}
