//! cargo test --offline (TLRT_LIB_DIR = a build directory): index buffers (abi/tlrt_index.h's
//! _ibuf entry points and the tape's _ibuf records) through the safe crate. With int32 and int64
//! index buffers the results are the bits of the host-list functions; entries that are not an
//! index (negative, or >= 2^60) read 0, are skipped and are counted by `index_faults`.
//!
//! The fault counter is per device and process wide, and the tests of this file run on parallel
//! threads of one process: only `not_an_index_is_counted` makes faults or reads the counter.
use torchlean_rt::{self as rt, sys, Buffer, Device, Dtype, Tape};

const CPU: Device = Device::CPU;

fn bits(b: &Buffer) -> Vec<u32> {
    b.to_vec().unwrap().iter().map(|v| v.to_bits()).collect()
}

fn f32s(v: &[f32]) -> Buffer {
    Buffer::from_f32(v, CPU).unwrap()
}

/// An index buffer of the given type holding `idx` (each entry fits both types).
fn ibuf(idx: &[u64], dtype: Dtype) -> Buffer {
    match dtype {
        Dtype::I32 => Buffer::from_i32(&idx.iter().map(|&i| i as i32).collect::<Vec<_>>(), CPU),
        _ => Buffer::from_i64(&idx.iter().map(|&i| i as i64).collect::<Vec<_>>(), CPU),
    }
    .unwrap()
}

#[test]
fn index_buffers_give_the_host_lists_bits() {
    // Sums that depend on the order (duplicates of large and small values), out-of-range entries
    // (a value: read as 0, skipped), -0.0 in the data.
    let v = f32s(&[1.5, -2.0, 3.25, 1e8, -0.0, 7.0]);
    let vals = f32s(&[1e8, 1.0, -1e8, 3.0, 0.5, 1.0 / 1_048_576.0, -7.5, 1e-3]);
    let gidx = [5u64, 0, 99, 2, 2, 4, 1 << 30];
    let sidx = [3u64, 3, 3, 0, 3, 5, 99, 3];
    let mat: Vec<f32> = (0..12).map(|i| i as f32 - 5.5).collect();
    let mat = f32s(&mat);
    let ridx = [2u64, 0, 2, 7, 2, 3];
    let rvals = f32s(&[1e7, 1.0, -2.0, 0.25, 3.0, 1e-4, -1e7, 5.0, 0.5, 9.0, 9.0, 9.0, 0.125, -1.0,
                       1.0 / 1_073_741_824.0, 4.0, 4.0, 4.0]);
    for dtype in [Dtype::I64, Dtype::I32] {
        let gi = ibuf(&gidx, dtype);
        assert_eq!(gi.dtype().unwrap(), dtype);
        let got = rt::gather_vec_ibuf(&v, 6, &gi).unwrap();
        let want = rt::gather_vec(&v, 6, &gidx).unwrap();
        assert_eq!(bits(&got), bits(&want), "gather_vec {dtype:?}");
        assert_eq!(want.to_vec().unwrap()[..3], [7.0, 1.5, 0.0]);

        let si = ibuf(&sidx, dtype);
        let got = rt::scatter_add_ibuf(Some(&v), &vals, 6, &si).unwrap();
        let want = rt::scatter_add(&v, &vals, 6, &sidx).unwrap();
        assert_eq!(bits(&got), bits(&want), "scatter_add {dtype:?}: {:?} vs {:?}",
                   got.to_vec().unwrap(), want.to_vec().unwrap());
        // None: the zero vector, without a buffer to allocate.
        let got = rt::scatter_add_ibuf(None, &vals, 6, &si).unwrap();
        let want = rt::scatter_add(&Buffer::zeros(6, CPU).unwrap(), &vals, 6, &sidx).unwrap();
        assert_eq!(bits(&got), bits(&want), "scatter_add(None) {dtype:?}");

        let ri = ibuf(&ridx, dtype);
        let got = rt::gather_rows_ibuf(&mat, 4, 3, &ri).unwrap();
        let want = rt::gather_rows(&mat, 4, 3, &ridx).unwrap();
        assert_eq!(got.size().unwrap(), 18);
        assert_eq!(bits(&got), bits(&want), "gather_rows {dtype:?}");

        let got = rt::scatter_add_rows_ibuf(Some(&mat), &rvals, 4, 3, &ri).unwrap();
        let want = rt::scatter_add_rows(&mat, &rvals, 4, 3, &ridx).unwrap();
        assert_eq!(bits(&got), bits(&want), "scatter_add_rows {dtype:?}");
        // None: the embedding backward of one call.
        let got = rt::scatter_add_rows_ibuf(None, &rvals, 4, 3, &ri).unwrap();
        let want =
            rt::scatter_add_rows(&Buffer::zeros(12, CPU).unwrap(), &rvals, 4, 3, &ridx).unwrap();
        assert_eq!(bits(&got), bits(&want), "scatter_add_rows(None) {dtype:?}");

        // Empty index buffers: an empty gather; a bit-exact copy of x.
        let e = ibuf(&[], dtype);
        assert_eq!(rt::gather_vec_ibuf(&v, 6, &e).unwrap().size().unwrap(), 0);
        assert_eq!(rt::gather_rows_ibuf(&mat, 4, 3, &e).unwrap().size().unwrap(), 0);
        let empty = f32s(&[]);
        assert_eq!(bits(&rt::scatter_add_ibuf(Some(&v), &empty, 6, &e).unwrap()), bits(&v));
    }
}

#[test]
fn the_tape_records_index_buffers() {
    // loss = cross_entropy(logits, labels) + sum(scatter_add(v, gather_vec(v, idx), idx) * w)
    //      + sum(gather_rows(m, ridx)^2) + sum(scatter_add_rows(m, gather_rows(m, ridx), ridx)):
    // values and gradients with index buffers equal those with host lists.
    fn run(index: Option<Dtype>) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
        let (labels, idx, ridx) = ([2u64, 0], [3u64, 0, 3, 9], [2u64, 0, 2]);
        let mut t = Tape::new(CPU).unwrap();
        let lg = t.leaf(&f32s(&[0.5, -1.0, 2.0, 0.25, 3.0, -0.5]), &[2, 3], true).unwrap();
        let v = t.leaf(&f32s(&[1.0, 2.0, 3.0, 4.0]), &[4], true).unwrap();
        let m = t.leaf(&f32s(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]), &[3, 2], true).unwrap();
        let w = t.leaf(&f32s(&[1.0, -2.0, 0.5, 0.25]), &[4], false).unwrap();
        let (ce, g, s, gr, sr) = match index {
            None => {
                let ce = t.cross_entropy(lg, &labels).unwrap();
                let g = t.gather_vec(v, &idx).unwrap();
                let s = t.scatter_add(v, g, &idx).unwrap();
                let gr = t.gather_rows(m, &ridx).unwrap();
                let sr = t.scatter_add_rows(m, gr, &ridx).unwrap();
                (ce, g, s, gr, sr)
            }
            Some(d) => {
                // The tape keeps its own references: the buffers are dropped before backward.
                let (lb, ib, rb) = (ibuf(&labels, d), ibuf(&idx, d), ibuf(&ridx, d));
                let ce = t.cross_entropy_ibuf(lg, &lb).unwrap();
                let g = t.gather_vec_ibuf(v, &ib).unwrap();
                let s = t.scatter_add_ibuf(v, g, &ib).unwrap();
                let gr = t.gather_rows_ibuf(m, &rb).unwrap();
                let sr = t.scatter_add_rows_ibuf(m, gr, &rb).unwrap();
                drop((lb, ib, rb));
                (ce, g, s, gr, sr)
            }
        };
        assert_eq!(t.shape(ce).unwrap().0, Vec::<u64>::new());
        assert_eq!(t.shape(gr).unwrap().0, vec![3, 2]);
        let sw = t.mul(s, w).unwrap();
        let a = t.reduce_sum(sw).unwrap();
        let gg = t.mul(gr, gr).unwrap();
        let b = t.reduce_sum(gg).unwrap();
        let c = t.reduce_sum(sr).unwrap();
        let l1 = t.add(ce, a).unwrap();
        let l2 = t.add(b, c).unwrap();
        let loss = t.add(l1, l2).unwrap();
        t.backward(loss).unwrap();
        let values = [ce, g, s, gr, sr, loss].iter().map(|&n| bits(&t.value(n).unwrap())).collect();
        let grads = [lg, v, m].iter().map(|&n| bits(&t.grad(n).unwrap())).collect();
        (values, grads)
    }
    let want = run(None);
    for d in [Dtype::I64, Dtype::I32] {
        let got = run(Some(d));
        assert_eq!(got.0, want.0, "tape values with {d:?} index buffers");
        assert_eq!(got.1, want.1, "tape gradients with {d:?} index buffers");
    }
}

#[test]
fn not_an_index_is_counted() {
    rt::index_faults(CPU, true).unwrap(); // from 0
    let v = f32s(&[1.5, -2.0, 3.25, 1e8, -0.0, 7.0]);
    let bad = Buffer::from_i64(&[-1, 0, 1 << 62, 7, i64::MIN, 5], CPU).unwrap();
    let got = rt::gather_vec_ibuf(&v, 6, &bad).unwrap();
    assert_eq!(got.to_vec().unwrap(), [0.0, 1.5, 0.0, 0.0, 0.0, 7.0]);
    // -1, 2^62 and i64::MIN are not indices; 7 >= n is out of range, a value, not counted.
    assert_eq!(rt::index_faults(CPU, false).unwrap(), 3);
    assert_eq!(rt::index_faults(CPU, true).unwrap(), 3, "reading keeps the count");
    assert_eq!(rt::index_faults(CPU, false).unwrap(), 0, "reset sets it to 0");

    // Scatters skip them, like out-of-range entries.
    let vals = f32s(&[1.0, 100.0, 2.0, 1000.0, 4.0]);
    let bad32 = Buffer::from_i32(&[3, -1, 3, i32::MIN, 0], CPU).unwrap();
    let got = rt::scatter_add_ibuf(Some(&v), &vals, 6, &bad32).unwrap();
    let want = rt::scatter_add(&v, &vals, 6, &[3, 6, 3, 6, 0]).unwrap();
    assert_eq!(bits(&got), bits(&want));
    assert_eq!(rt::index_faults(CPU, true).unwrap(), 2);
    let mat: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let mat = f32s(&mat);
    let got = rt::gather_rows_ibuf(&mat, 4, 3, &Buffer::from_i32(&[-3, 1], CPU).unwrap()).unwrap();
    assert_eq!(got.to_vec().unwrap(), [0.0, 0.0, 0.0, 3.0, 4.0, 5.0]);
    let rv = f32s(&[1.0; 9]);
    let got = rt::scatter_add_rows_ibuf(None, &rv, 4, 3,
                                        &Buffer::from_i64(&[2, -5, 1], CPU).unwrap()).unwrap();
    let zeros = Buffer::zeros(12, CPU).unwrap();
    let want = rt::scatter_add_rows(&zeros, &rv, 4, 3, &[2, 4, 1]).unwrap();
    assert_eq!(bits(&got), bits(&want));
    assert_eq!(rt::index_faults(CPU, true).unwrap(), 2);

    // A tape's cross_entropy label outside [0, classes): its sample adds 0 (the mean still divides
    // by the batch) and gets no gradient; counted. A label equal to classes must not read the next
    // row's first logit.
    let rows = [[0.5f64, -1.0, 2.0], [0.25, 3.0, -0.5]];
    let lse: Vec<f64> = rows.iter().map(|r| r.iter().map(|z| z.exp()).sum::<f64>().ln()).collect();
    for labels in [[3i32, 1], [-1, 1]] {
        let mut t = Tape::new(CPU).unwrap();
        let lg = t.leaf(&f32s(&[0.5, -1.0, 2.0, 0.25, 3.0, -0.5]), &[2, 3], true).unwrap();
        let ce = t.cross_entropy_ibuf(lg, &Buffer::from_i32(&labels, CPU).unwrap()).unwrap();
        t.backward(ce).unwrap();
        let loss = t.value(ce).unwrap().to_vec().unwrap()[0] as f64;
        let want = -(rows[1][1] - lse[1]) / 2.0;
        assert!((loss - want).abs() < 1e-6, "labels {labels:?}: {loss} vs {want}");
        assert_eq!(t.grad(lg).unwrap().to_vec().unwrap()[..3], [0.0, 0.0, 0.0]);
        assert_eq!(rt::index_faults(CPU, true).unwrap(), 1, "labels {labels:?}");
    }
}

#[test]
fn index_buffer_errors() {
    let v = f32s(&[1.0, 2.0, 3.0]);
    let f = f32s(&[0.0, 1.0]);
    let e = rt::gather_vec_ibuf(&v, 3, &f).unwrap_err();
    assert_eq!((e.status, e.function), (sys::TLRT_ERR_DTYPE, "tlrt_gather_vec_ibuf"));
    assert!(e.message.contains("idx"), "{}", e.message);
    let i = Buffer::from_i64(&[0, 1], CPU).unwrap();
    let e = rt::gather_vec_ibuf(&i, 2, &i).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_DTYPE, "integer data: {}", e.message);
    assert_eq!(rt::gather_vec_ibuf(&v, 2, &i).unwrap_err().status, sys::TLRT_ERR_SHAPE);
    let vals = f32s(&[1.0]);
    assert_eq!(rt::scatter_add_ibuf(None, &vals, 3, &i).unwrap_err().status, sys::TLRT_ERR_SHAPE);
    assert_eq!(rt::scatter_add_rows_ibuf(None, &vals, 3, 1, &i).unwrap_err().status,
               sys::TLRT_ERR_SHAPE);
    assert_eq!(rt::gather_rows_ibuf(&v, 2, 2, &i).unwrap_err().status, sys::TLRT_ERR_SHAPE);
    let mut t = Tape::new(CPU).unwrap();
    let lg = t.leaf(&f32s(&[0.0; 6]), &[2, 3], true).unwrap();
    let e = t.cross_entropy_ibuf(lg, &f).unwrap_err();
    assert_eq!((e.status, e.function), (sys::TLRT_ERR_DTYPE, "tlrt_tape_cross_entropy_ibuf"));
    // A released index buffer.
    let r = Buffer::from_i64(&[0], CPU).unwrap();
    // SAFETY: no other thread uses r.
    unsafe { r.release_storage() }.unwrap();
    assert_eq!(rt::gather_vec_ibuf(&v, 3, &r).unwrap_err().status, sys::TLRT_ERR_RELEASED);
}
