//! Tensor: construction, shape checks, broadcasting, matmul rules, layout, reductions, operators.
use torchlean_rt::{sys, Buffer, Device, Dtype, Error, Result, Tensor};

const CPU: Device = Device::CPU;

fn t(data: &[f32], shape: &[u64]) -> Tensor {
    Tensor::from_f32(data, shape, CPU).unwrap()
}

/// Values and shape of a result.
fn vals(r: Result<Tensor>) -> (Vec<f32>, Vec<u64>) {
    let x = r.unwrap();
    (x.to_vec().unwrap(), x.shape().to_vec())
}

/// A binding-made shape error: status, name, the method in `function`, the shapes in the message.
fn assert_shape_err(r: Result<Tensor>, function: &str, mentions: &[&str]) -> Error {
    let e = r.expect_err("expected a shape error");
    assert_eq!(e.status, sys::TLRT_ERR_SHAPE, "{e}");
    assert_eq!(e.name, "TLRT_ERR_SHAPE");
    assert_eq!(e.function, function, "{e}");
    for m in mentions {
        assert!(e.message.contains(m), "{:?} should mention {m}", e.message);
    }
    e
}

#[test]
fn construction_and_accessors() {
    let a = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    assert_eq!(a.shape(), &[2, 3]);
    assert_eq!(a.ndim(), 2);
    assert_eq!(a.numel(), 6);
    assert_eq!(a.dtype(), Dtype::F32);
    assert_eq!(a.device(), CPU);
    assert_eq!(a.buffer().size().unwrap(), 6);
    assert_eq!(format!("{a:?}"), "Tensor(shape=[2, 3], dtype=F32, device=cpu)");

    assert_eq!(vals(Tensor::zeros(&[2, 2], CPU)), (vec![0.0; 4], vec![2, 2]));
    assert_eq!(vals(Tensor::ones(&[3], CPU)), (vec![1.0; 3], vec![3]));
    assert_eq!(vals(Tensor::full(&[1, 2], -2.5, CPU)), (vec![-2.5; 2], vec![1, 2]));
    let s = Tensor::scalar(7.0, CPU).unwrap();
    assert_eq!((s.ndim(), s.numel(), s.to_vec().unwrap()), (0, 1, vec![7.0]));

    let i = Tensor::from_i32(&[1, 2, 3, 4], &[2, 2], CPU).unwrap();
    assert_eq!((i.dtype(), i.to_vec_i32().unwrap()), (Dtype::I32, vec![1, 2, 3, 4]));
    let l = Tensor::from_i64(&[-1, 1 << 40], &[2], CPU).unwrap();
    assert_eq!((l.dtype(), l.to_vec_i64().unwrap()), (Dtype::I64, vec![-1, 1 << 40]));

    let b = Tensor::from_buffer(Buffer::from_f32(&[1.0, 2.0, 3.0], CPU).unwrap(), &[3, 1]).unwrap();
    assert_eq!(b.shape(), &[3, 1]);
    let raw = b.buffer().as_ptr();
    assert_eq!(b.into_buffer().as_ptr(), raw);

    // to(): the same device shares the buffer.
    assert_eq!(a.to(CPU).unwrap().buffer().as_ptr(), a.buffer().as_ptr());
    // Clone retains: the values outlive the original.
    let c = a.clone();
    assert_eq!(c.buffer().as_ptr(), a.buffer().as_ptr());
    drop(a);
    assert_eq!(c.to_vec().unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

#[test]
fn construction_shape_errors() {
    assert_shape_err(Tensor::from_f32(&[1.0, 2.0, 3.0], &[2, 2], CPU), "Tensor::from_f32", &["[2, 2]", "3"]);
    assert_shape_err(Tensor::from_i32(&[1], &[2], CPU), "Tensor::from_i32", &["[2]"]);
    assert_shape_err(Tensor::from_i64(&[], &[1], CPU), "Tensor::from_i64", &["[1]"]);
    assert_shape_err(Tensor::from_f32(&[1.0], &[1; 9], CPU), "Tensor::from_f32", &["rank 9"]);
    // A product beyond 64 bits never matches.
    assert_shape_err(Tensor::from_f32(&[1.0], &[1 << 32, 1 << 32], CPU), "Tensor::from_f32", &["more than 2^64"]);
    let buf = Buffer::from_f32(&[1.0, 2.0], CPU).unwrap();
    assert_shape_err(Tensor::from_buffer(buf, &[3]), "Tensor::from_buffer", &["[3]", "2"]);
    let e = Tensor::zeros(&[1 << 40, 1 << 40], CPU).unwrap_err();
    assert_eq!((e.status, e.function), (sys::TLRT_ERR_OVERFLOW, "Tensor::zeros"));
    // tlrt_scale's host-scalar rule (the method; the operator `* f32` takes any value).
    let x = Tensor::ones(&[2], CPU).unwrap();
    assert_eq!(x.scale(f64::NAN).unwrap_err().status, sys::TLRT_ERR_INVALID_ARGUMENT);
    assert!(Tensor::full(&[2], f32::NAN, CPU).unwrap().to_vec().unwrap().iter().all(|v| v.is_nan()));
}

#[test]
fn broadcasting() {
    let a = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let row = t(&[10.0, 20.0, 30.0], &[3]);
    assert_eq!(vals(a.add(&row)), (vec![11.0, 22.0, 33.0, 14.0, 25.0, 36.0], vec![2, 3]));
    assert_eq!(vals(row.sub(&a)), (vec![9.0, 18.0, 27.0, 6.0, 15.0, 24.0], vec![2, 3]));
    // (2, 1) with (1, 3): an outer sum.
    let col = t(&[1.0, 2.0], &[2, 1]);
    let r = t(&[10.0, 20.0, 30.0], &[1, 3]);
    assert_eq!(vals(col.add(&r)), (vec![11.0, 21.0, 31.0, 12.0, 22.0, 32.0], vec![2, 3]));
    assert_eq!(vals(col.mul(&r)), (vec![10.0, 20.0, 30.0, 20.0, 40.0, 60.0], vec![2, 3]));
    // A rank-0 scalar on either side.
    let two = Tensor::scalar(2.0, CPU).unwrap();
    assert_eq!(vals(a.div(&two)), (vec![0.5, 1.0, 1.5, 2.0, 2.5, 3.0], vec![2, 3]));
    assert_eq!(vals(two.sub(&a)), (vec![1.0, 0.0, -1.0, -2.0, -3.0, -4.0], vec![2, 3]));
    // Leading axes inserted on a 3-D result.
    let c = t(&[1.0, 2.0], &[2, 1, 1]);
    let (v, s) = vals(c.maximum(&t(&[0.0, 1.5, 3.0], &[3])));
    assert_eq!((v, s), (vec![1.0, 1.5, 3.0, 2.0, 2.0, 3.0], vec![2, 1, 3]));
    assert_eq!(vals(a.minimum(&t(&[2.5], &[1]))), (vec![1.0, 2.0, 2.5, 2.5, 2.5, 2.5], vec![2, 3]));
    // broadcast_to itself.
    assert_eq!(vals(row.broadcast_to(&[2, 3])), (vec![10.0, 20.0, 30.0, 10.0, 20.0, 30.0], vec![2, 3]));
    assert_shape_err(a.broadcast_to(&[3]), "Tensor::broadcast_to", &["[2, 3]", "[3]"]);
    assert_shape_err(row.broadcast_to(&[3, 2]), "Tensor::broadcast_to", &["[3]", "[3, 2]"]);
}

#[test]
fn broadcast_mismatch_is_a_shape_error() {
    let a = t(&[1.0; 6], &[2, 3]);
    let b = t(&[1.0, 2.0], &[2]);
    let e = assert_shape_err(a.add(&b), "Tensor::add", &["[2, 3]", "[2]"]);
    assert!(e.to_string().starts_with("Tensor::add: TLRT_ERR_SHAPE (3): Tensor::add: shapes"), "{e}");
    assert_shape_err(&a - &b, "Tensor::sub", &["[2, 3]", "[2]"]);
    assert_shape_err(t(&[1.0; 4], &[4, 1]).mul(&t(&[1.0; 6], &[2, 3])), "Tensor::mul", &["[4, 1]", "[2, 3]"]);
}

#[test]
fn matmul_rules() {
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let ones = Tensor::ones(&[2, 2], CPU).unwrap();
    assert_eq!(vals(a.matmul(&ones)), (vec![3.0, 3.0, 7.0, 7.0], vec![2, 2]));
    // (2, 3) @ (3, 1)
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    assert_eq!(vals(x.matmul(&t(&[1.0, 0.0, -1.0], &[3, 1]))), (vec![-2.0, -2.0], vec![2, 1]));
    // Vectors: (n) on the right is a column, on the left a row; the axis is removed.
    let v = t(&[1.0, 0.0, -1.0], &[3]);
    assert_eq!(vals(x.matmul(&v)), (vec![-2.0, -2.0], vec![2]));
    assert_eq!(vals(t(&[1.0, 1.0], &[2]).matmul(&x)), (vec![5.0, 7.0, 9.0], vec![3]));
    let (d, s) = vals(v.matmul(&t(&[2.0, 3.0, 4.0], &[3])));
    assert_eq!((d, s), (vec![-2.0], vec![]));
    // Batched: (2, 2, 2) @ (2, 2, 1) by tlrt_bmm.
    let ab = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], &[2, 2, 2]);
    let bb = t(&[1.0, 1.0, 1.0, -1.0], &[2, 2, 1]);
    assert_eq!(vals(ab.matmul(&bb)), (vec![3.0, 7.0, -1.0, -1.0], vec![2, 2, 1]));
    // Batched left, 2-D right: the batch folded into the rows.
    assert_eq!(vals(ab.matmul(&ones)), (vec![3.0, 3.0, 7.0, 7.0, 11.0, 11.0, 15.0, 15.0], vec![2, 2, 2]));
    assert_eq!(vals(ab.matmul(&t(&[1.0, -1.0], &[2]))), (vec![-1.0, -1.0, -1.0, -1.0], vec![2, 2]));
    // 2-D left, batched right: broadcast over the batch.
    assert_eq!(vals(ones.matmul(&ab)), (vec![4.0, 6.0, 4.0, 6.0, 12.0, 14.0, 12.0, 14.0], vec![2, 2, 2]));
    assert_eq!(vals(t(&[1.0, 0.0], &[2]).matmul(&ab)), (vec![1.0, 2.0, 5.0, 6.0], vec![2, 2]));
    // Rank 4 batches.
    let a4 = ab.reshape(&[2, 1, 2, 2]).unwrap();
    let b4 = Tensor::ones(&[2, 1, 2, 3], CPU).unwrap();
    let (v4, s4) = vals(a4.matmul(&b4));
    assert_eq!(s4, vec![2, 1, 2, 3]);
    assert_eq!(v4, vec![3.0, 3.0, 3.0, 7.0, 7.0, 7.0, 11.0, 11.0, 11.0, 15.0, 15.0, 15.0]);
    // Empty: n == 0 gives zeros, m == 0 an empty result.
    let z = Tensor::zeros(&[2, 0], CPU).unwrap().matmul(&Tensor::zeros(&[0, 3], CPU).unwrap());
    assert_eq!(vals(z), (vec![0.0; 6], vec![2, 3]));
    assert_eq!(vals(Tensor::zeros(&[0, 2], CPU).unwrap().matmul(&ones)), (vec![], vec![0, 2]));

    // Errors.
    assert_shape_err(x.matmul(&x), "Tensor::matmul", &["[2, 3]", "inner dimensions 3 and 2"]);
    assert_shape_err(x.matmul(&Tensor::scalar(1.0, CPU).unwrap()), "Tensor::matmul", &["rank-0"]);
    let b3 = Tensor::ones(&[3, 2, 2], CPU).unwrap();
    assert_shape_err(ab.matmul(&b3), "Tensor::matmul", &["[2, 2, 2]", "[3, 2, 2]", "batch"]);

    // Batch axes broadcast against each other (NumPy): (2, 1, 2, 2) @ (3, 2, 1) -> (2, 3, 2, 1).
    let bb3 = t(&[1.0, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2, 1]);
    let (v, s) = vals(a4.matmul(&bb3));
    assert_eq!(s, vec![2, 3, 2, 1]);
    assert_eq!(v, vec![1.0, 3.0, 2.0, 4.0, 3.0, 7.0, 5.0, 7.0, 6.0, 8.0, 11.0, 15.0]);
    let (v, s) = vals(ab.matmul(&Tensor::ones(&[1, 2, 2], CPU).unwrap()));
    assert_eq!((v, s), (vec![3.0, 3.0, 7.0, 7.0, 11.0, 11.0, 15.0, 15.0], vec![2, 2, 2]));
}

#[test]
fn reshape_transpose_permute() {
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let r = x.reshape(&[3, -1]).unwrap();
    assert_eq!(r.shape(), &[3, 2]);
    assert_eq!(r.buffer().as_ptr(), x.buffer().as_ptr(), "reshape shares the buffer");
    assert_eq!(x.reshape(&[-1]).unwrap().shape(), &[6]);
    assert_eq!(x.reshape(&[1, 2, 1, 3]).unwrap().shape(), &[1, 2, 1, 3]);
    assert_eq!(Tensor::scalar(1.0, CPU).unwrap().reshape(&[1, -1]).unwrap().shape(), &[1, 1]);
    assert_eq!(x.reshape(&[6, 1]).unwrap().reshape(&[]).unwrap_err().status, sys::TLRT_ERR_SHAPE);
    assert_shape_err(x.reshape(&[4, -1]), "Tensor::reshape", &["[2, 3]", "[4, -1]"]);
    assert_shape_err(x.reshape(&[4, 2]), "Tensor::reshape", &["[2, 3]", "[4, 2]"]);
    assert_shape_err(x.reshape(&[-1, -1]), "Tensor::reshape", &["only one"]);
    assert_shape_err(x.reshape(&[-2, 3]), "Tensor::reshape", &["-2"]);
    let e = Tensor::zeros(&[0, 3], CPU).unwrap();
    assert_shape_err(e.reshape(&[0, -1]), "Tensor::reshape", &["ambiguous"]);
    assert_eq!(e.reshape(&[3, -1, 5]).unwrap().shape(), &[3, 0, 5]);

    assert_eq!(vals(x.t()), (vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0], vec![3, 2]));
    assert_shape_err(t(&[1.0, 2.0], &[2]).t(), "Tensor::t", &["[2]"]);

    let y = t(&(0..24).map(|i| i as f32).collect::<Vec<_>>(), &[2, 3, 4]);
    let p = y.permute(&[2, 0, 1]).unwrap();
    assert_eq!(p.shape(), &[4, 2, 3]);
    let pv = p.to_vec().unwrap();
    // p[k, i, j] = y[i, j, k]
    assert_eq!((pv[0], pv[1], pv[3], pv[6]), (0.0, 4.0, 12.0, 1.0));
    assert_shape_err(y.permute(&[1, 0]), "Tensor::permute", &["[1, 0]", "[2, 3, 4]"]);
    assert_eq!(y.permute(&[0, 1, 3]).unwrap_err().status, sys::TLRT_ERR_INDEX);
    assert_eq!(y.permute(&[0, 1, 1]).unwrap_err().status, sys::TLRT_ERR_INVALID_ARGUMENT);
    assert_eq!(y.permute(&[0, 1, usize::MAX]).unwrap_err().status, sys::TLRT_ERR_INDEX);
}

#[test]
fn unary_ops_and_reductions() {
    let x = t(&[1.0, -2.0, 4.0, -0.5], &[2, 2]);
    assert_eq!(vals(x.neg()), (vec![-1.0, 2.0, -4.0, 0.5], vec![2, 2]));
    assert_eq!(vals(x.abs()).0, vec![1.0, 2.0, 4.0, 0.5]);
    assert_eq!(vals(x.relu()).0, vec![1.0, 0.0, 4.0, 0.0]);
    assert_eq!(vals(x.abs().unwrap().sqrt()).0[2], 2.0);
    assert_eq!(vals(x.scale(-2.0)).0, vec![-2.0, 4.0, -8.0, 1.0]);
    let z = Tensor::zeros(&[3], CPU).unwrap();
    assert_eq!(vals(z.exp()).0, vec![1.0; 3]);
    assert_eq!(vals(z.tanh()).0, vec![0.0; 3]);
    assert_eq!(vals(z.sigmoid()).0, vec![0.5; 3]);
    assert_eq!(vals(Tensor::ones(&[2], CPU).unwrap().log()).0, vec![0.0; 2]);

    let y = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    assert_eq!(vals(y.sum()), (vec![21.0], vec![]));
    assert_eq!(vals(y.mean()), (vec![3.5], vec![]));
    assert_eq!(vals(y.sum_axis(0)), (vec![5.0, 7.0, 9.0], vec![3]));
    assert_eq!(vals(y.sum_axis(1)), (vec![6.0, 15.0], vec![2]));
    let e = y.sum_axis(2).unwrap_err();
    assert_eq!((e.status, e.function), (sys::TLRT_ERR_INDEX, "Tensor::sum_axis"));
    assert_eq!(Tensor::scalar(1.0, CPU).unwrap().sum_axis(0).unwrap_err().status, sys::TLRT_ERR_INVALID_ARGUMENT);
}

#[test]
fn integer_tensors_refused_by_the_library() {
    let i = Tensor::from_i32(&[1, 2, 3], &[3], CPU).unwrap();
    let e = i.add(&i).unwrap_err();
    assert_eq!(e.status, sys::TLRT_ERR_DTYPE, "{e}");
    assert!(e.function.starts_with("tlrt_"), "{e}");
    assert_eq!(i.exp().unwrap_err().status, sys::TLRT_ERR_DTYPE);
    assert_eq!((&i * 2.0).unwrap_err().status, sys::TLRT_ERR_DTYPE);
    let f = t(&[1.0, 2.0, 3.0], &[3]);
    assert_eq!(f.mul(&i).unwrap_err().status, sys::TLRT_ERR_DTYPE);
    assert_eq!(i.to_vec().unwrap_err().status, sys::TLRT_ERR_DTYPE);
    assert_eq!(f.to_vec_i32().unwrap_err().status, sys::TLRT_ERR_DTYPE);
}

#[test]
fn empty_tensors() {
    let e = Tensor::zeros(&[0, 3], CPU).unwrap();
    assert_eq!((e.numel(), e.ndim()), (0, 2));
    assert!(e.to_vec().unwrap().is_empty());
    assert_eq!(vals(e.add(&t(&[1.0, 2.0, 3.0], &[3]))), (vec![], vec![0, 3]));
    assert_eq!(vals(&e * 2.0), (vec![], vec![0, 3]));
    assert_eq!(vals(e.exp()), (vec![], vec![0, 3]));
    assert_eq!(vals(e.sum()), (vec![0.0], vec![]));
    assert!(e.mean().unwrap().to_vec().unwrap()[0].is_nan());
    assert_eq!(vals(e.sum_axis(0)), (vec![0.0; 3], vec![3]));
    assert_eq!(vals(e.sum_axis(1)), (vec![], vec![0]));
    assert_eq!(vals(e.t()), (vec![], vec![3, 0]));
    // (0, 1) broadcasts with (3): (0, 3).
    assert_eq!(vals(Tensor::zeros(&[0, 1], CPU).unwrap().add(&t(&[1.0, 2.0, 3.0], &[3]))), (vec![], vec![0, 3]));
    assert_shape_err(e.add(&t(&[1.0, 2.0], &[2])), "Tensor::add", &["[0, 3]", "[2]"]);
    assert_eq!(Tensor::from_f32(&[], &[2, 0, 4], CPU).unwrap().shape(), &[2, 0, 4]);
}

#[test]
fn operators() -> Result<()> {
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = t(&[10.0, 20.0], &[2]);
    // All four forms of + - * /; the reference forms keep their operands.
    assert_eq!((&a + &b)?.to_vec()?, vec![11.0, 22.0, 13.0, 24.0]);
    assert_eq!((&a - b.clone())?.to_vec()?, vec![-9.0, -18.0, -7.0, -16.0]);
    assert_eq!((a.clone() * &b)?.to_vec()?, vec![10.0, 40.0, 30.0, 80.0]);
    assert_eq!((b.clone() / a.clone())?.to_vec()?, vec![10.0, 10.0, 10.0 / 3.0, 5.0]);
    assert_eq!((-&a)?.to_vec()?, vec![-1.0, -2.0, -3.0, -4.0]);
    assert_eq!((-a.clone())?.to_vec()?, vec![-1.0, -2.0, -3.0, -4.0]);
    // Scalars on the right.
    assert_eq!((&a + 1.0)?.to_vec()?, vec![2.0, 3.0, 4.0, 5.0]);
    assert_eq!((&a - 1.0)?.to_vec()?, vec![0.0, 1.0, 2.0, 3.0]);
    assert_eq!((&a * 0.5)?.to_vec()?, vec![0.5, 1.0, 1.5, 2.0]);
    assert_eq!((&a / 4.0)?.to_vec()?, vec![0.25, 0.5, 0.75, 1.0]);
    // Division by a scalar is IEEE division, not a multiplication by its inverse.
    let x = t(&[1.0, 5.0, 7.0, 10.0], &[4]);
    let want: Vec<f32> = [1.0f32, 5.0, 7.0, 10.0].iter().map(|v| v / 3.0).collect();
    assert_eq!((&x / 3.0)?.to_vec()?, want);
    assert_eq!((x.clone() / 0.1)?.to_vec()?, [1.0f32, 5.0, 7.0, 10.0].map(|v| v / 0.1).to_vec());
    // Non-finite scalars (refused by tlrt_scale) go through a broadcast scalar.
    assert_eq!((&x * f32::INFINITY)?.to_vec()?, vec![f32::INFINITY; 4]);
    assert!((&x + f32::NAN)?.to_vec()?.iter().all(|v| v.is_nan()));
    assert_eq!((&x / 0.0)?.to_vec()?, vec![f32::INFINITY; 4]);
    // Chained with ?.
    let y = (((&a * &a)? + 1.0)? - &a)?;
    assert_eq!(y.to_vec()?, vec![1.0, 3.0, 7.0, 13.0]);
    // An error through an operator.
    assert_eq!((&a + &t(&[1.0, 2.0, 3.0], &[3])).unwrap_err().status, sys::TLRT_ERR_SHAPE);
    // The method form is the inherent one (by reference): it keeps a.
    let s = a.add(&b)?;
    assert_eq!(s.to_vec()?, (&a + &b)?.to_vec()?);
    assert_eq!(a.shape(), &[2, 2]);
    Ok(())
}
