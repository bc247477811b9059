//! Drop and Clone release exactly what they own: the allocator's live handle and byte counts come
//! back to where they started. A test binary of its own (tests run in threads: counts are
//! process-wide).
use torchlean_rt::{self as rt, Buffer, Device, Tape};

#[test]
fn drop_returns_live_counts_to_start() {
    let s0 = rt::stats(Device::CPU).unwrap();
    {
        let bufs: Vec<Buffer> = (0..20).map(|i| Buffer::full(64, i as f64, Device::CPU).unwrap()).collect();
        let outs: Vec<Buffer> = bufs.iter().map(|b| rt::exp(b).unwrap()).collect();
        let clones: Vec<Buffer> = outs.iter().map(|b| b.clone()).collect();
        let pairs: Vec<(Buffer, Buffer)> = bufs.iter().take(5).map(|b| rt::min_bwd(b, b, b).unwrap()).collect();
        let mid = rt::stats(Device::CPU).unwrap();
        assert_eq!(mid.live_handles, s0.live_handles + 20 + 20 + 10, "clones share handles");
        assert_eq!(mid.live_bytes, s0.live_bytes + 50 * 64 * 4);
        let mut t = Tape::new(Device::CPU).unwrap();
        let n = t.leaf(&bufs[0], &[8, 8], true).unwrap();
        let y = t.tanh(n).unwrap();
        let l = t.reduce_mean(y).unwrap();
        t.backward(l).unwrap();
        let _g = t.grad(n).unwrap();
        drop((clones, pairs));
    }
    let s1 = rt::stats(Device::CPU).unwrap();
    assert_eq!(s1.live_handles, s0.live_handles);
    assert_eq!(s1.live_bytes, s0.live_bytes);
    // An error path allocates nothing that survives.
    let a = Buffer::zeros(3, Device::CPU).unwrap();
    let b = Buffer::zeros(2, Device::CPU).unwrap();
    assert!(rt::add(&a, &b).is_err());
    drop((a, b));
    assert_eq!(rt::stats(Device::CPU).unwrap().live_handles, s0.live_handles);
}
