# Tests of the Julia binding's Tensor layer (bindings/julia/Tensor.jl), for a machine with Julia:
#
#     TORCHLEAN_RT_LIB=/path/to/libtorchlean_rt.so julia bindings/julia/test/runtests.jl
#
# The broadcasting rule is pure Julia and always tested; the tests that call the library run
# when it loads (TORCHLEAN_RT_LIB, or libtorchlean_rt on the loader's path). Not run where the
# binding is maintained (no Julia there): tests/bindings/check_tensor_layers.py checks that
# BROADCAST_CASES below is the table of its Python reference (and of the Lean #guards).
using Test

include(joinpath(@__DIR__, "..", "TorchleanRT.jl"))
using .TorchleanRT
const RT = TorchleanRT

# (a, b, the broadcast shape or nothing when they do not broadcast)
const BROADCAST_CASES = [
    ((), (), ()),
    ((), (3,), (3,)),
    ((2, 3), (), (2, 3)),
    ((2, 3), (2, 3), (2, 3)),
    ((2, 3), (3,), (2, 3)),
    ((2, 3), (1, 3), (2, 3)),
    ((2, 1), (1, 3), (2, 3)),
    ((4, 1, 3), (5, 1), (4, 5, 3)),
    ((1,), (7,), (7,)),
    ((0,), (1,), (0,)),
    ((2, 0), (2, 1), (2, 0)),
    ((8, 1, 6, 1), (7, 1, 5), (8, 7, 6, 5)),
    ((2, 3), (4,), nothing),
    ((2, 3), (3, 2), nothing),
    ((0,), (3,), nothing),
    ((2, 1), (8, 4, 3), nothing),
]

shape_status(f) = try
    f()
    nothing
catch e
    e isa RT.TorchleanRTError ? e.status : rethrow()
end

@testset "broadcast_shape" begin
    for (a, b, want) in BROADCAST_CASES
        if want === nothing
            @test shape_status(() -> RT.broadcast_shape(a, b)) == RT.C.TLRT_ERR_SHAPE
            @test shape_status(() -> RT.broadcast_shape(b, a)) == RT.C.TLRT_ERR_SHAPE
        else
            @test RT.broadcast_shape(a, b) == want
            @test RT.broadcast_shape(b, a) == want
        end
    end
end

library_loads = try
    RT.abi_version()
    true
catch
    false
end

if !library_loads
    @info "libtorchlean_rt does not load: only the broadcasting rule was tested"
else
    @testset "Tensor with the library" begin
        A = Float32[1 2 3; 4 5 6]
        t = Tensor(A)

        @testset "conversion and what a tensor is" begin
            @test size(t) == (2, 3) && ndims(t) == 2 && length(t) == 6 && eltype(t) == Float32
            @test Array(t) == A && collect(t) == A
            A3 = reshape(Float32.(1:24), 2, 3, 4)
            @test Array(Tensor(A3)) == A3
            @test Array(Tensor(Float32[1, 2, 3])) == Float32[1, 2, 3]
            @test Array(Tensor(fill(2.5f0)))[] == 2.5f0
            @test Array(Tensor(Float64[1.5 2.5])) == Float32[1.5 2.5]
            ti = Tensor(Int32[1 2; 3 4])
            @test eltype(ti) == Int32 && Array(ti) == Int32[1 2; 3 4]
            @test eltype(Tensor(Int64[7])) == Int64
            @test_throws ArgumentError Tensor(UInt8[1, 2])
            @test size(Tensor(RT.buffer_zeros(RT.CPU, 6), 3, 2)) == (3, 2)
            @test size(Tensor(RT.buffer_zeros(RT.CPU, 6))) == (6,)
            @test shape_status(() -> Tensor(RT.buffer_zeros(RT.CPU, 5), 2, 3)) ==
                  RT.C.TLRT_ERR_SHAPE
            @test shape_status(() -> Tensor(RT.buffer_zeros(RT.CPU, 1), ntuple(_ -> 1, 9))) ==
                  RT.C.TLRT_ERR_SHAPE
            @test Array(zeros(Tensor, 2, 3)) == zeros(Float32, 2, 3)
            @test Array(ones(Tensor, (2,))) == ones(Float32, 2)
            @test Array(RT.full(1.5, 2, 2)) == fill(1.5f0, 2, 2)
            @test size(zeros(Tensor)) == ()
            @test sprint(show, t) == "Tensor{Float32, 2}(size (2, 3))"
            @test occursin("2×3 Tensor{Float32, 2} on cpu:", sprint(show, MIME("text/plain"), t))
        end

        @testset "elementwise, broadcasting" begin
            @test Array(t .+ t) == A .+ A
            @test Array(t + t) == A + A
            @test Array(t .- Tensor(Float32[10 20 30])) == A .- Float32[10 20 30]
            # NumPy's rule: a (3,) tensor is a row (Julia arrays would align it with the columns)
            @test Array(t .+ Tensor(Float32[10, 20, 30])) == A .+ Float32[10 20 30]
            col = reshape(Float32[1, 2], 2, 1)
            @test Array(t .* Tensor(col)) == A .* col
            @test Array(t ./ 2) == A ./ 2 && Array(t / 2) == A / 2
            @test Array(2 .* t .+ 1) == 2 .* A .+ 1 && Array(2 * t) == 2 * A
            @test Array(1 .- t) == 1 .- A
            @test Array(max.(t, 3)) == max.(A, 3) && Array(min.(t, Tensor(A .+ 1))) == A
            @test Array(-t) == -A && Array(abs.(-t)) == A
            @test Array(exp.(t)) ≈ exp.(A) && Array(log.(t)) ≈ log.(A)
            @test Array(sqrt.(t)) ≈ sqrt.(A) && Array(tanh.(t)) ≈ tanh.(A)
            @test Array(RT.relu.(t .- 3)) == max.(A .- 3, 0)
            @test Array(RT.sigmoid.(t)) ≈ 1 ./ (1 .+ exp.(-A))
            @test shape_status(() -> t .+ Tensor(Float32[1, 2])) == RT.C.TLRT_ERR_SHAPE
            @test shape_status(() -> t + Tensor(Float32[1 2; 3 4])) == RT.C.TLRT_ERR_SHAPE
            @test shape_status(() -> Tensor(Int32[1, 2]) .+ Tensor(Int32[1, 2])) ==
                  RT.C.TLRT_ERR_DTYPE
        end

        @testset "products" begin
            B = Float32[1 0; 0 1; 1 1]
            @test Array(t * Tensor(B)) ≈ A * B
            @test Array(t * Tensor(Float32[1, 1, 1])) ≈ A * Float32[1, 1, 1]
            @test Array(Tensor(Float32[1, 1]) * t) ≈ vec(Float32[1 1] * A)
            @test Array(Tensor(Float32[1, 2]) * Tensor(Float32[3, 4]))[] == 11
            X, Y = rand(Float32, 2, 3, 4), rand(Float32, 2, 4, 5)
            Z = Array(Tensor(X) * Tensor(Y))
            @test size(Z) == (2, 3, 5)
            @test all(Z[i, :, :] ≈ X[i, :, :] * Y[i, :, :] for i in 1:2)
            M = rand(Float32, 4, 5)
            Zm = Array(Tensor(X) * Tensor(M))   # the batch folded into the rows
            @test all(Zm[i, :, :] ≈ X[i, :, :] * M for i in 1:2)
            Zb = Array(Tensor(B') * Tensor(X))  # a matrix broadcast over the batch
            @test all(Zb[i, :, :] ≈ B' * X[i, :, :] for i in 1:2)
            @test shape_status(() -> t * t) == RT.C.TLRT_ERR_SHAPE
            @test shape_status(() -> Tensor(fill(1f0)) * t) == RT.C.TLRT_ERR_SHAPE
        end

        @testset "layout and reductions" begin
            @test Array(transpose(t)) == permutedims(A) && Array(t') == A'
            P = rand(Float32, 2, 3, 4)
            @test Array(permutedims(Tensor(P), (3, 1, 2))) == permutedims(P, (3, 1, 2))
            @test Array(reshape(t, 3, 2)) == Float32[1 2; 3 4; 5 6]   # row-major order
            @test size(reshape(t, :, 2)) == (3, 2) && size(reshape(t, (6,))) == (6,)
            @test shape_status(() -> reshape(t, 4, 2)) == RT.C.TLRT_ERR_SHAPE
            @test shape_status(() -> transpose(Tensor(Float32[1, 2]))) == RT.C.TLRT_ERR_SHAPE
            @test sum(t)[] ≈ sum(A) && RT.mean(t)[] ≈ sum(A) / 6
            @test Array(sum(t; dims = 2)) ≈ sum(A; dims = 2)
            @test Array(sum(t; dims = 1)) ≈ sum(A; dims = 1)
            @test Array(sum(t; dims = (1, 2))) ≈ sum(A; dims = (1, 2))
            @test size(dropdims(sum(t; dims = 2); dims = 2)) == (2,)
            @test Array(copy(t)) == A && Array(to_device(t, RT.CPU)) == A
        end
    end
end
