//! Checkpoints (torchlean_rt::checkpoint over abi/tlrt_checkpoint.h): round trips with shapes,
//! element types and metadata, the exact bytes of a small file, files written by hand in other
//! dtypes (F16 / BF16 / F64 converted, U8 refused), the library's errors as `Error`s, and `Drop`
//! closing the file while loaded tensors live on.
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use torchlean_rt::{self as rt, sys, Device, Dtype, SafeTensors, Tensor};

/// A fresh path in the temporary directory (removed by the test that made it).
fn temp_path(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!("tlrt_rust_ckpt_{}_{}_{}.safetensors", std::process::id(), tag,
                                      N.fetch_add(1, Ordering::Relaxed)))
}

/// A file from a header (padded with spaces to 8 bytes) and the data.
fn file_bytes(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.as_bytes().to_vec();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    out
}

#[test]
fn round_trip_with_shapes_types_and_metadata() {
    let p = temp_path("round");
    let w = Tensor::from_f32(&[1.0, -0.0, f32::INFINITY, 2.5, f32::MIN_POSITIVE / 4.0, 6.0], &[2, 3], Device::CPU).unwrap();
    let idx = Tensor::from_i32(&[3, -1, i32::MAX], &[3], Device::CPU).unwrap();
    let step = Tensor::from_i64(&[i64::MIN], &[], Device::CPU).unwrap();
    let empty = Tensor::zeros(&[4, 0], Device::CPU).unwrap();
    let nan = Tensor::from_f32(&[f32::from_bits(0x7FC1_2345)], &[1, 1, 1], Device::CPU).unwrap();
    rt::save_safetensors(&p, &[("w", &w), ("idx", &idx), ("step", &step), ("empty", &empty), ("nan", &nan)],
                         &[("format", "pt"), ("note", "é \"quoted\"\n")]).unwrap();
    assert!(!PathBuf::from(format!("{}.tmp", p.display())).exists());

    let f = SafeTensors::open(&p).unwrap();
    assert_eq!(f.len().unwrap(), 5);
    assert_eq!(f.names().unwrap(), vec!["empty", "idx", "nan", "step", "w"]);
    let meta = f.metadata().unwrap();
    assert_eq!(meta.len(), 2);
    assert_eq!(meta["format"], "pt");
    assert_eq!(meta["note"], "é \"quoted\"\n");
    let (dtype, shape) = f.info("w").unwrap();
    assert_eq!((dtype.name(), shape), ("F32", vec![2, 3]));
    assert!(dtype.loadable());
    assert_eq!(f.info("step").unwrap(), (rt::FileDtype(sys::TLRT_SAFETENSORS_I64), vec![]));
    assert_eq!(f.info("idx").unwrap().0.name(), "I32");

    let w2 = f.load("w", Device::CPU).unwrap();
    assert_eq!(w2.shape(), &[2, 3]);
    let bits: Vec<u32> = w2.to_vec().unwrap().iter().map(|x| x.to_bits()).collect();
    let want: Vec<u32> = w.to_vec().unwrap().iter().map(|x| x.to_bits()).collect();
    assert_eq!(bits, want);
    let idx2 = f.load("idx", Device::CPU).unwrap();
    assert_eq!((idx2.dtype(), idx2.to_vec_i32().unwrap()), (Dtype::I32, vec![3, -1, i32::MAX]));
    let step2 = f.load("step", Device::CPU).unwrap();
    assert_eq!((step2.shape().len(), step2.to_vec_i64().unwrap()), (0, vec![i64::MIN]));
    assert_eq!(f.load("empty", Device::CPU).unwrap().shape(), &[4, 0]);
    assert_eq!(f.load("nan", Device::CPU).unwrap().to_vec().unwrap()[0].to_bits(), 0x7FC1_2345);

    // The whole file at once; the handle closes with Drop while the tensors live on.
    let all = rt::load_safetensors(&p, Device::CPU).unwrap();
    assert_eq!(all.keys().cloned().collect::<Vec<_>>(), f.names().unwrap());
    drop(f);
    assert_eq!(all["idx"].to_vec_i32().unwrap(), vec![3, -1, i32::MAX]);
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn known_bytes() {
    // I64 first, then F32, then I32 (the reference writer's layout); the 193-byte header padded
    // to 200.
    let p = temp_path("known");
    let b = Tensor::from_f32(&[1.0, 2.0], &[2], Device::CPU).unwrap();
    let a = Tensor::from_i32(&[7], &[], Device::CPU).unwrap();
    let c = Tensor::from_i64(&[-1], &[1], Device::CPU).unwrap();
    rt::save_safetensors(&p, &[("b", &b), ("a", &a), ("c", &c)], &[("format", "pt")]).unwrap();
    let header = r#"{"__metadata__":{"format":"pt"},"c":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"a":{"dtype":"I32","shape":[],"data_offsets":[16,20]}}"#;
    let data = [0xFFu8, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0x80, 0x3F, 0, 0, 0, 0x40, 7, 0, 0, 0];
    assert_eq!(std::fs::read(&p).unwrap(), file_bytes(header, &data));
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn other_dtypes_convert_or_are_refused() {
    let p = temp_path("dtypes");
    let header = r#"{"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]},"d":{"dtype":"F64","shape":[2],"data_offsets":[12,28]},"u":{"dtype":"U8","shape":[2],"data_offsets":[28,30]}}"#;
    let mut data = Vec::new();
    for h in [0x3C00u16, 0x0001, 0xFC00, 0x8000] {
        data.extend_from_slice(&h.to_le_bytes()); // 1, 2^-24, -inf, -0
    }
    for b in [0x3F80u16, 0x7FC1] {
        data.extend_from_slice(&b.to_le_bytes()); // 1, a NaN
    }
    for d in [0.1f64, 1.0 + f64::powi(2.0, -24)] {
        data.extend_from_slice(&d.to_le_bytes()); // rounds to 0.1f32; a tie, to 1
    }
    data.extend_from_slice(&[1, 2]);
    std::fs::write(&p, file_bytes(header, &data)).unwrap();
    let f = SafeTensors::open(&p).unwrap();
    let h: Vec<u32> = f.load("h", Device::CPU).unwrap().to_vec().unwrap().iter().map(|x| x.to_bits()).collect();
    assert_eq!(h, vec![0x3F80_0000, 0x3380_0000, 0xFF80_0000, 0x8000_0000]);
    let b: Vec<u32> = f.load("b", Device::CPU).unwrap().to_vec().unwrap().iter().map(|x| x.to_bits()).collect();
    assert_eq!(b, vec![0x3F80_0000, 0x7FC1_0000]);
    assert_eq!(f.load("d", Device::CPU).unwrap().to_vec().unwrap(), vec![0.1f32, 1.0]);
    let (u, shape) = f.info("u").unwrap();
    assert_eq!((u.name(), u.loadable(), shape), ("U8", false, vec![2]));
    let e = f.load("u", Device::CPU).unwrap_err();
    assert_eq!((e.status, e.name.as_str(), e.function), (sys::TLRT_ERR_DTYPE, "TLRT_ERR_DTYPE", "tlrt_safetensors_load"));
    assert!(e.message.contains("U8"), "{e}");
    drop(f);
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn errors_are_the_librarys() {
    let missing = temp_path("missing");
    let e = SafeTensors::open(&missing).unwrap_err();
    assert_eq!((e.status, e.name.as_str()), (sys::TLRT_ERR_IO, "TLRT_ERR_IO"));
    assert!(e.message.contains("argument path"), "{e}");

    let p = temp_path("errors");
    std::fs::write(&p, file_bytes(r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#, &[0; 4])).unwrap();
    let e = SafeTensors::open(&p).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_FORMAT);
    assert!(e.message.contains("needs 8"), "{e}");

    let t = Tensor::from_f32(&[1.0], &[1], Device::CPU).unwrap();
    let e = rt::save_safetensors(&p, &[("x", &t), ("x", &t)], &[]).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_INVALID_ARGUMENT);
    let e = rt::save_safetensors(&p, &[("a\0b", &t)], &[]).unwrap_err();
    assert_eq!((e.status, e.function), (sys::TLRT_ERR_INVALID_ARGUMENT, "tlrt_safetensors_save"));
    let e = rt::save_safetensors(&p, &[("__metadata__", &t)], &[]).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_INVALID_ARGUMENT);
    let e = rt::save_safetensors(temp_path("no/such/dir"), &[("x", &t)], &[]).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_IO);

    rt::save_safetensors(&p, &[("x", &t)], &[]).unwrap();
    let f = SafeTensors::open(&p).unwrap();
    assert_eq!(f.info("y").unwrap_err().status, sys::TLRT_ERR_INDEX);
    assert_eq!(f.load("y", Device::CPU).unwrap_err().status, sys::TLRT_ERR_INDEX);
    assert_eq!(f.info("x\0").unwrap_err().status, sys::TLRT_ERR_INVALID_ARGUMENT);
    assert!(f.metadata().unwrap().is_empty());
    drop(f);
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SafeTensors>();
    let p = temp_path("threads");
    let v: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    let t = Tensor::from_f32(&v, &[10, 100], Device::CPU).unwrap();
    rt::save_safetensors(&p, &[("t", &t)], &[]).unwrap();
    let f = SafeTensors::open(&p).unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..10 {
                    assert_eq!(f.load("t", Device::CPU).unwrap().to_vec().unwrap(), v);
                }
            });
        }
    });
    drop(f);
    std::fs::remove_file(&p).unwrap();
}
