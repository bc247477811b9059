//! Tensors release exactly what they own: every buffer made by the broadcasts, products, reshapes,
//! clones and failed calls is freed. A test binary of its own (tests run in threads: the
//! allocator's counts are process-wide).
use torchlean_rt::{self as rt, Device, Tensor};

#[test]
fn tensors_return_live_counts_to_start() {
    let cpu = Device::CPU;
    let s0 = rt::stats(cpu).unwrap();
    {
        let a = Tensor::from_f32(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], cpu).unwrap();
        let b = Tensor::from_f32(&[1.0, 2.0, 3.0], &[3], cpu).unwrap();
        let c = ((&a + &b).unwrap() * 2.0).unwrap();
        let d = c.matmul(&a.t().unwrap()).unwrap().sum().unwrap();
        let r = a.reshape(&[3, 2]).unwrap();
        let r2 = r.clone();
        let batched = Tensor::ones(&[2, 2], cpu).unwrap().matmul(&Tensor::ones(&[4, 2, 3], cpu).unwrap()).unwrap();
        assert!(a.add(&Tensor::ones(&[2], cpu).unwrap()).is_err());
        assert!(Tensor::from_i32(&[1, 2, 3], &[3], cpu).unwrap().add(&b).is_err());
        let mid = rt::stats(cpu).unwrap();
        // a, b, c, d, the batched product and the clones sharing a's buffer (r, r2: none of their own).
        assert_eq!(mid.live_handles, s0.live_handles + 5);
        drop((r, r2, d, batched));
        let _ = (-c).unwrap().into_buffer();
    }
    let s1 = rt::stats(cpu).unwrap();
    assert_eq!(s1.live_handles, s0.live_handles);
    assert_eq!(s1.live_bytes, s0.live_bytes);
}
