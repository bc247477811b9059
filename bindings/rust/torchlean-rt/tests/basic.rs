//! cargo test --offline (TLRT_LIB_DIR = a build directory): round trips, ops, errors, the tape.
use torchlean_rt::{self as rt, sys, Buffer, Device, Tape};

const CPU: Device = Device::CPU;

#[test]
fn round_trips_keep_every_bit() {
    let vals = [0.0f32, -0.0, 1.5, -2.25, f32::INFINITY, f32::NEG_INFINITY, 1e-45, f32::MAX,
                f32::from_bits(0x7FC0_0001), f32::from_bits(0xFFC1_2345)];
    let b = Buffer::from_f32(&vals, CPU).unwrap();
    assert_eq!(b.size().unwrap(), vals.len() as u64);
    assert_eq!(b.device().unwrap(), CPU);
    let back = b.to_vec().unwrap();
    assert!(back.iter().zip(&vals).all(|(x, y)| x.to_bits() == y.to_bits()), "{back:?}");
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(b.to_bytes().unwrap(), bytes);
    assert_eq!(Buffer::from_bytes(&bytes, CPU).unwrap().to_bytes().unwrap(), bytes);
    // float64 rounds to nearest float32; widening back is exact.
    let d = Buffer::from_f64(&[0.1, 16777217.0, 1e300], CPU).unwrap();
    assert_eq!(d.to_f64_vec().unwrap(), vec![0.1f32 as f64, 16777216.0, f64::INFINITY]);
    // Empty buffers.
    let e = Buffer::from_f32(&[], CPU).unwrap();
    assert_eq!(e.size().unwrap(), 0);
    assert!(e.to_vec().unwrap().is_empty());
    assert_eq!(Buffer::zeros(3, CPU).unwrap().to_vec().unwrap(), vec![0.0; 3]);
    assert_eq!(Buffer::full(2, -1.5, CPU).unwrap().to_vec().unwrap(), vec![-1.5; 2]);
    let c = b.copy().unwrap();
    assert_ne!(c.as_ptr(), b.as_ptr());
    assert_eq!(c.to_bytes().unwrap(), bytes);
    // Clone is a second owner of the same handle.
    let r = b.clone();
    assert_eq!(r.as_ptr(), b.as_ptr());
    drop(b);
    assert_eq!(r.to_bytes().unwrap(), bytes);
}

#[test]
fn ops_compute() {
    let a = Buffer::from_f32(&[1.0, -2.0, 3.0, 0.0], CPU).unwrap();
    let b = Buffer::from_f32(&[4.0, 5.0, 3.0, -0.0], CPU).unwrap();
    assert_eq!(rt::add(&a, &b).unwrap().to_vec().unwrap(), vec![5.0, 3.0, 6.0, 0.0]);
    assert_eq!(rt::clamp(&a, -1.0, 2.0).unwrap().to_vec().unwrap(), vec![1.0, -1.0, 2.0, 0.0]);
    let g = Buffer::full(4, 2.0, CPU).unwrap();
    let (da, db) = rt::max_bwd(&a, &b, &g).unwrap();
    assert_eq!(da.to_vec().unwrap(), vec![0.0, 0.0, 1.0, 1.0]);
    assert_eq!(db.to_vec().unwrap(), vec![2.0, 2.0, 1.0, 1.0]);
    // (2, 3) x (3, 1) matmul and an array argument (dims) whose rank is filled in.
    let x = Buffer::from_f32(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], CPU).unwrap();
    let w = Buffer::from_f32(&[1.0, 0.0, -1.0], CPU).unwrap();
    assert_eq!(rt::matmul(&x, &w, 2, 3, 1, false, false).unwrap().to_vec().unwrap(), vec![-2.0, -2.0]);
    assert_eq!(rt::reduce_sum_axis(&x, &[2, 3], 0).unwrap().to_vec().unwrap(), vec![5.0, 7.0, 9.0]);
    assert_eq!(rt::permute(&x, &[2, 3], &[1, 0]).unwrap().to_vec().unwrap(),
               vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(rt::gather_vec(&x, 6, &[5, 0]).unwrap().to_vec().unwrap(), vec![6.0, 1.0]);
    let host = rt::dgemm(&[1.0, 2.0, 3.0, 4.0], &[1.0, 1.0], 2, 2, 1).unwrap();
    assert_eq!(host, vec![3.0, 7.0]);
}

#[test]
fn errors_carry_status_and_message() {
    let a = Buffer::from_f32(&[1.0, 2.0, 3.0], CPU).unwrap();
    let b = Buffer::from_f32(&[1.0, 2.0], CPU).unwrap();
    let e = rt::add(&a, &b).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_SHAPE);
    assert_eq!(e.name, "TLRT_ERR_SHAPE");
    assert_eq!(e.function, "tlrt_add");
    assert!(e.message.contains("tlrt_add") && e.message.contains("argument b"), "{}", e.message);
    assert!(e.to_string().contains("TLRT_ERR_SHAPE (3)"));
    let boxed: Box<dyn std::error::Error> = Box::new(e);
    assert!(boxed.to_string().contains("tlrt_add"));
    let e = rt::clamp(&a, f64::NAN, 1.0).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_INVALID_ARGUMENT);
    let e = Buffer::from_bytes(&[1, 2, 3, 4, 5], CPU).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_SHAPE);
    // The binding refuses an uncounted array of the wrong length before the library reads it.
    let e = rt::permute(&a, &[3], &[0, 1]).unwrap_err();
    assert_eq!((e.status, e.function), (sys::TLRT_ERR_SHAPE, "tlrt_permute"));
    let e = rt::dgemm(&[1.0], &[1.0], 2, 2, 2).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_SHAPE);
    // Released storage.
    let c = Buffer::from_f32(&[1.0], CPU).unwrap();
    assert!(unsafe { c.release_storage() }.unwrap());
    assert!(c.is_released().unwrap());
    assert_eq!(c.size().unwrap_err().status, sys::TLRT_ERR_RELEASED);
    assert_eq!(rt::exp(&c).unwrap_err().status, sys::TLRT_ERR_RELEASED);
    // CUDA: unavailable in a CPU build, no device on a GPU-less CUDA build.
    match rt::runtime_status() {
        sys::TLRT_RUNTIME_CPU_ONLY => assert_eq!(Buffer::zeros(1, Device::cuda(0)).unwrap_err().status,
                                                 sys::TLRT_ERR_BACKEND_UNAVAILABLE),
        sys::TLRT_RUNTIME_CUDA_NO_DEVICE => assert_eq!(Buffer::zeros(1, Device::cuda(0)).unwrap_err().status,
                                                       sys::TLRT_ERR_NO_DEVICE),
        _ => {
            let g = Buffer::from_f32(&[1.0, 2.0, 3.0], Device::cuda(0)).unwrap();
            assert_eq!(rt::add(&g, &a).unwrap_err().status, sys::TLRT_ERR_DEVICE_MISMATCH);
            assert_eq!(rt::add(&g, &g).unwrap().to_device(CPU).unwrap().to_vec().unwrap(), vec![2.0, 4.0, 6.0]);
        }
    }
    assert_eq!(rt::status_string(sys::TLRT_ERR_NO_DEVICE), "TLRT_ERR_NO_DEVICE");
    assert_eq!(rt::abi_version() >> 16, sys::TLRT_ABI_VERSION_MAJOR);
}

#[test]
fn tape_gradients() {
    // loss = sum(relu(x W^T + b)) with x (2, 3), W (2, 3), b (2): the gradients by hand.
    let mut t = Tape::new(CPU).unwrap();
    let xv = [1.0f32, -2.0, 0.5, 3.0, 1.0, -1.0];
    let wv = [0.5f32, 0.25, -1.0, -0.5, 1.0, 2.0];
    let x = Buffer::from_f32(&xv, CPU).unwrap();
    let w = Buffer::from_f32(&wv, CPU).unwrap();
    let b = Buffer::from_f32(&[0.1, -0.2], CPU).unwrap();
    let xn = t.leaf(&x, &[2, 3], false).unwrap();
    let wn = t.leaf(&w, &[2, 3], true).unwrap();
    let bn = t.leaf(&b, &[2], true).unwrap();
    let h = t.linear(xn, wn, bn).unwrap();
    assert_eq!(t.shape(h).unwrap(), (vec![2, 2], true));
    let a = t.relu(h).unwrap();
    let loss = t.reduce_sum(a).unwrap();
    t.backward(loss).unwrap();
    let hv = t.value(h).unwrap().to_vec().unwrap();
    // h[i][o] = sum_k x[i][k] w[o][k] + b[o]
    let mut want_h = [0f32; 4];
    for i in 0..2 {
        for o in 0..2 {
            want_h[i * 2 + o] = (0..3).map(|k| xv[i * 3 + k] * wv[o * 3 + k]).sum::<f32>() + [0.1, -0.2][o];
        }
    }
    for (g, w) in hv.iter().zip(&want_h) {
        assert!((g - w).abs() < 1e-5, "{hv:?} vs {want_h:?}");
    }
    let mask: Vec<f32> = want_h.iter().map(|&v| if v > 0.0 { 1.0 } else { 0.0 }).collect();
    let dw = t.grad(wn).unwrap().to_vec().unwrap();
    for o in 0..2 {
        for k in 0..3 {
            let want: f32 = (0..2).map(|i| mask[i * 2 + o] * xv[i * 3 + k]).sum();
            assert!((dw[o * 3 + k] - want).abs() < 1e-5, "dW {dw:?}");
        }
    }
    let db = t.grad(bn).unwrap().to_vec().unwrap();
    assert_eq!(db, vec![mask[0] + mask[2], mask[1] + mask[3]]);
    // Errors from the tape carry its status and message.
    let e = t.add(wn, bn).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_SHAPE);
    assert!(e.message.contains("tlrt_tape_add"), "{}", e.message);
    // Ids name their tape and reset generation: a made-up id is stale, an index past the tape's
    // nodes (under this tape's tag and generation) is an index error.
    assert_eq!(t.relu(12345).unwrap_err().status, sys::TLRT_ERR_STALE_HANDLE);
    assert_eq!(t.relu((wn & !0xFFFF_FFFF) | 12345).unwrap_err().status, sys::TLRT_ERR_INDEX);
    assert_eq!(t.grad(xn).unwrap_err().status, sys::TLRT_ERR_INVALID_ARGUMENT);
    // The binding checks the permutation length against the node's rank.
    assert_eq!(t.permute(wn, &[0]).unwrap_err().status, sys::TLRT_ERR_SHAPE);
    let pn = t.permute(wn, &[1, 0]).unwrap();
    assert_eq!(t.value(pn).unwrap().size().unwrap(), 6);
    t.reset().unwrap();
    assert_eq!(t.node_count().unwrap(), 0);
    assert_eq!(t.relu(wn).unwrap_err().status, sys::TLRT_ERR_STALE_HANDLE);
}

#[test]
fn optimizer_step_updates_in_place() {
    let p = Buffer::from_f32(&[1.0, -1.0], CPU).unwrap();
    let g = Buffer::from_f32(&[0.5, 0.25], CPU).unwrap();
    rt::sgd_step(&p, &g, None, 1, 0.1, 0.0, 0.0, 0.0, false).unwrap();
    assert_eq!(p.to_vec().unwrap(), vec![1.0 - 0.1f32 * 0.5, -1.0 - 0.1f32 * 0.25]);
    let e = rt::sgd_step(&p, &g, None, 1, 0.1, 0.9, 0.0, 0.0, false).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_NULL_ARGUMENT);
}

#[test]
fn geometry_structs_match_argument_lists() {
    // Convolution, rank 2, groups 2, stride, padding and dilation, filled by field name.
    let mut g = rt::conv_geometry(2, 4, 6, &[7, 6], &[3, 2]).unwrap();
    assert_eq!(g.struct_size, 368);
    g.stride[0] = 2;
    g.padding[0] = 1;
    g.dilation[1] = 2;
    g.groups = 2;
    let (dims, n) = rt::conv_output_dims(&g).unwrap();
    assert_eq!((dims, n), (vec![2, 6, 4, 4], 192));
    assert_eq!(rt::convtranspose_output_dims(&g).unwrap(), (vec![2, 6, 13, 8], 2 * 6 * 13 * 8));
    let w: Vec<f32> = (0..72).map(|i| ((i * 7) % 11) as f32 / 4.0 - 1.25).collect();
    let x: Vec<f32> = (0..336).map(|i| ((i * 5) % 13) as f32 / 8.0 - 0.75).collect();
    let (w, x) = (Buffer::from_f32(&w, CPU).unwrap(), Buffer::from_f32(&x, CPU).unwrap());
    let b = Buffer::from_f32(&[0.5, -0.25, 1.0, 0.0, 2.0, -1.0], CPU).unwrap();
    let y_old = rt::conv_fwd(&w, Some(&b), &x, 2, 4, 6, &[7, 6], &[3, 2], &[2, 1], &[1, 0], &[1, 2], 2)
        .unwrap();
    let y_new = rt::conv_fwd_geom(&w, Some(&b), &x, &g).unwrap();
    assert_eq!(y_new.size().unwrap(), n);
    assert_eq!(y_new.to_bytes().unwrap(), y_old.to_bytes().unwrap());
    let dy = Buffer::full(n, 0.5, CPU).unwrap();
    let (dk, db, dx) = rt::conv_bwd_geom(&w, &x, &dy, &g).unwrap();
    let (ek, eb, ex) =
        rt::conv_bwd(&w, &x, &dy, 2, 4, 6, &[7, 6], &[3, 2], &[2, 1], &[1, 0], &[1, 2], 2).unwrap();
    for (p, q) in [(dk, ek), (db, eb), (dx, ex)] {
        assert_eq!(p.to_bytes().unwrap(), q.to_bytes().unwrap());
    }
    // Pooling, rank 3; stride defaults to the kernel.
    let mut p = rt::pool_geometry(1, 2, &[5, 4, 3], &[2, 2, 1]).unwrap();
    p.padding[0] = 1;
    assert_eq!(rt::pool_output_dims(&p).unwrap(), (vec![1, 2, 3, 2, 3], 36));
    let xp: Vec<f32> = (0..120).map(|i| ((i * 7) % 17) as f32).collect();
    let xp = Buffer::from_f32(&xp, CPU).unwrap();
    let old = rt::maxpool_fwd(&xp, 1, 2, &[5, 4, 3], &[2, 2, 1], &[2, 2, 1], &[1, 0, 0]).unwrap();
    assert_eq!(rt::maxpool_fwd_geom(&xp, &p).unwrap().to_bytes().unwrap(), old.to_bytes().unwrap());
    // The library's validation through the struct: exact statuses, named fields.
    p.padding[0] = 2;
    let e = rt::pool_output_dims(&p).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_INVALID_ARGUMENT);
    assert!(e.message.contains("argument geometry->padding[0]"), "{}", e.message);
    assert_eq!(rt::avgpool_fwd_geom(&xp, &p, true).unwrap_err().status, sys::TLRT_ERR_INVALID_ARGUMENT);
    g.struct_size = 8;
    let e = rt::conv_fwd_geom(&w, None, &x, &g).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_INVALID_ARGUMENT);
    assert!(e.message.contains("argument geometry->struct_size"), "{}", e.message);
    g.struct_size = std::mem::size_of::<sys::tlrt_conv_geometry>() as u64;
    g.rank = (1 << 32) + 2;
    assert_eq!(rt::conv_output_dims(&g).unwrap_err().status, sys::TLRT_ERR_INVALID_ARGUMENT);
    // The binding checks only what the struct cannot hold: one entry per axis, at most 8 axes.
    assert_eq!(rt::conv_geometry(1, 1, 1, &[4, 4], &[3]).unwrap_err().status, sys::TLRT_ERR_SHAPE);
    assert_eq!(rt::pool_geometry(1, 1, &[1; 9], &[1; 9]).unwrap_err().status,
               sys::TLRT_ERR_INVALID_ARGUMENT);
}

fn refs(xs: &[Buffer]) -> Vec<&Buffer> {
    xs.iter().collect()
}

#[test]
fn adam_step_multi_is_the_per_tensor_step() {
    let start: [&[f32]; 3] = [&[1.0, -3.0, 0.5], &[], &[4.0]];
    let grads: [&[f32]; 3] = [&[2.0, -0.25, 1e-3], &[], &[-8.0]];
    let wds = [0.1, 0.0, 0.5];
    let make = |vals: &[&[f32]]| -> Vec<Buffer> {
        vals.iter().map(|v| Buffer::from_f32(v, CPU).unwrap()).collect()
    };
    let zeros = || -> Vec<Buffer> {
        start.iter().map(|v| Buffer::zeros(v.len() as u64, CPU).unwrap()).collect()
    };
    for decoupled in [false, true] {
        let (p1, m1, v1) = (make(&start), zeros(), zeros());
        let (p2, m2, v2) = (make(&start), zeros(), zeros());
        for step in 1..=3u64 {
            let (g1, g2) = (make(&grads), make(&grads));
            rt::adam_step_multi(&refs(&p1), &refs(&g1), &refs(&m1), &refs(&v1), &wds, step, 1e-2,
                                0.9, 0.95, 1e-8, decoupled).unwrap();
            for i in 0..start.len() {
                rt::adam_step(&p2[i], &g2[i], &m2[i], &v2[i], step, 1e-2, 0.9, 0.95, 1e-8, wds[i],
                              decoupled).unwrap();
            }
            for (a, b) in p1.iter().chain(&m1).chain(&v1).zip(p2.iter().chain(&m2).chain(&v2)) {
                assert_eq!(a.to_bytes().unwrap(), b.to_bytes().unwrap(), "step {step}");
            }
        }
    }
    // One weight decay per tensor (checked by the binding); every buffer once (the library).
    let (p, g, m, v) = (make(&start[..1]), make(&grads[..1]), zeros(), zeros());
    let e = rt::adam_step_multi(&[&p[0]], &[&g[0]], &[&m[0]], &[&v[0]], &[0.1, 0.2], 1, 1e-3, 0.9,
                                0.999, 1e-8, true).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_SHAPE);
    let e = rt::adam_step_multi(&[&p[0]], &[&g[0]], &[&m[0]], &[&p[0]], &[0.1], 1, 1e-3, 0.9,
                                0.999, 1e-8, true).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_INVALID_ARGUMENT);
    rt::adam_step_multi(&[], &[], &[], &[], &[], 1, 1e-3, 0.9, 0.999, 1e-8, false).unwrap();
}
