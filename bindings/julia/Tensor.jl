# Tensor.jl: the shape-carrying layer of the Julia binding. HAND-WRITTEN (not generated).
#
# Included at the end of the generated module TorchleanRT.jl (bindings/gen/gen_bindings.py emits
# `include("Tensor.jl")`), so the generated Buffer wrappers are in scope unqualified. Beware: the
# generated functions named like Base's (exp, log, sqrt, abs, tanh, max, min, div, inv, clamp) are
# TorchleanRT's own functions and shadow Base's in this module, so this file calls Base.max /
# Base.min / Base.div explicitly on numbers and extends Base only through qualified names
# (Base.size, Base.Broadcast.broadcasted(::typeof(Base.exp), ...)). It defines no unqualified
# function named like a Base function the generated code calls (zeros, length, ...).
#
# No Julia runs where this file is maintained: tests/bindings/check_tensor_layers.py checks it
# statically (every call of a generated wrapper and of C.tlrt_* with an arity the generated code
# accepts, every C.TLRT_* / :TLRT_* constant, the exports, the include, the broadcasting table of
# test/runtests.jl), and test/runtests.jl is the test suite to run where Julia is installed.

export Tensor, to_device

"""
    TENSOR_MAX_RANK

The largest rank of a [`Tensor`]: 8, the rank limit of the library's N-D functions
(`C.TLRT_TAPE_MAX_RANK`; also `tlrt_broadcast_to`'s, `tlrt_permute`'s, `tlrt_reduce_sum_axis`'s).
"""
const TENSOR_MAX_RANK = Int(C.TLRT_TAPE_MAX_RANK)

"""
    Tensor{T,N}

A [`Buffer`](@ref) with a shape: `N` dimensions (0 to $(TENSOR_MAX_RANK)), element type `T` (the
buffer's: `Float32`, or `Int32` / `Int64` for index tensors). Immutable: every operation returns a
new tensor; the values live in the buffer (on the CPU or a CUDA device), whose finalizer frees them.

# Shape convention (read this first)

The library stores values row-major (C order: the last axis varies fastest). A `Tensor`'s
`size(t)` is the library's shape, and `Array(t)` returns a Julia array **of that same size
with every element at the same index**: element `[i, j]` of the library's row-major matrix is
`Array(t)[i, j]`. The conversion permutes the memory (Julia is column-major), so
`Tensor(A)` and `Array(t)` are exact inverses, `size(Tensor(A)) == size(A)`, and what you index
is what the library computes on. Consequences:

* `reshape(t, dims...)` reads the values in **row-major** order (NumPy / PyTorch), not
  column-major as `reshape` of a Julia `Array` does: `Array(reshape(t, 3, 2))` is
  `permutedims(reshape(vec(permutedims(Array(t))), 2, 3))`, not `reshape(Array(t), 3, 2)`.
* Broadcasting aligns shapes at their **last** axis (NumPy's rule, the same as the Python and
  Rust bindings): a `(3,)` tensor broadcast with a `(2, 3)` tensor is a row added to every row.
  Julia's Array broadcasting aligns at the first axis instead; both agree whenever the operands
  have the same number of dimensions (`(2, 3) .+ (1, 3)`, `(2, 3) .+ (2, 1)`).

# Construction

* `Tensor(A::AbstractArray; device = CPU)`: a copy of `A` (floating-point and other non-integer
  `Real` values become `Float32`; `Int32` / `Int64` arrays give index tensors).
* `Tensor(buf::Buffer, dims...)` / `Tensor(buf, dims::Tuple)`: `buf` (kept, not copied) with the
  shape `dims`, checked: `prod(dims) == buffer_size(buf)`, rank at most $(TENSOR_MAX_RANK), no
  negative dimension (else `TorchleanRTError` with status `TLRT_ERR_SHAPE` naming the shape).
  `Tensor(buf)` is one-dimensional, `Tensor(buf, ())` a scalar.
* `zeros(Tensor, dims...)`, `ones(Tensor, dims...)`, [`TorchleanRT.full`](@ref)`(value, dims...)`,
  each with the keyword `device` (`TorchleanRT.CPU`, `TorchleanRT.cuda(i)`).

# Operations (each returns a new `Float32` tensor unless said otherwise)

* `a .+ b`, `a .- b`, `a .* b`, `a ./ b`: elementwise with NumPy broadcasting (each operand
  whose size differs from the result's materialised by `tlrt_broadcast_to`, then `tlrt_add`,
  `tlrt_sub`, `tlrt_mul`, `tlrt_div`); `a + b` and `a - b` are the same as `a .+ b`, `a .- b`.
* `a * b`: the matrix product ([`TorchleanRT.matmul`](@ref): `tlrt_matmul` / `tlrt_bmm`).
* with a real scalar `s`: `s * a`, `a * s`, `a / s`, and every dotted form (`a .+ s`,
  `s .- a`, ...); the scalar is a broadcast 0-dimensional tensor.
* `max.(a, b)`, `min.(a, b)`: the IEEE maximum / minimum, broadcasting (`tlrt_max` / `tlrt_min`).
* `-a`, `exp.(a)`, `log.(a)`, `sqrt.(a)`, `abs.(a)`, `tanh.(a)`, `TorchleanRT.relu.(a)`,
  `TorchleanRT.sigmoid.(a)`: elementwise (`tlrt_neg`, `tlrt_exp`, ...).
* `sum(a)`, `TorchleanRT.mean(a)`: over all elements, a 0-dimensional tensor
  (`tlrt_reduce_sum` / `tlrt_reduce_mean`); `sum(a; dims = k)`: over axis `k`, which is kept
  with size 1 as Julia's `sum` keeps it (`tlrt_reduce_sum_axis`).
* `reshape(a, dims...)`: the same buffer (`tlrt_buffer_retain`, no copy), row-major order.
* `transpose(a)`, `a'`, `permutedims(a)` of a matrix (`tlrt_transpose2d`);
  `permutedims(a, perm)` of any tensor (`tlrt_permute`).

Elementwise functions are spelled with a dot, as for Julia arrays: `exp(a)` of a matrix means
the matrix exponential in Julia and is not defined here. The module's own functions
`TorchleanRT.add / sub / mul / div / max / min / neg / exp / log / sqrt / abs / tanh / relu /
sigmoid` accept tensors too (elementwise, broadcasting), as they accept buffers.
Dotted expressions are evaluated eagerly, one library call per operation (no fusion); in-place
forms (`c .= a .+ b`) and dotted calls of other functions are not supported.

Shapes that do not broadcast (or multiply) throw `TorchleanRTError` with status
`TLRT_ERR_SHAPE` and a message naming both shapes, before any library call; every other failure
is the library's error (`TLRT_ERR_DTYPE` for arithmetic on an index tensor,
`TLRT_ERR_DEVICE_MISMATCH` for operands on two devices, ...).
"""
struct Tensor{T,N}
    buf::Buffer
    dims::NTuple{N,Int}
    function Tensor{T,N}(buf::Buffer, dims::NTuple{N,Integer}) where {T,N}
        d = _checked_dims("Tensor", dims)
        S = _eltype_of(buffer_dtype(buf))
        S === T || throw(_tensor_error(:TLRT_ERR_DTYPE, "Tensor",
            "the buffer holds $S values, not $T"))
        n = buffer_size(buf)
        _numel(d) == n || throw(_tensor_error(:TLRT_ERR_SHAPE, "Tensor",
            "shape $d has $(_numel_string(d)) elements, the buffer $n"))
        new{T,N}(buf, d)
    end
end

# ---- helpers ----------------------------------------------------------------------------------

"""A `TorchleanRTError` raised by this layer: `status` is the constant `C.<name>`."""
_tensor_error(name::Symbol, func::AbstractString, msg::AbstractString) =
    TorchleanRTError(Int32(getfield(C, name)), String(name), String(msg), String(func))

"""The element count of `dims`, or `nothing` when it does not fit an `Int`."""
function _numel(dims::Tuple)
    any(==(0), dims) && return 0
    n = 1
    for d in dims
        n, overflow = Base.Checked.mul_with_overflow(n, Int(d))
        overflow && return nothing
    end
    return n
end

function _numel_string(dims::Tuple)
    n = _numel(dims)
    return n === nothing ? "more than $(typemax(Int))" : string(n)
end

"""`dims` as `NTuple{N,Int}` after the checks every shape passes (rank, no negative entry)."""
function _checked_dims(func::AbstractString, dims::Tuple)
    length(dims) <= TENSOR_MAX_RANK || throw(_tensor_error(:TLRT_ERR_SHAPE, func,
        "shape $(Tuple(dims)) has rank $(length(dims)), at most $TENSOR_MAX_RANK is supported"))
    all(d -> d >= 0, dims) || throw(_tensor_error(:TLRT_ERR_SHAPE, func,
        "shape $(Tuple(dims)) has a negative dimension"))
    return map(Int, dims)
end

function _eltype_of(dtype::Integer)
    dtype == C.TLRT_DTYPE_F32 && return Float32
    dtype == C.TLRT_DTYPE_I32 && return Int32
    dtype == C.TLRT_DTYPE_I64 && return Int64
    throw(_tensor_error(:TLRT_ERR_DTYPE, "Tensor", "unknown element type code $dtype"))
end

"""A new `Float32` result of the library with the shape `dims`."""
_float_tensor(buf::Buffer, dims::Tuple) = Tensor{Float32,length(dims)}(buf, dims)

# ---- construction -----------------------------------------------------------------------------

Tensor(buf::Buffer, dims::Tuple{Vararg{Integer}}) =
    Tensor{_eltype_of(buffer_dtype(buf)),length(dims)}(buf, dims)
Tensor(buf::Buffer, dims::Integer...) = Tensor(buf, dims)
Tensor(buf::Buffer) = Tensor(buf, (Int(buffer_size(buf)),))

"""
    Tensor(A::AbstractArray; device = TorchleanRT.CPU)

A new tensor holding a copy of `A`, of size `size(A)` with `Array(Tensor(A)) == A` (the values are
permuted into the library's row-major order on the way). `Float32` for floating-point and other
non-integer `Real` element types (rounded to nearest), `Int32` / `Int64` for those integer types;
other integer types (`Int8`, `UInt64`, `Bool`, ...) are refused: convert first
(`Tensor(Float32.(A))`, `Tensor(Int64.(A))`). `device` is where the buffer lives.
"""
function Tensor(A::AbstractArray{S,N}; device::Integer = CPU) where {S,N}
    dims = _checked_dims("Tensor", size(A))
    # Row-major order: the last index varies fastest.
    v = N <= 1 ? vec(A) : vec(permutedims(A, N:-1:1))
    if S === Int32
        return Tensor{Int32,N}(buffer_from_i32(device, v), dims)
    elseif S === Int64
        return Tensor{Int64,N}(buffer_from_i64(device, v), dims)
    elseif S <: Real && !(S <: Integer)
        return Tensor{Float32,N}(buffer_from_f32(device, v), dims)
    end
    throw(ArgumentError("Tensor: element type $S is not supported: floating-point values give a " *
                        "Float32 tensor, Int32 / Int64 an index tensor; convert other types first"))
end

"""
    TorchleanRT.full(value, dims...; device = TorchleanRT.CPU)

A `Float32` tensor of size `dims` (integers or one tuple) filled with `value` rounded to
`Float32` (`tlrt_buffer_full`). `zeros(Tensor, dims...)` and `ones(Tensor, dims...)` are
`full(0, dims...)` and `full(1, dims...)`.
"""
function full(value::Real, dims::Tuple{Vararg{Integer}}; device::Integer = CPU)
    d = _checked_dims("full", dims)
    n = _numel(d)
    (n === nothing || n > C.TLRT_MAX_ELEMENTS) && throw(_tensor_error(:TLRT_ERR_OVERFLOW, "full",
        "shape $d has $(_numel_string(d)) elements, more than TLRT_MAX_ELEMENTS " *
        "($(C.TLRT_MAX_ELEMENTS))"))
    return Tensor{Float32,length(d)}(buffer_full(device, n, value), d)
end
full(value::Real, dims::Integer...; device::Integer = CPU) = full(value, dims; device)

Base.zeros(::Type{Tensor}, dims::Integer...; device::Integer = CPU) = full(0, dims; device)
Base.zeros(::Type{Tensor}, dims::Tuple{Vararg{Integer}}; device::Integer = CPU) =
    full(0, dims; device)
Base.zeros(::Type{Tensor}, dims::Tuple{}; device::Integer = CPU) = full(0, dims; device)
Base.ones(::Type{Tensor}, dims::Integer...; device::Integer = CPU) = full(1, dims; device)
Base.ones(::Type{Tensor}, dims::Tuple{Vararg{Integer}}; device::Integer = CPU) =
    full(1, dims; device)
Base.ones(::Type{Tensor}, dims::Tuple{}; device::Integer = CPU) = full(1, dims; device)

"""A rank-0 tensor holding `s` on the device of `t` (the scalar operand of a broadcast)."""
_scalar_like(t::Tensor, s::Real) = Tensor{Float32,0}(buffer_full(device(t), 1, s), ())

# ---- what a tensor is -------------------------------------------------------------------------

"""`size(t)`: the library's (row-major) shape, also the size of `Array(t)`."""
Base.size(t::Tensor) = t.dims
function Base.size(t::Tensor, d::Integer)
    d >= 1 || throw(ArgumentError("size: dimension $d out of range (dimensions start at 1)"))
    return d <= length(t.dims) ? t.dims[d] : 1
end
Base.ndims(::Tensor{T,N}) where {T,N} = N
Base.length(t::Tensor) = prod(t.dims)
Base.isempty(t::Tensor) = length(t) == 0
Base.eltype(::Type{<:Tensor{T}}) where {T} = T

"""
    TorchleanRT.device(t::Tensor)

The device handle of `t`'s buffer (`TorchleanRT.CPU`, `TorchleanRT.cuda(i)`).
"""
device(t::Tensor) = buffer_device(t.buf)

"""
    to_device(t::Tensor, device)

A copy of `t` on `device` (`tlrt_buffer_to_device`; a copy even on the same device).
"""
to_device(t::Tensor{T,N}, dev::Integer) where {T,N} =
    Tensor{T,N}(buffer_to_device(t.buf, dev), t.dims)

"""`copy(t)`: a tensor with its own buffer holding the same values (`tlrt_buffer_copy`)."""
Base.copy(t::Tensor{T,N}) where {T,N} = Tensor{T,N}(buffer_copy(t.buf), t.dims)

"""
    free!(t::Tensor)

Drops the reference of `t`'s `Buffer` now instead of at garbage collection (`free!(t.buf)`).
Tensors made by `reshape` hold their own reference (`tlrt_buffer_retain`) and stay valid; `t`,
and the `Buffer` object it was built from by `Tensor(buf, dims)`, must not be used afterwards.
"""
free!(t::Tensor) = free!(t.buf)

# ---- to Julia arrays --------------------------------------------------------------------------

function _host_values(t::Tensor{T}) where {T}
    T === Float32 && return buffer_to_f32(t.buf)
    T === Int32 && return buffer_to_i32(t.buf)
    return buffer_to_i64(t.buf)
end

"""
    Array(t::Tensor{T,N}) -> Array{T,N}

The values of `t` downloaded into a new Julia array of size `size(t)`, each element at its index
(the library's row-major order is permuted into Julia's column-major order): the inverse of
`Tensor(A)`. `collect(t)` is the same.
"""
function Base.Array(t::Tensor{T,N}) where {T,N}
    v = _host_values(t)
    N == 0 && return fill(v[1])
    N == 1 && return v
    return permutedims(reshape(v, reverse(t.dims)), N:-1:1)
end
Base.collect(t::Tensor) = Array(t)

"""`t[]`: the one value of a one-element tensor (downloaded)."""
function Base.getindex(t::Tensor)
    length(t) == 1 || throw(BoundsError(t, ()))
    return _host_values(t)[1]
end

# ---- display ----------------------------------------------------------------------------------

function _device_string(dev::Integer)
    (dev >> 16) == C.TLRT_DEVICE_KIND_CUDA && return "cuda:$(Int(dev & 0xffff))"
    return "cpu"
end

_size_string(dims::Tuple{}) = "0-dimensional"
_size_string(dims::Tuple{Int}) = "$(dims[1])-element"
_size_string(dims::Tuple) = join(dims, "×")

function Base.show(io::IO, t::Tensor{T,N}) where {T,N}
    print(io, "Tensor{", T, ", ", N, "}(size ", t.dims, ")")
end

function Base.show(io::IO, ::MIME"text/plain", t::Tensor{T,N}) where {T,N}
    print(io, _size_string(t.dims), " Tensor{", T, ", ", N, "} on ", _device_string(device(t)))
    if buffer_is_released(t.buf)
        print(io, " (storage released)")
        return
    end
    println(io, ":")
    A = Array(t)
    ctx = IOContext(io, :typeinfo => T, :compact => get(io, :compact, N >= 2))
    if N == 0
        print(ctx, " ")
        show(ctx, A[])
    else
        Base.print_array(ctx, A)
    end
end

# ---- broadcasting -----------------------------------------------------------------------------

"""
    TorchleanRT.broadcast_shape(a::Tuple, b::Tuple; func = "broadcast_shape") -> NTuple{N,Int}

NumPy's broadcast of two (row-major) shapes, the rule of every binary operation on tensors: the
shapes are aligned at their last axis, a missing leading axis counts as 1, and on each axis the
sizes must be equal or one of them 1 (which stretches to the other; `1` against `0` gives `0`).
Throws `TorchleanRTError` with status `TLRT_ERR_SHAPE` naming both shapes (and `func`) otherwise.
The same rule as the Python, Rust and Lean bindings; pure Julia (no library call).
"""
function broadcast_shape(a::Tuple{Vararg{Integer}}, b::Tuple{Vararg{Integer}};
                         func::AbstractString = "broadcast_shape")
    sa, sb = map(Int, a), map(Int, b)
    ra, rb = length(sa), length(sb)
    r = Base.max(ra, rb)
    return ntuple(r) do j
        da = j > r - ra ? sa[j - (r - ra)] : 1
        db = j > r - rb ? sb[j - (r - rb)] : 1
        if da == db || db == 1
            da
        elseif da == 1
            db
        else
            throw(_tensor_error(:TLRT_ERR_SHAPE, func,
                "shapes $sa and $sb do not broadcast (axis $(j - r - 1): $da vs $db)"))
        end
    end
end

"""`t`'s buffer materialised at the broadcast shape `dims` (`tlrt_broadcast_to`): `t`'s axes map
to the last axes of `dims`, the leading ones are inserted. `t`'s own buffer when the shapes are
equal."""
function _expand(t::Tensor, dims::Tuple{Vararg{Int}})
    t.dims == dims && return t.buf
    off = length(dims) - ndims(t)
    # axis_map[j] = 0: output axis j is inserted; k + 1: it reads input axis k (0-based).
    axis_map = [j <= off ? 0 : j - off for j in 1:length(dims)]
    return broadcast_to(t.buf, collect(Int, t.dims), collect(Int, dims), axis_map)
end

"""`f` (a same-size op on buffers) on `a` and `b` broadcast to their common shape."""
function _binary(f::F, func::String, a::Tensor, b::Tensor) where {F}
    dims = broadcast_shape(a.dims, b.dims; func)
    return _float_tensor(f(_expand(a, dims), _expand(b, dims)), dims)
end

_unary(f::F, t::Tensor) where {F} = _float_tensor(f(t.buf), t.dims)

# The module's elementwise functions, extended from buffers to tensors (broadcasting).
"""`TorchleanRT.add(a::Tensor, b::Tensor)`: `a .+ b` (broadcast; `tlrt_add`)."""
add(a::Tensor, b::Tensor) = _binary((x, y) -> add(x, y), "add", a, b)
"""`TorchleanRT.sub(a::Tensor, b::Tensor)`: `a .- b` (broadcast; `tlrt_sub`)."""
sub(a::Tensor, b::Tensor) = _binary((x, y) -> sub(x, y), "sub", a, b)
"""`TorchleanRT.mul(a::Tensor, b::Tensor)`: `a .* b` (broadcast; `tlrt_mul`)."""
mul(a::Tensor, b::Tensor) = _binary((x, y) -> mul(x, y), "mul", a, b)
"""`TorchleanRT.div(a::Tensor, b::Tensor)`: `a ./ b` (broadcast; IEEE division, `tlrt_div`)."""
div(a::Tensor, b::Tensor) = _binary((x, y) -> div(x, y), "div", a, b)
"""`TorchleanRT.max(a::Tensor, b::Tensor)`: `max.(a, b)` (broadcast; IEEE maximum, `tlrt_max`)."""
max(a::Tensor, b::Tensor) = _binary((x, y) -> max(x, y), "max", a, b)
"""`TorchleanRT.min(a::Tensor, b::Tensor)`: `min.(a, b)` (broadcast; IEEE minimum, `tlrt_min`)."""
min(a::Tensor, b::Tensor) = _binary((x, y) -> min(x, y), "min", a, b)

neg(t::Tensor) = _unary(x -> neg(x), t)
exp(t::Tensor) = _unary(x -> exp(x), t)
log(t::Tensor) = _unary(x -> log(x), t)
sqrt(t::Tensor) = _unary(x -> sqrt(x), t)
abs(t::Tensor) = _unary(x -> abs(x), t)
tanh(t::Tensor) = _unary(x -> tanh(x), t)
relu(t::Tensor) = _unary(x -> relu(x), t)
sigmoid(t::Tensor) = _unary(x -> sigmoid(x), t)

# Operators. `+` / `-` between tensors broadcast as the dotted forms do (the Python and Rust
# semantics); with a scalar only the dotted forms exist, as for Julia arrays, except the scalings
# `s * t`, `t * s` and `t / s`.
Base.:+(a::Tensor, b::Tensor) = add(a, b)
Base.:-(a::Tensor, b::Tensor) = sub(a, b)
Base.:-(t::Tensor) = neg(t)
Base.:*(a::Tensor, b::Tensor) = matmul(a, b)
Base.:*(s::Real, t::Tensor) = mul(_scalar_like(t, s), t)
Base.:*(t::Tensor, s::Real) = mul(t, _scalar_like(t, s))
Base.:/(t::Tensor, s::Real) = div(t, _scalar_like(t, s))

# Dotted operations: `a .+ b` lowers to broadcasted(+, a, b), answered here by one library call
# (a tensor, which materialize returns as it is). Nested dotted expressions are evaluated from
# the inside out.
Base.Broadcast.broadcasted(::typeof(+), a::Tensor, b::Tensor) = add(a, b)
Base.Broadcast.broadcasted(::typeof(+), a::Tensor, s::Real) = add(a, _scalar_like(a, s))
Base.Broadcast.broadcasted(::typeof(+), s::Real, b::Tensor) = add(_scalar_like(b, s), b)
Base.Broadcast.broadcasted(::typeof(-), a::Tensor, b::Tensor) = sub(a, b)
Base.Broadcast.broadcasted(::typeof(-), a::Tensor, s::Real) = sub(a, _scalar_like(a, s))
Base.Broadcast.broadcasted(::typeof(-), s::Real, b::Tensor) = sub(_scalar_like(b, s), b)
Base.Broadcast.broadcasted(::typeof(*), a::Tensor, b::Tensor) = mul(a, b)
Base.Broadcast.broadcasted(::typeof(*), a::Tensor, s::Real) = mul(a, _scalar_like(a, s))
Base.Broadcast.broadcasted(::typeof(*), s::Real, b::Tensor) = mul(_scalar_like(b, s), b)
Base.Broadcast.broadcasted(::typeof(/), a::Tensor, b::Tensor) = div(a, b)
Base.Broadcast.broadcasted(::typeof(/), a::Tensor, s::Real) = div(a, _scalar_like(a, s))
Base.Broadcast.broadcasted(::typeof(/), s::Real, b::Tensor) = div(_scalar_like(b, s), b)
Base.Broadcast.broadcasted(::typeof(Base.max), a::Tensor, b::Tensor) = max(a, b)
Base.Broadcast.broadcasted(::typeof(Base.max), a::Tensor, s::Real) = max(a, _scalar_like(a, s))
Base.Broadcast.broadcasted(::typeof(Base.max), s::Real, b::Tensor) = max(_scalar_like(b, s), b)
Base.Broadcast.broadcasted(::typeof(Base.min), a::Tensor, b::Tensor) = min(a, b)
Base.Broadcast.broadcasted(::typeof(Base.min), a::Tensor, s::Real) = min(a, _scalar_like(a, s))
Base.Broadcast.broadcasted(::typeof(Base.min), s::Real, b::Tensor) = min(_scalar_like(b, s), b)
Base.Broadcast.broadcasted(::typeof(-), t::Tensor) = neg(t)
Base.Broadcast.broadcasted(::typeof(Base.exp), t::Tensor) = exp(t)
Base.Broadcast.broadcasted(::typeof(Base.log), t::Tensor) = log(t)
Base.Broadcast.broadcasted(::typeof(Base.sqrt), t::Tensor) = sqrt(t)
Base.Broadcast.broadcasted(::typeof(Base.abs), t::Tensor) = abs(t)
Base.Broadcast.broadcasted(::typeof(Base.tanh), t::Tensor) = tanh(t)
Base.Broadcast.broadcasted(::typeof(relu), t::Tensor) = relu(t)
Base.Broadcast.broadcasted(::typeof(sigmoid), t::Tensor) = sigmoid(t)
# The module's own binary functions dotted (`TorchleanRT.max.(a, b)` is `max.(a, b)`).
Base.Broadcast.broadcasted(::typeof(max), a::Tensor, b::Tensor) = max(a, b)
Base.Broadcast.broadcasted(::typeof(min), a::Tensor, b::Tensor) = min(a, b)

# Anything else dotted over a tensor would fall back to Base's element-by-element machinery,
# which a tensor (values on a device, not an AbstractArray) does not support: say so.
Base.Broadcast.broadcastable(t::Tensor) = throw(ArgumentError(
    "TorchleanRT.Tensor: this dotted operation is not supported (supported: .+ .- .* ./ with " *
    "tensors or real scalars, max. min. exp. log. sqrt. abs. tanh. - and TorchleanRT.relu. / " *
    "sigmoid.; convert with Array(t) for anything else)"))

# ---- products ---------------------------------------------------------------------------------

"""
    TorchleanRT.matmul(a::Tensor, b::Tensor)   # also a * b

The matrix product with NumPy's `matmul` rules, on the library's (row-major) shapes:
* `(m, n) * (n, p)` is `(m, p)` (`tlrt_matmul`);
* a 1-dimensional left operand is a row `(1, n)`, a 1-dimensional right operand a column
  `(n, 1)`, and the added axis is removed from the result (`(m, n) * (n,)` is `(m,)`, as for Julia
  arrays; `(n,) * (n,)` is the 0-dimensional dot product);
* batches `(b..., m, n) * (c..., n, p)` are `(d..., m, p)` with `d` the broadcast of the batch
  axes `b` and `c` (NumPy's rule; `tlrt_broadcast_to` materialises an operand whose batch differs,
  then `tlrt_bmm`); a batched left operand with a 1- or 2-dimensional right one folds the batch
  into the rows (one `tlrt_matmul`).

Throws `TorchleanRTError` (`TLRT_ERR_SHAPE`, naming both shapes) for a 0-dimensional operand,
inner dimensions that differ, or batch axes that do not broadcast.
"""
function matmul(a::Tensor, b::Tensor)
    sa, sb = a.dims, b.dims
    bad(why) = _tensor_error(:TLRT_ERR_SHAPE, "matmul", "shapes $sa and $sb: $why")
    (isempty(sa) || isempty(sb)) && throw(bad("a 0-dimensional operand has no matrix product"))
    a2 = length(sa) == 1 ? (1, sa[1]) : sa
    b2 = length(sb) == 1 ? (sb[1], 1) : sb
    abatch, bbatch = a2[1:end-2], b2[1:end-2]
    m, n = a2[end-1], a2[end]
    n2, p = b2[end-1], b2[end]
    n == n2 || throw(bad("the inner dimensions $n and $n2 differ"))
    if isempty(bbatch)
        # One product: every matrix of the left batch stacked as rows.
        out = matmul(a.buf, b.buf, prod(abatch) * m, n, p, false, false)
        batch = abatch
    else
        # The batch axes broadcast (NumPy); an operand whose batch differs is materialised.
        batch = try
            broadcast_shape(abatch, bbatch; func = "matmul")
        catch
            throw(bad("the batch axes $abatch and $bbatch do not broadcast"))
        end
        left = _expand(Tensor{eltype(a),length(a2)}(a.buf, a2), (batch..., m, n))
        right = _expand(Tensor{eltype(b),length(b2)}(b.buf, b2), (batch..., n, p))
        out = bmm(left, right, prod(batch), m, n, p, false, false)
    end
    dims = (batch..., (length(sa) > 1 ? (m,) : ())..., (length(sb) > 1 ? (p,) : ())...)
    return _float_tensor(out, dims)
end

# ---- layout -----------------------------------------------------------------------------------

"""
    reshape(t::Tensor, dims...)   # or a tuple; one entry may be `:`

The same values with the size `dims`, read in the library's **row-major** order (NumPy's
`reshape`, not Julia's column-major one). No copy: the result holds a second reference to the
same buffer (`tlrt_buffer_retain`). `TLRT_ERR_SHAPE` when the element counts differ.
"""
Base.reshape(t::Tensor, dims::Union{Integer,Colon}...) = reshape(t, dims)
function Base.reshape(t::Tensor{T}, dims::Tuple{Vararg{Union{Integer,Colon}}}) where {T}
    n = length(t)
    ncolon = count(d -> d isa Colon, dims)
    ncolon <= 1 || throw(_tensor_error(:TLRT_ERR_SHAPE, "reshape",
        "at most one dimension may be `:`, got $dims"))
    if ncolon == 1
        rest = _numel(Tuple(Int(d) for d in dims if d isa Integer))
        (rest !== nothing && rest > 0 && n % rest == 0) || throw(_tensor_error(:TLRT_ERR_SHAPE,
            "reshape", "cannot infer `:` of $dims for a tensor of size $(t.dims) ($n elements)"))
        dims = map(d -> d isa Colon ? Base.div(n, rest) : Int(d), dims)
    end
    d = _checked_dims("reshape", dims)
    _numel(d) == n || throw(_tensor_error(:TLRT_ERR_SHAPE, "reshape",
        "cannot reshape a tensor of size $(t.dims) ($n elements) to $d " *
        "($(_numel_string(d)) elements)"))
    return Tensor{T,length(d)}(buffer_retain(t.buf), d)
end

"""
    transpose(t::Tensor)   # also t' and permutedims(t)

The transpose of a matrix (`tlrt_transpose2d`, a copy). `TLRT_ERR_SHAPE` for other ranks
(`permutedims(t, perm)` reorders the axes of any tensor).
"""
function Base.transpose(t::Tensor{T,N}) where {T,N}
    N == 2 || throw(_tensor_error(:TLRT_ERR_SHAPE, "transpose",
        "transpose needs a matrix, got a tensor of size $(t.dims); use permutedims(t, perm)"))
    rows, cols = t.dims
    return Tensor{T,2}(transpose2d(t.buf, rows, cols), (cols, rows))
end
Base.adjoint(t::Tensor) = transpose(t)   # real values: the adjoint is the transpose
Base.permutedims(t::Tensor{T,2}) where {T} = transpose(t)

"""
    permutedims(t::Tensor, perm)

The axes reordered as Julia's `permutedims` does (axis `i` of the result is axis `perm[i]` of `t`;
`Array(permutedims(t, perm)) == permutedims(Array(t), perm)`), by `tlrt_permute` (a copy).
"""
function Base.permutedims(t::Tensor{T,N}, perm) where {T,N}
    p = collect(Int, perm)
    (length(p) == N && isperm(p)) || throw(_tensor_error(:TLRT_ERR_SHAPE, "permutedims",
        "$(Tuple(p)) is not a permutation of the $N axes of a tensor of size $(t.dims)"))
    out = permute(t.buf, collect(Int, t.dims), p .- 1)
    return Tensor{T,N}(out, ntuple(i -> t.dims[p[i]], N))
end

# ---- reductions -------------------------------------------------------------------------------

"""
    sum(t::Tensor; dims = :)

Without `dims`, the sum of all elements as a 0-dimensional tensor (`tlrt_reduce_sum`; `t[]` or
`Array(...)[]` reads it). With `dims` (an axis or several), the sums over those axes, **kept with
size 1** as Julia's `sum(A; dims)` keeps them (`tlrt_reduce_sum_axis`), so
`Array(sum(t; dims = 2)) ≈ sum(Array(t); dims = 2)`; `dropdims(sum(t; dims = k); dims = k)`
removes the axis, as the other bindings' sum over an axis does.
"""
function Base.sum(t::Tensor; dims = :)
    dims isa Colon && return _float_tensor(reduce_sum(t.buf), ())
    r = t
    for k in (dims isa Integer ? (dims,) : Tuple(dims))
        k >= 1 || throw(_tensor_error(:TLRT_ERR_INDEX, "sum", "dims = $k: dimensions start at 1"))
        k <= ndims(r) || continue   # a trailing axis of size 1 (Julia's convention)
        out = reduce_sum_axis(r.buf, collect(Int, r.dims), k - 1)
        r = _float_tensor(out, ntuple(i -> i == k ? 1 : r.dims[i], ndims(r)))
    end
    return r
end

"""
    TorchleanRT.mean(t::Tensor)

The mean of all elements as a 0-dimensional tensor (`tlrt_reduce_mean`; NaN for an empty tensor).
(`Statistics.mean` is not extended, to keep the module free of dependencies.)
"""
mean(t::Tensor) = _float_tensor(reduce_mean(t.buf), ())

"""
    dropdims(t::Tensor; dims)

`t` without the listed axes of size 1 (a reshape: no copy).
"""
function Base.dropdims(t::Tensor; dims)
    ks = dims isa Integer ? (Int(dims),) : Tuple(Int(k) for k in dims)
    for k in ks
        (1 <= k <= ndims(t) && t.dims[k] == 1) || throw(_tensor_error(:TLRT_ERR_SHAPE, "dropdims",
            "dims = $k is not an axis of size 1 of a tensor of size $(t.dims)"))
    end
    return reshape(t, Tuple(t.dims[i] for i in 1:ndims(t) if !(i in ks)))
end
