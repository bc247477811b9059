//! [`Tensor`]: a [`Buffer`] with a shape, NumPy broadcasting and operators.
//!
//! Hand-written (the generated ops of `ops.rs` do the work). A tensor is immutable, like its
//! buffer: every operation returns a new tensor, and [`Clone`] / [`Tensor::reshape`] share the
//! buffer (one more reference, no copy).
//!
//! Errors. Every fallible call returns [`Result`]. The checks this module makes itself (shapes
//! that do not broadcast, a shape whose product is not the element count, a bad reshape or
//! permutation) give an [`Error`] whose `status` is `sys::TLRT_ERR_SHAPE` (or the library's code
//! for the same fault: `TLRT_ERR_INDEX` for an axis out of range, `TLRT_ERR_OVERFLOW` for an
//! element count beyond `TLRT_MAX_ELEMENTS`), whose `message` names the shapes, and whose
//! `function` names the method (`"Tensor::add"`). Everything else is the library's own error
//! (`function` a C name such as `"tlrt_add"`): `TLRT_ERR_DTYPE` for arithmetic on an integer
//! tensor, `TLRT_ERR_DEVICE_MISMATCH` for operands on two devices, ...
//!
//! Operators. `+ - * /` and unary `-` are implemented for `Tensor` and `&Tensor` on both sides
//! (and for an `f32` on the right), and their `Output` is `Result<Tensor>`: an operator cannot
//! return an error otherwise, and panicking on a shape mismatch or a device error is not
//! acceptable for a library. Write `(&a + &b)?` and chain with `?`: `((&a * &b)? + 1.0)?`.
//! The reference forms keep their operands; the owned forms consume them. The method forms
//! ([`Tensor::add`], ...) take `&self` and `&Tensor` (`a.add(&b)` is the inherent method: it
//! keeps `a`).
//!
//! ```no_run
//! use torchlean_rt::{Device, Tensor};
//! let a = Tensor::from_f32(&[1.0, 2.0, 3.0, 4.0], &[2, 2], Device::CPU)?;
//! let b = Tensor::ones(&[2, 2], Device::CPU)?;
//! let c = a.matmul(&b)?;                   // [[3, 3], [7, 7]]
//! let d = ((&c + &Tensor::from_f32(&[10.0, 20.0], &[2], Device::CPU)?)? * 0.5)?; // broadcast
//! assert_eq!(d.shape(), &[2, 2]);
//! println!("{:?} {:?}", d, d.to_vec()?);
//! # Ok::<(), torchlean_rt::Error>(())
//! ```
use crate::{binding_error, ops, sys, Buffer, Device, Dtype, Error, Result};
use std::fmt;

/// The largest rank of a [`Tensor`] (the library's N-D functions take up to 8 axes).
pub const MAX_RANK: usize = 8;

/// A float32 (or int32 / int64) array of shape `shape` (row-major, the last axis fastest) in one
/// [`Buffer`] on one [`Device`]. Rank 0 ..= [`MAX_RANK`]; rank 0 is a scalar of one element; an
/// axis may be 0 (an empty tensor).
///
/// Immutable: every operation returns a new tensor. `Clone` shares the buffer (retain), as does
/// [`Tensor::reshape`]. See the [module documentation](self) for errors and operators.
pub struct Tensor {
    buf: Buffer,
    shape: Vec<u64>,
    dtype: Dtype,
    device: Device,
}

impl Clone for Tensor {
    /// A second owner of the same buffer (`tlrt_buffer_retain`), not a copy of the values.
    fn clone(&self) -> Self {
        Tensor { buf: self.buf.clone(), shape: self.shape.clone(), dtype: self.dtype, device: self.device }
    }
}

impl fmt::Debug for Tensor {
    /// `Tensor(shape=[2, 3], dtype=F32, device=cpu)` (no values: [`Tensor::to_vec`] downloads them).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor(shape={:?}, dtype={:?}, device={})", self.shape, self.dtype, self.device)
    }
}

// ---- shape helpers ---------------------------------------------------------------------------

fn shape_error(function: &'static str, message: String) -> Error {
    binding_error(function, sys::TLRT_ERR_SHAPE, format!("{function}: {message}"))
}

/// The element count of a shape, exactly: None beyond 64 bits. An axis of 0 makes it 0 whatever
/// the other axes are.
fn checked_numel(shape: &[u64]) -> Option<u64> {
    if shape.contains(&0) {
        return Some(0);
    }
    shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d))
}

/// The product of some axes (a batch, rows folded with a batch): TLRT_ERR_OVERFLOW beyond 64 bits
/// (possible only next to an axis of 0).
fn product(function: &'static str, dims: &[u64]) -> Result<u64> {
    dims.iter().try_fold(1u64, |n, &d| n.checked_mul(d)).ok_or_else(|| {
        binding_error(function, sys::TLRT_ERR_OVERFLOW,
                      format!("{function}: the product of {dims:?} does not fit 64 bits"))
    })
}

fn check_rank(function: &'static str, shape: &[u64]) -> Result<()> {
    if shape.len() > MAX_RANK {
        return Err(shape_error(function, format!("shape {shape:?} has rank {}, at most {MAX_RANK} is supported",
                                                 shape.len())));
    }
    Ok(())
}

/// The element count of a shape to allocate: its rank checked, TLRT_ERR_OVERFLOW beyond
/// TLRT_MAX_ELEMENTS (as the library's allocating functions).
fn alloc_numel(function: &'static str, shape: &[u64]) -> Result<u64> {
    check_rank(function, shape)?;
    checked_numel(shape).filter(|&n| n <= sys::TLRT_MAX_ELEMENTS).ok_or_else(|| {
        binding_error(function, sys::TLRT_ERR_OVERFLOW,
                      format!("{function}: shape {shape:?} has more than TLRT_MAX_ELEMENTS elements"))
    })
}

/// The rank is checked and the product of `shape` must be `n` (the size of the data or buffer).
fn check_numel(function: &'static str, shape: &[u64], n: u64, what: &str) -> Result<()> {
    check_rank(function, shape)?;
    if checked_numel(shape) != Some(n) {
        let prod = checked_numel(shape).map_or_else(|| "more than 2^64".to_string(), |p| p.to_string());
        return Err(shape_error(function, format!("shape {shape:?} describes {prod} elements, {what} has {n}")));
    }
    Ok(())
}

/// The NumPy broadcast of two shapes: aligned at the last axis, an axis of 1 stretches to the
/// other's size, the missing leading axes of the shorter shape count as 1. The one place where
/// the binding resolves broadcast shapes.
fn broadcast_shapes(function: &'static str, a: &[u64], b: &[u64]) -> Result<Vec<u64>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0u64; rank];
    for j in 0..rank {
        // Axis j of the output, counted from the end: axis `rank - 1 - j`.
        let da = if j < a.len() { a[a.len() - 1 - j] } else { 1 };
        let db = if j < b.len() { b[b.len() - 1 - j] } else { 1 };
        out[rank - 1 - j] = match (da, db) {
            _ if da == db => da,
            (1, d) | (d, 1) => d,
            _ => {
                return Err(shape_error(function, format!(
                    "shapes {a:?} and {b:?} do not broadcast: axis -{} has sizes {da} and {db} \
                     (equal, or one of them 1, is needed)", j + 1)))
            }
        };
    }
    Ok(out)
}

/// `buf` (of shape `from`) materialised at shape `to` by `tlrt_broadcast_to`, `from` aligned with
/// the last axes of `to`; `to` must be a broadcast of `from` (as [`broadcast_shapes`] made it). No
/// copy when the shapes are equal (a retain).
fn broadcast_buffer(buf: &Buffer, from: &[u64], to: &[u64]) -> Result<Buffer> {
    if from == to {
        return Ok(buf.clone());
    }
    let lead = to.len() - from.len();
    // axis_map[j] = 0: output axis j is inserted; k + 1: it reads input axis k.
    let axis_map: Vec<u32> = (0..to.len()).map(|j| if j < lead { 0 } else { (j - lead + 1) as u32 }).collect();
    ops::broadcast_to(buf, from, to, &axis_map)
}

// ---- constructors and accessors --------------------------------------------------------------

impl Tensor {
    /// A tensor over the result of an op: shape known, element type and device asked of the buffer.
    fn wrap(buf: Buffer, shape: Vec<u64>) -> Result<Tensor> {
        let dtype = buf.dtype()?;
        let device = buf.device()?;
        Ok(Tensor { buf, shape, dtype, device })
    }

    /// Uploads float32 values (bit for bit) as a tensor of `shape`; the product of `shape` must be
    /// `data.len()` (else TLRT_ERR_SHAPE).
    pub fn from_f32(data: &[f32], shape: &[u64], device: Device) -> Result<Tensor> {
        check_numel("Tensor::from_f32", shape, data.len() as u64, "data")?;
        Tensor::wrap(Buffer::from_f32(data, device)?, shape.to_vec())
    }

    /// Uploads int32 values: a tensor of [`Dtype::I32`] (indices; arithmetic refuses it with
    /// TLRT_ERR_DTYPE).
    pub fn from_i32(data: &[i32], shape: &[u64], device: Device) -> Result<Tensor> {
        check_numel("Tensor::from_i32", shape, data.len() as u64, "data")?;
        Tensor::wrap(Buffer::from_i32(data, device)?, shape.to_vec())
    }

    /// Uploads int64 values: a tensor of [`Dtype::I64`].
    pub fn from_i64(data: &[i64], shape: &[u64], device: Device) -> Result<Tensor> {
        check_numel("Tensor::from_i64", shape, data.len() as u64, "data")?;
        Tensor::wrap(Buffer::from_i64(data, device)?, shape.to_vec())
    }

    /// A float32 tensor of zeros (+0).
    pub fn zeros(shape: &[u64], device: Device) -> Result<Tensor> {
        let n = alloc_numel("Tensor::zeros", shape)?;
        Tensor::wrap(Buffer::zeros(n, device)?, shape.to_vec())
    }

    /// A float32 tensor of ones.
    pub fn ones(shape: &[u64], device: Device) -> Result<Tensor> {
        Tensor::full(shape, 1.0, device)
    }

    /// A float32 tensor filled with `value` (`tlrt_buffer_full`; any value, NaN and the
    /// infinities included).
    pub fn full(shape: &[u64], value: f32, device: Device) -> Result<Tensor> {
        let n = alloc_numel("Tensor::full", shape)?;
        Tensor::wrap(Buffer::full(n, value as f64, device)?, shape.to_vec())
    }

    /// A rank-0 tensor of one float32 value (any value, NaN included).
    pub fn scalar(value: f32, device: Device) -> Result<Tensor> {
        Tensor::from_f32(&[value], &[], device)
    }

    /// A tensor of `shape` over an existing buffer (of any element type), without a copy; the
    /// product of `shape` must be the buffer's size (else TLRT_ERR_SHAPE).
    pub fn from_buffer(buf: Buffer, shape: &[u64]) -> Result<Tensor> {
        check_numel("Tensor::from_buffer", shape, buf.size()?, "the buffer")?;
        Tensor::wrap(buf, shape.to_vec())
    }

    /// The dimensions, outermost first (empty for a scalar).
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// The rank: the number of axes (0 for a scalar).
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The element count: the product of the shape (1 for a scalar).
    pub fn numel(&self) -> u64 {
        // A tensor's shape describes its buffer, so the product fits.
        checked_numel(&self.shape).unwrap_or(0)
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// The device of the buffer.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The buffer (row-major values), to pass to the functions of the crate root.
    pub fn buffer(&self) -> &Buffer {
        &self.buf
    }

    /// Gives up the shape and returns the buffer.
    pub fn into_buffer(self) -> Buffer {
        self.buf
    }

    /// Downloads the values of a float32 tensor, row-major (TLRT_ERR_DTYPE for an integer one).
    pub fn to_vec(&self) -> Result<Vec<f32>> {
        self.buf.to_vec()
    }

    /// Downloads the values of an int32 tensor, row-major (TLRT_ERR_DTYPE for another type).
    pub fn to_vec_i32(&self) -> Result<Vec<i32>> {
        self.buf.to_vec_i32()
    }

    /// Downloads the values of an int64 tensor, row-major (TLRT_ERR_DTYPE for another type).
    pub fn to_vec_i64(&self) -> Result<Vec<i64>> {
        self.buf.to_vec_i64()
    }

    /// The tensor on `device`: a copy (`tlrt_buffer_to_device`), or a clone sharing the buffer
    /// when it is there already (buffers are immutable, so sharing is safe).
    pub fn to(&self, device: Device) -> Result<Tensor> {
        if device == self.device {
            return Ok(self.clone());
        }
        Tensor::wrap(self.buf.to_device(device)?, self.shape.clone())
    }

    // ---- layout ------------------------------------------------------------------------------

    /// The same values under another shape, sharing the buffer (no copy). One entry may be -1:
    /// it is inferred from the element count. TLRT_ERR_SHAPE when the element counts differ, for
    /// a second -1, another negative entry, a -1 that cannot be inferred (the other axes have a
    /// 0) or a rank above [`MAX_RANK`].
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        const F: &str = "Tensor::reshape";
        let n = self.numel();
        let bad = |why: String| shape_error(F, format!("cannot reshape shape {:?} ({n} elements) into {shape:?}: {why}",
                                                       self.shape));
        if shape.len() > MAX_RANK {
            return Err(bad(format!("rank {} is above {MAX_RANK}", shape.len())));
        }
        let mut infer = None;
        for (i, &d) in shape.iter().enumerate() {
            if d == -1 {
                if infer.replace(i).is_some() {
                    return Err(bad("only one axis may be -1".into()));
                }
            } else if d < 0 {
                return Err(bad(format!("axis {i} is {d}")));
            }
        }
        let mut dims: Vec<u64> = shape.iter().map(|&d| d.max(0) as u64).collect();
        if let Some(i) = infer {
            dims[i] = 1;
            match checked_numel(&dims) {
                Some(k) if k > 0 && (n / k) * k == n => dims[i] = n / k,
                Some(0) => return Err(bad("the -1 axis is ambiguous next to an axis of 0".into())),
                _ => return Err(bad(format!("{n} is not a multiple of the other axes' product"))),
            }
        }
        if checked_numel(&dims) != Some(n) {
            return Err(bad("the element counts differ".into()));
        }
        Ok(Tensor { buf: self.buf.clone(), shape: dims, dtype: self.dtype, device: self.device })
    }

    /// The transpose of a 2-D tensor (`tlrt_transpose2d`, a copy): shape `[c, r]` from `[r, c]`.
    /// TLRT_ERR_SHAPE for another rank.
    pub fn t(&self) -> Result<Tensor> {
        let [r, c] = self.shape[..] else {
            return Err(shape_error("Tensor::t", format!("needs a 2-D tensor, got shape {:?}", self.shape)));
        };
        Tensor::wrap(ops::transpose2d(&self.buf, r, c)?, vec![c, r])
    }

    /// Axes reordered (`tlrt_permute`, a copy): output axis i is input axis `perm[i]` (NumPy's
    /// `transpose(x, perm)`). TLRT_ERR_SHAPE unless `perm` has one entry per axis; the library
    /// refuses an entry out of range (TLRT_ERR_INDEX) or repeated (TLRT_ERR_INVALID_ARGUMENT).
    pub fn permute(&self, perm: &[usize]) -> Result<Tensor> {
        const F: &str = "Tensor::permute";
        if perm.len() != self.ndim() {
            return Err(shape_error(F, format!("perm {perm:?} has {} entries, shape {:?} has {} axes",
                                              perm.len(), self.shape, self.ndim())));
        }
        let p32: Vec<u32> = perm.iter().map(|&p| u32::try_from(p).unwrap_or(u32::MAX)).collect();
        let buf = ops::permute(&self.buf, &self.shape, &p32)?;
        // The library accepted perm: every entry is an axis, once.
        let shape = perm.iter().map(|&p| self.shape[p]).collect();
        Tensor::wrap(buf, shape)
    }

    /// The tensor materialised at `shape` by NumPy broadcasting (`tlrt_broadcast_to`, a copy;
    /// a clone sharing the buffer when the shape is the same). TLRT_ERR_SHAPE unless the tensor's
    /// shape broadcasts to `shape`.
    pub fn broadcast_to(&self, shape: &[u64]) -> Result<Tensor> {
        const F: &str = "Tensor::broadcast_to";
        check_rank(F, shape)?;
        if shape.len() < self.ndim() || broadcast_shapes(F, &self.shape, shape)? != shape {
            return Err(shape_error(F, format!("shape {:?} does not broadcast to {shape:?}", self.shape)));
        }
        Tensor::wrap(broadcast_buffer(&self.buf, &self.shape, shape)?, shape.to_vec())
    }

    // ---- elementwise -------------------------------------------------------------------------

    /// `op` on the operands broadcast to their common shape (each materialised by
    /// `tlrt_broadcast_to` when its shape differs from the result's).
    fn binary(&self, other: &Tensor, function: &'static str,
              op: fn(&Buffer, &Buffer) -> Result<Buffer>) -> Result<Tensor> {
        // Both ranks are at most MAX_RANK, so is the result's.
        let shape = broadcast_shapes(function, &self.shape, &other.shape)?;
        let a = broadcast_buffer(&self.buf, &self.shape, &shape)?;
        let b = broadcast_buffer(&other.buf, &other.shape, &shape)?;
        Tensor::wrap(op(&a, &b)?, shape)
    }

    fn unary(&self, op: impl FnOnce(&Buffer) -> Result<Buffer>) -> Result<Tensor> {
        Tensor::wrap(op(&self.buf)?, self.shape.clone())
    }

    /// `self + other`, broadcast (`tlrt_add`).
    pub fn add(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(other, "Tensor::add", ops::add)
    }
    /// `self - other`, broadcast (`tlrt_sub`).
    pub fn sub(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(other, "Tensor::sub", ops::sub)
    }
    /// `self * other` elementwise, broadcast (`tlrt_mul`).
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(other, "Tensor::mul", ops::mul)
    }
    /// `self / other` elementwise (IEEE division), broadcast (`tlrt_div`).
    pub fn div(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(other, "Tensor::div", ops::div)
    }
    /// The IEEE 754-2019 maximum, broadcast (`tlrt_max`: NaN if either is NaN, -0 < +0).
    pub fn maximum(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(other, "Tensor::maximum", ops::max)
    }
    /// The IEEE 754-2019 minimum, broadcast (`tlrt_min`).
    pub fn minimum(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(other, "Tensor::minimum", ops::min)
    }

    /// `-x` (`tlrt_neg`).
    pub fn neg(&self) -> Result<Tensor> {
        self.unary(ops::neg)
    }
    /// `e^x` (`tlrt_exp`).
    pub fn exp(&self) -> Result<Tensor> {
        self.unary(ops::exp)
    }
    /// `ln x` (`tlrt_log`).
    pub fn log(&self) -> Result<Tensor> {
        self.unary(ops::log)
    }
    /// `max(x, 0)` (`tlrt_relu`; NaN stays NaN).
    pub fn relu(&self) -> Result<Tensor> {
        self.unary(ops::relu)
    }
    /// `tanh x` (`tlrt_tanh`).
    pub fn tanh(&self) -> Result<Tensor> {
        self.unary(ops::tanh)
    }
    /// `1 / (1 + e^-x)` (`tlrt_sigmoid`).
    pub fn sigmoid(&self) -> Result<Tensor> {
        self.unary(ops::sigmoid)
    }
    /// The correctly rounded square root (`tlrt_sqrt`).
    pub fn sqrt(&self) -> Result<Tensor> {
        self.unary(ops::sqrt)
    }
    /// `|x|` (`tlrt_abs`).
    pub fn abs(&self) -> Result<Tensor> {
        self.unary(ops::abs)
    }
    /// `x * (float)c` (`tlrt_scale`; NaN, the infinities and values that round to an infinity are
    /// TLRT_ERR_INVALID_ARGUMENT).
    pub fn scale(&self, c: f64) -> Result<Tensor> {
        self.unary(|b| ops::scale(b, c))
    }

    // ---- reductions --------------------------------------------------------------------------

    /// The sum of all elements, a rank-0 tensor (`tlrt_reduce_sum`; +0 when empty).
    pub fn sum(&self) -> Result<Tensor> {
        Tensor::wrap(ops::reduce_sum(&self.buf)?, Vec::new())
    }

    /// The mean of all elements, a rank-0 tensor (`tlrt_reduce_mean`; NaN when empty).
    pub fn mean(&self) -> Result<Tensor> {
        Tensor::wrap(ops::reduce_mean(&self.buf)?, Vec::new())
    }

    /// The sum over axis `axis` (`tlrt_reduce_sum_axis`): the shape without that axis.
    /// TLRT_ERR_INDEX for an axis out of range, TLRT_ERR_INVALID_ARGUMENT for a rank-0 tensor.
    pub fn sum_axis(&self, axis: usize) -> Result<Tensor> {
        if axis >= self.ndim() && self.ndim() > 0 {
            return Err(binding_error("Tensor::sum_axis", sys::TLRT_ERR_INDEX, format!(
                "Tensor::sum_axis: axis {axis} is out of range for shape {:?}", self.shape)));
        }
        let buf = ops::reduce_sum_axis(&self.buf, &self.shape, axis as u32)?;
        let mut shape = self.shape.clone();
        shape.remove(axis);
        Tensor::wrap(buf, shape)
    }

    // ---- products ----------------------------------------------------------------------------

    /// The matrix product with NumPy's `matmul` rules:
    /// * 2-D × 2-D: `[m, n] @ [n, p] = [m, p]` (`tlrt_matmul`);
    /// * a 1-D left operand is a row `[1, n]`, a 1-D right operand a column `[n, 1]`, and that
    ///   added axis is removed from the result (`[n] @ [n] ` is a rank-0 dot product);
    /// * batches `[.., m, n] @ [.., n, p] = [.., m, p]`: the leading (batch) axes broadcast
    ///   against each other as NumPy's do, an operand whose batch differs from the result's is
    ///   materialised by `tlrt_broadcast_to`, and `tlrt_bmm` runs over the batch; a batched left
    ///   operand with a 2-D (or 1-D) right one is one product with the batch folded into the rows.
    ///
    /// TLRT_ERR_SHAPE for a rank-0 operand, inner dimensions that differ, or batch axes that do
    /// not broadcast.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        const F: &str = "Tensor::matmul";
        let (sa, sb) = (&self.shape, &other.shape);
        if sa.is_empty() || sb.is_empty() {
            return Err(shape_error(F, format!("shapes {sa:?} and {sb:?}: a rank-0 operand has no matrix product")));
        }
        let a: Vec<u64> = if sa.len() == 1 { vec![1, sa[0]] } else { sa.clone() };
        let b: Vec<u64> = if sb.len() == 1 { vec![sb[0], 1] } else { sb.clone() };
        let (a_batch, [m, n]) = a.split_at(a.len() - 2) else { unreachable!() };
        let (b_batch, [n2, p]) = b.split_at(b.len() - 2) else { unreachable!() };
        let (m, n, p) = (*m, *n, *p);
        if n != *n2 {
            return Err(shape_error(F, format!("shapes {sa:?} and {sb:?}: the inner dimensions {n} and {n2} differ")));
        }
        let (buf, mut shape) = if b_batch.is_empty() {
            // One product, every matrix of the left batch stacked as rows.
            let rows = product(F, a_batch)?.checked_mul(m).ok_or_else(|| {
                binding_error(F, sys::TLRT_ERR_OVERFLOW, format!("{F}: the rows of shape {sa:?} do not fit 64 bits"))
            })?;
            (ops::matmul(&self.buf, &other.buf, rows, n, p, false, false)?, a_batch.to_vec())
        } else {
            // The batch axes broadcast (NumPy); an operand whose batch differs is materialised.
            let batch = broadcast_shapes(F, a_batch, b_batch).map_err(|_| {
                shape_error(F, format!("shapes {sa:?} and {sb:?}: the batch axes {a_batch:?} and {b_batch:?} \
                                        do not broadcast"))
            })?;
            let (mut to_a, mut to_b) = (batch.clone(), batch.clone());
            to_a.extend([m, n]);
            to_b.extend([n, p]);
            let left = broadcast_buffer(&self.buf, &a, &to_a)?;
            let right = broadcast_buffer(&other.buf, &b, &to_b)?;
            (ops::bmm(&left, &right, product(F, &batch)?, m, n, p, false, false)?, batch)
        };
        if sa.len() > 1 {
            shape.push(m);
        }
        if sb.len() > 1 {
            shape.push(p);
        }
        Tensor::wrap(buf, shape)
    }

    /// `self op c` for an f32 on the right: `*` is `tlrt_scale` (exactly `x * c`); `/` is
    /// `tlrt_scale` by `1 / c` when that is exact (c a power of two), else the division by a
    /// broadcast scalar (so that `x / 3` is IEEE division, not `x * (1 / 3)`); `+`, `-`, and the
    /// non-finite `c` that `tlrt_scale` refuses go through a broadcast scalar.
    fn with_scalar(&self, c: f32, op: ScalarOp) -> Result<Tensor> {
        // 1 / c is exact for a normal power of two whose inverse is finite; then x * (1 / c) and
        // x / c are the same exact value rounded once.
        let exact_inverse = c.is_normal() && c.to_bits() & 0x007F_FFFF == 0 && (1.0 / c).is_finite();
        match op {
            ScalarOp::Mul if c.is_finite() => self.scale(c as f64),
            ScalarOp::Div if exact_inverse => self.scale((1.0 / c) as f64),
            _ => {
                let s = Tensor::scalar(c, self.device)?;
                match op {
                    ScalarOp::Add => self.add(&s),
                    ScalarOp::Sub => self.sub(&s),
                    ScalarOp::Mul => self.mul(&s),
                    ScalarOp::Div => self.div(&s),
                }
            }
        }
    }
}

#[derive(Clone, Copy)]
enum ScalarOp {
    Add,
    Sub,
    Mul,
    Div,
}

// ---- operators ---------------------------------------------------------------------------------
//
// Output = Result<Tensor> for every operator (see the module documentation).

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $scalar:ident) => {
        impl std::ops::$trait<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            #[doc = concat!("[`Tensor::", stringify!($method), "`], broadcast.")]
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                Tensor::$method(self, rhs)
            }
        }
        impl std::ops::$trait<Tensor> for &Tensor {
            type Output = Result<Tensor>;
            #[doc = concat!("[`Tensor::", stringify!($method), "`], broadcast.")]
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                Tensor::$method(self, &rhs)
            }
        }
        impl std::ops::$trait<&Tensor> for Tensor {
            type Output = Result<Tensor>;
            #[doc = concat!("[`Tensor::", stringify!($method), "`], broadcast.")]
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                Tensor::$method(&self, rhs)
            }
        }
        impl std::ops::$trait<Tensor> for Tensor {
            type Output = Result<Tensor>;
            #[doc = concat!("[`Tensor::", stringify!($method), "`], broadcast.")]
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                Tensor::$method(&self, &rhs)
            }
        }
        impl std::ops::$trait<f32> for &Tensor {
            type Output = Result<Tensor>;
            #[doc = concat!("[`Tensor::", stringify!($method), "`] with a scalar on the right.")]
            fn $method(self, rhs: f32) -> Result<Tensor> {
                self.with_scalar(rhs, ScalarOp::$scalar)
            }
        }
        impl std::ops::$trait<f32> for Tensor {
            type Output = Result<Tensor>;
            #[doc = concat!("[`Tensor::", stringify!($method), "`] with a scalar on the right.")]
            fn $method(self, rhs: f32) -> Result<Tensor> {
                self.with_scalar(rhs, ScalarOp::$scalar)
            }
        }
    };
}

binary_operator!(Add, add, Add);
binary_operator!(Sub, sub, Sub);
binary_operator!(Mul, mul, Mul);
binary_operator!(Div, div, Div);

impl std::ops::Neg for &Tensor {
    type Output = Result<Tensor>;
    /// [`Tensor::neg`].
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(self)
    }
}

impl std::ops::Neg for Tensor {
    type Output = Result<Tensor>;
    /// [`Tensor::neg`].
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(&self)
    }
}
