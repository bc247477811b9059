/- HAND-WRITTEN (not generated): the typed layer of the Lean 4 binding over the generated
declarations of `TorchleanRt.Ffi`. The generated root module `TorchleanRt` imports it.
No Lean toolchain runs where this file is maintained: tests/bindings/check_tensor_layers.py
checks every `Ffi.*` call against `TorchleanRt/Ffi.lean` (the name exists, the number of
arguments is the declaration's, `.buf` / `.shape` / `true` / `false` arguments sit at parameters
of their type), every `TLRT_*` constant, the import, and the table of `#guard`s at the end
against the Python reference of the broadcasting rule. -/
import TorchleanRt.Ffi

/-!
# TorchleanRt.Tensor

A `Tensor` is a `Buffer` and its shape: the row-major dimensions (outermost first, the last
axis varies fastest), rank 0 to 8 (`TLRT_TAPE_MAX_RANK`), whose product is the buffer's element
count; the element type is the buffer's (float32, or int32 / int64 for index tensors). Tensors
are values: every operation returns a new tensor, and the buffers are freed by their finalizers.

* **Construction** (checked, in `IO`): `Tensor.ofBuffer buf shape`, `Tensor.ofFloatArray`,
  `Tensor.ofArray`, `Tensor.ofInt32Array`, `Tensor.ofInt64Array`, `Tensor.zeros`, `Tensor.ones`,
  `Tensor.full`, `Tensor.scalar`. A shape whose element count is not the buffer's fails with
  `IO.userError "TLRT_ERR_SHAPE (3): Tensor.ofBuffer: shape (2, 3) has 6 elements, the buffer 5"`;
  a rank above 8 also fails with `TLRT_ERR_SHAPE`. (The structure's constructor `Tensor.mk` does
  not check: use it only with a shape known to fit.)
* **Arithmetic** with NumPy broadcasting (the rule of the Python, Rust and Julia bindings):
  `Tensor.add / sub / mul / div / max / min`, and the instances `a + b`, `a - b`, `a * b`
  (elementwise; `Tensor.matmul` is the matrix product), `a / b`, also with a `Float` on either
  side (`t * (2.0 : Float)`: give the literal its type, or Lean looks for a literal `Tensor`).
  The operators return `IO Tensor`: write `let c ← a + b` (they do not chain, `a + b + c` does
  not elaborate; write `(← a + b) + c`). Shapes are aligned at the last axis and an axis of size
  1 stretches; shapes that do not broadcast fail with `TLRT_ERR_SHAPE` naming both, before any
  library call. Each operand whose shape differs from the result's is materialised by
  `Ffi.broadcastTo`, then the library's same-size op runs.
* **Unary**: `neg exp log sqrt abs tanh sigmoid relu`.
* **Products and layout**: `matmul` (NumPy's rules for 1-D operands; batches via `Ffi.bmm`),
  `transpose` (of a matrix), `reshape` (the same buffer, retained: no copy).
* **Reductions**: `sum` and `mean` (rank-0 results), `sumAxis` (the axis removed).
* **Reading back**: `toFloatArray`, `toArray`, `toInt32Array`, `toInt64Array`, `item`.

Errors other than the shape checks are the library's, in the format of the generated shim
(`"TLRT_ERR_DTYPE (9): tlrt_add: ..."` for arithmetic on an index tensor, ...).
-/

namespace TorchleanRt

/-- A float32 (or int32 / int64) array of the library: the values in `buf`, row-major, with the
dimensions `shape` (outermost first; `#[]` is a scalar of one element). The invariant
`shape.size ≤ 8` and "the product of `shape` is the buffer's element count" holds for every
tensor built by the functions of `Tensor` (it cannot be a proposition: the buffer's size is only
known in `IO`). -/
structure Tensor where
  /-- The values (shared by the tensors `reshape` makes from this one). -/
  buf : Buffer
  /-- The dimensions, outermost first. -/
  shape : Array UInt64

namespace Tensor

/-- The element count of a shape (1 for `#[]`), as a `Nat`: no overflow. -/
def numel (shape : Array UInt64) : Nat :=
  shape.foldl (fun n d => n * d.toNat) 1

/-- A shape as the messages of every binding write it: `(2, 3)`, `(3,)`, `()`. -/
def fmtShape (shape : Array UInt64) : String :=
  match shape.toList with
  | [d] => s!"({d},)"
  | ds => "(" ++ ", ".intercalate (ds.map (fun d => s!"{d}")) ++ ")"

/-- The `IO.Error` of this layer, in the format of the generated shim's errors:
`"NAME (code): function: message"`. -/
def tensorError (name : String) (code : UInt32) (func msg : String) : IO.Error :=
  IO.userError s!"{name} ({code}): {func}: {msg}"

/-- Fails unless `shape` has rank at most `TLRT_TAPE_MAX_RANK` (8). -/
private def checkRank (func : String) (shape : Array UInt64) : IO Unit := do
  if shape.size > TLRT_TAPE_MAX_RANK.toNat then
    throw <| tensorError "TLRT_ERR_SHAPE" TLRT_ERR_SHAPE func
      s!"shape {fmtShape shape} has rank {shape.size}, at most {TLRT_TAPE_MAX_RANK} is supported"

/-- Fails unless `shape` describes `n` elements (and has rank at most 8). -/
private def checkShape (func : String) (shape : Array UInt64) (n : Nat) (what : String) :
    IO Unit := do
  checkRank func shape
  if numel shape != n then
    throw <| tensorError "TLRT_ERR_SHAPE" TLRT_ERR_SHAPE func
      s!"shape {fmtShape shape} has {numel shape} elements, {what} {n}"

/-! ## Construction -/

/-- `buf` (kept, not copied) as a tensor of shape `shape`. Fails with `TLRT_ERR_SHAPE` when the
product of `shape` is not the buffer's element count or the rank is above 8. -/
def ofBuffer (buf : Buffer) (shape : Array UInt64) : IO Tensor := do
  checkShape "Tensor.ofBuffer" shape (← Ffi.bufferSize buf).toNat "the buffer"
  return ⟨buf, shape⟩

/-- `buf` as a one-dimensional tensor of its size. -/
def ofBuffer1d (buf : Buffer) : IO Tensor := do
  return ⟨buf, #[(← Ffi.bufferSize buf)]⟩

/-- A float32 tensor of shape `shape` on `device` holding `data` (row-major; each value rounded
to float32). Fails with `TLRT_ERR_SHAPE` when `data` does not have `numel shape` values. -/
def ofFloatArray (device : UInt32) (data : FloatArray) (shape : Array UInt64) : IO Tensor := do
  checkShape "Tensor.ofFloatArray" shape data.size "the data"
  return ⟨(← Ffi.bufferFromF32 device data), shape⟩

/-- `ofFloatArray` of an `Array Float`. -/
def ofArray (device : UInt32) (data : Array Float) (shape : Array UInt64) : IO Tensor :=
  ofFloatArray device (FloatArray.mk data) shape

/-- An int32 (index) tensor of shape `shape` on `device` holding `data` (row-major). -/
def ofInt32Array (device : UInt32) (data : Array Int32) (shape : Array UInt64) : IO Tensor := do
  checkShape "Tensor.ofInt32Array" shape data.size "the data"
  return ⟨(← Ffi.bufferFromI32 device data), shape⟩

/-- An int64 (index) tensor of shape `shape` on `device` holding `data` (row-major). -/
def ofInt64Array (device : UInt32) (data : Array Int64) (shape : Array UInt64) : IO Tensor := do
  checkShape "Tensor.ofInt64Array" shape data.size "the data"
  return ⟨(← Ffi.bufferFromI64 device data), shape⟩

/-- The element count of `shape` as the library's `uint64_t`, failing with `TLRT_ERR_OVERFLOW`
beyond `TLRT_MAX_ELEMENTS` (so that the conversion never wraps). -/
private def elementCount (func : String) (shape : Array UInt64) : IO UInt64 := do
  checkRank func shape
  let n := numel shape
  if n > TLRT_MAX_ELEMENTS.toNat then
    throw <| tensorError "TLRT_ERR_OVERFLOW" TLRT_ERR_OVERFLOW func
      s!"shape {fmtShape shape} has {n} elements, more than TLRT_MAX_ELEMENTS ({TLRT_MAX_ELEMENTS})"
  return n.toUInt64

/-- A float32 tensor of shape `shape` on `device` filled with `value` (rounded to float32). -/
def full (device : UInt32) (shape : Array UInt64) (value : Float) : IO Tensor := do
  let n ← elementCount "Tensor.full" shape
  return ⟨(← Ffi.bufferFull device n value), shape⟩

/-- A float32 tensor of zeros (+0) of shape `shape` on `device`. -/
def zeros (device : UInt32) (shape : Array UInt64) : IO Tensor := do
  let n ← elementCount "Tensor.zeros" shape
  return ⟨(← Ffi.bufferZeros device n), shape⟩

/-- A float32 tensor of ones of shape `shape` on `device`. -/
def ones (device : UInt32) (shape : Array UInt64) : IO Tensor :=
  full device shape 1.0

/-- A rank-0 float32 tensor (one element) on `device`: the scalar operand of a broadcast. -/
def scalar (device : UInt32) (value : Float) : IO Tensor :=
  full device #[] value

/-! ## What a tensor is, reading it back -/

/-- The number of dimensions. -/
def rank (t : Tensor) : Nat := t.shape.size

/-- The number of elements (the product of the shape). -/
def numElements (t : Tensor) : Nat := numel t.shape

/-- The element type code of the buffer (`TLRT_DTYPE_F32`, `TLRT_DTYPE_I32`, `TLRT_DTYPE_I64`). -/
def dtype (t : Tensor) : IO UInt32 := Ffi.bufferDtype t.buf

/-- The device of the buffer (`TLRT_DEVICE_CPU`, `TLRT_DEVICE_CUDA n`). -/
def device (t : Tensor) : IO UInt32 := Ffi.bufferDevice t.buf

/-- A copy of `t` on `device` (a copy even on the same device). -/
def toDevice (t : Tensor) (device : UInt32) : IO Tensor := do
  return ⟨(← Ffi.bufferToDevice t.buf device), t.shape⟩

/-- A tensor with its own buffer holding the same values. -/
def copy (t : Tensor) : IO Tensor := do
  return ⟨(← Ffi.bufferCopy t.buf), t.shape⟩

/-- The values of a float32 tensor, row-major, widened to `Float` (float64). -/
def toFloatArray (t : Tensor) : IO FloatArray :=
  Ffi.bufferToF32 t.buf

/-- The values of a float32 tensor as an `Array Float`, row-major. -/
def toArray (t : Tensor) : IO (Array Float) := do
  return (← Ffi.bufferToF32 t.buf).data

/-- The values of an int32 tensor, row-major. -/
def toInt32Array (t : Tensor) : IO (Array Int32) :=
  Ffi.bufferToI32 t.buf

/-- The values of an int64 tensor, row-major. -/
def toInt64Array (t : Tensor) : IO (Array Int64) :=
  Ffi.bufferToI64 t.buf

/-- The one value of a one-element float32 tensor (a rank-0 sum, ...). -/
def item (t : Tensor) : IO Float := do
  if numel t.shape != 1 then
    throw <| tensorError "TLRT_ERR_SHAPE" TLRT_ERR_SHAPE "Tensor.item"
      s!"a tensor of shape {fmtShape t.shape} has {numel t.shape} elements, not 1"
  let values ← Ffi.bufferToF32 t.buf
  return values.data[0]!

instance : ToString Tensor where
  toString t := s!"Tensor(shape={fmtShape t.shape})"

/-! ## Broadcasting -/

/-- NumPy's broadcast of two shapes, the rule of every binary operation: the shapes are aligned
at their last axis, a missing leading axis counts as 1, and on each axis the sizes must be equal
or one of them 1 (which stretches to the other; 1 against 0 gives 0). `none` when they do not
broadcast. Pure: no library call. -/
def broadcastShape (a b : Array UInt64) : Option (Array UInt64) := Id.run do
  let r := Nat.max a.size b.size
  let mut out : Array UInt64 := #[]
  for j in List.range r do
    let da : UInt64 := if j + a.size < r then 1 else a[j + a.size - r]!
    let db : UInt64 := if j + b.size < r then 1 else b[j + b.size - r]!
    if da == db || db == 1 then
      out := out.push da
    else if da == 1 then
      out := out.push db
    else
      return none
  return some out

/-- `t`'s buffer materialised at the broadcast shape `shape` (`Ffi.broadcastTo`): `t`'s axes map
to the last axes of `shape`, the leading ones are inserted. `t`'s own buffer when the shapes are
equal. -/
private def expandTo (t : Tensor) (shape : Array UInt64) : IO Buffer := do
  if t.shape == shape then
    return t.buf
  let off := shape.size - t.shape.size
  -- axisMap[j] = 0: output axis j is inserted; k + 1: it reads input axis k.
  let axisMap : Array UInt32 := (Array.range shape.size).map fun j =>
    if j < off then (0 : UInt32) else (j - off + 1).toUInt32
  Ffi.broadcastTo t.buf t.shape shape axisMap

/-- `op` (a same-size op of the library) on `a` and `b` broadcast to their common shape. -/
private def binary (func : String) (op : Buffer → Buffer → IO Buffer) (a b : Tensor) :
    IO Tensor := do
  let some shape := broadcastShape a.shape b.shape
    | throw <| tensorError "TLRT_ERR_SHAPE" TLRT_ERR_SHAPE func
        s!"shapes {fmtShape a.shape} and {fmtShape b.shape} do not broadcast"
  let x ← expandTo a shape
  let y ← expandTo b shape
  return ⟨(← op x y), shape⟩

/-! ## Elementwise arithmetic (broadcasting) -/

/-- `a + b`, broadcast (`tlrt_add`). -/
def add (a b : Tensor) : IO Tensor := binary "Tensor.add" (fun x y => Ffi.add x y) a b
/-- `a - b`, broadcast (`tlrt_sub`). -/
def sub (a b : Tensor) : IO Tensor := binary "Tensor.sub" (fun x y => Ffi.sub x y) a b
/-- `a * b` elementwise, broadcast (`tlrt_mul`). -/
def mul (a b : Tensor) : IO Tensor := binary "Tensor.mul" (fun x y => Ffi.mul x y) a b
/-- `a / b` elementwise (IEEE division), broadcast (`tlrt_div`). -/
def div (a b : Tensor) : IO Tensor := binary "Tensor.div" (fun x y => Ffi.div x y) a b
/-- The IEEE 754-2019 maximum, broadcast (`tlrt_max`: NaN if either is NaN, -0 < +0). -/
def max (a b : Tensor) : IO Tensor := binary "Tensor.max" (fun x y => Ffi.max x y) a b
/-- The IEEE 754-2019 minimum, broadcast (`tlrt_min`). -/
def min (a b : Tensor) : IO Tensor := binary "Tensor.min" (fun x y => Ffi.min x y) a b

/-- A rank-0 tensor holding `value` on the device of `t`. -/
def scalarLike (t : Tensor) (value : Float) : IO Tensor := do
  scalar (← Ffi.bufferDevice t.buf) value

/-! ## Unary operations (the shape kept) -/

/-- `-t` (`tlrt_neg`). -/
def neg (t : Tensor) : IO Tensor := do return ⟨(← Ffi.neg t.buf), t.shape⟩
/-- `exp` (`tlrt_exp`). -/
def exp (t : Tensor) : IO Tensor := do return ⟨(← Ffi.exp t.buf), t.shape⟩
/-- Natural logarithm (`tlrt_log`). -/
def log (t : Tensor) : IO Tensor := do return ⟨(← Ffi.log t.buf), t.shape⟩
/-- Square root (`tlrt_sqrt`). -/
def sqrt (t : Tensor) : IO Tensor := do return ⟨(← Ffi.sqrt t.buf), t.shape⟩
/-- Absolute value (`tlrt_abs`). -/
def abs (t : Tensor) : IO Tensor := do return ⟨(← Ffi.abs t.buf), t.shape⟩
/-- `tanh` (`tlrt_tanh`). -/
def tanh (t : Tensor) : IO Tensor := do return ⟨(← Ffi.tanh t.buf), t.shape⟩
/-- The logistic function (`tlrt_sigmoid`). -/
def sigmoid (t : Tensor) : IO Tensor := do return ⟨(← Ffi.sigmoid t.buf), t.shape⟩
/-- `max x 0`, NaN kept (`tlrt_relu`). -/
def relu (t : Tensor) : IO Tensor := do return ⟨(← Ffi.relu t.buf), t.shape⟩

/-! ## Products and layout -/

/-- The matrix product with NumPy's `matmul` rules:
* `(m, n)` × `(n, p)` is `(m, p)` (`tlrt_matmul`);
* a 1-D left operand is a row `(1, n)`, a 1-D right operand a column `(n, 1)`, and the added
  axis is removed from the result (`(n,)` × `(n,)` is a rank-0 dot product);
* batches `(b…, m, n)` × `(c…, n, p)` are `(d…, m, p)` with `d` the broadcast of the batch
  axes `b` and `c` (NumPy's rule; an operand whose batch differs is materialised by
  `tlrt_broadcast_to`, then `tlrt_bmm`); a batched left operand with a 1-D or 2-D right one
  folds the batch into the rows (one `tlrt_matmul`).

Fails with `TLRT_ERR_SHAPE` naming both shapes for a rank-0 operand, inner dimensions that
differ, or batch axes that do not broadcast. -/
def matmul (a b : Tensor) : IO Tensor := do
  let bad (why : String) : IO.Error :=
    tensorError "TLRT_ERR_SHAPE" TLRT_ERR_SHAPE "Tensor.matmul"
      s!"shapes {fmtShape a.shape} and {fmtShape b.shape}: {why}"
  if a.shape.size == 0 || b.shape.size == 0 then
    throw (bad "a rank-0 operand has no matrix product")
  let a2 : Array UInt64 := if a.shape.size == 1 then #[1, a.shape[0]!] else a.shape
  let b2 : Array UInt64 := if b.shape.size == 1 then #[b.shape[0]!, 1] else b.shape
  let aBatch := a2.extract 0 (a2.size - 2)
  let bBatch := b2.extract 0 (b2.size - 2)
  let m := a2[a2.size - 2]!
  let n := a2[a2.size - 1]!
  let n' := b2[b2.size - 2]!
  let p := b2[b2.size - 1]!
  if n != n' then
    throw (bad s!"the inner dimensions {n} and {n'} differ")
  let prod (s : Array UInt64) : UInt64 := s.foldl (· * ·) 1
  let result : Buffer × Array UInt64 ← do
    if bBatch.size == 0 then
      -- One product: every matrix of the left batch stacked as rows.
      let c ← Ffi.matmul a.buf b.buf (prod aBatch * m) n p false false
      pure (c, aBatch)
    else
      -- The batch axes broadcast (NumPy); an operand whose batch differs is materialised.
      let some batch := broadcastShape aBatch bBatch
        | throw (bad s!"the batch axes {fmtShape aBatch} and {fmtShape bBatch} do not broadcast")
      let left ← expandTo ⟨a.buf, a2⟩ (batch ++ #[m, n])
      let right ← expandTo ⟨b.buf, b2⟩ (batch ++ #[n, p])
      let c ← Ffi.bmm left right (prod batch) m n p false false
      pure (c, batch)
  let (out, batch) := result
  let rows : Array UInt64 := if a.shape.size > 1 then #[m] else #[]
  let cols : Array UInt64 := if b.shape.size > 1 then #[p] else #[]
  return ⟨out, batch ++ rows ++ cols⟩

/-- The transpose of a matrix (`tlrt_transpose2d`, a copy). Fails with `TLRT_ERR_SHAPE` for
other ranks. -/
def transpose (t : Tensor) : IO Tensor := do
  if t.shape.size != 2 then
    throw <| tensorError "TLRT_ERR_SHAPE" TLRT_ERR_SHAPE "Tensor.transpose"
      s!"transpose needs a matrix, got a tensor of shape {fmtShape t.shape}"
  let rows := t.shape[0]!
  let cols := t.shape[1]!
  return ⟨(← Ffi.transpose2d t.buf rows cols), #[cols, rows]⟩

/-- The same values with the shape `shape` (row-major order). No copy: the result holds a second
reference to the same buffer (`Ffi.bufferRetain`). Fails with `TLRT_ERR_SHAPE` when the element
counts differ or the rank is above 8. -/
def reshape (t : Tensor) (shape : Array UInt64) : IO Tensor := do
  checkRank "Tensor.reshape" shape
  if numel shape != numel t.shape then
    throw <| tensorError "TLRT_ERR_SHAPE" TLRT_ERR_SHAPE "Tensor.reshape"
      s!"cannot reshape {fmtShape t.shape} ({numel t.shape} elements) into {fmtShape shape}"
  return ⟨(← Ffi.bufferRetain t.buf), shape⟩

/-! ## Reductions -/

/-- The sum of all elements, a rank-0 tensor (`tlrt_reduce_sum`; +0 when empty). -/
def sum (t : Tensor) : IO Tensor := do
  return ⟨(← Ffi.reduceSum t.buf), #[]⟩

/-- The mean of all elements, a rank-0 tensor (`tlrt_reduce_mean`; NaN when empty). -/
def mean (t : Tensor) : IO Tensor := do
  return ⟨(← Ffi.reduceMean t.buf), #[]⟩

/-- The sum over axis `axis` (0-based; `tlrt_reduce_sum_axis`): the shape without that axis.
Fails with `TLRT_ERR_INDEX` for an axis out of range (a rank-0 tensor has none). -/
def sumAxis (t : Tensor) (axis : Nat) : IO Tensor := do
  if axis ≥ t.shape.size then
    throw <| tensorError "TLRT_ERR_INDEX" TLRT_ERR_INDEX "Tensor.sumAxis"
      s!"axis {axis} is out of range for shape {fmtShape t.shape}"
  let out ← Ffi.reduceSumAxis t.buf t.shape axis.toUInt32
  return ⟨out, t.shape.extract 0 axis ++ t.shape.extract (axis + 1) t.shape.size⟩

/-! ## The broadcasting rule, checked when this file is compiled

The same table as `BROADCAST_CASES` in tests/bindings/check_tensor_layers.py (which compares the
two) and as `bindings/julia/test/runtests.jl`. -/

#guard broadcastShape #[] #[] == some #[]
#guard broadcastShape #[] #[3] == some #[3]
#guard broadcastShape #[2, 3] #[] == some #[2, 3]
#guard broadcastShape #[2, 3] #[2, 3] == some #[2, 3]
#guard broadcastShape #[2, 3] #[3] == some #[2, 3]
#guard broadcastShape #[2, 3] #[1, 3] == some #[2, 3]
#guard broadcastShape #[2, 1] #[1, 3] == some #[2, 3]
#guard broadcastShape #[4, 1, 3] #[5, 1] == some #[4, 5, 3]
#guard broadcastShape #[1] #[7] == some #[7]
#guard broadcastShape #[0] #[1] == some #[0]
#guard broadcastShape #[2, 0] #[2, 1] == some #[2, 0]
#guard broadcastShape #[8, 1, 6, 1] #[7, 1, 5] == some #[8, 7, 6, 5]
#guard broadcastShape #[2, 3] #[4] == none
#guard broadcastShape #[2, 3] #[3, 2] == none
#guard broadcastShape #[0] #[3] == none
#guard broadcastShape #[2, 1] #[8, 4, 3] == none

end Tensor

/-! ## Operators

`a + b`, `a - b`, `a * b` (elementwise), `a / b` between tensors and with a `Float` on either
side; each is an `IO Tensor` (write `let c ← a + b`). -/

instance : HAdd Tensor Tensor (IO Tensor) := ⟨Tensor.add⟩
instance : HSub Tensor Tensor (IO Tensor) := ⟨Tensor.sub⟩
instance : HMul Tensor Tensor (IO Tensor) := ⟨Tensor.mul⟩
instance : HDiv Tensor Tensor (IO Tensor) := ⟨Tensor.div⟩

instance : HAdd Tensor Float (IO Tensor) := ⟨fun t s => do t.add (← t.scalarLike s)⟩
instance : HSub Tensor Float (IO Tensor) := ⟨fun t s => do t.sub (← t.scalarLike s)⟩
instance : HMul Tensor Float (IO Tensor) := ⟨fun t s => do t.mul (← t.scalarLike s)⟩
instance : HDiv Tensor Float (IO Tensor) := ⟨fun t s => do t.div (← t.scalarLike s)⟩
instance : HAdd Float Tensor (IO Tensor) := ⟨fun s t => do (← t.scalarLike s).add t⟩
instance : HSub Float Tensor (IO Tensor) := ⟨fun s t => do (← t.scalarLike s).sub t⟩
instance : HMul Float Tensor (IO Tensor) := ⟨fun s t => do (← t.scalarLike s).mul t⟩
instance : HDiv Float Tensor (IO Tensor) := ⟨fun s t => do (← t.scalarLike s).div t⟩

end TorchleanRt
