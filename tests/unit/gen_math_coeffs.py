#!/usr/bin/env python3
"""Derive the polynomial coefficients used by core/numerics/shared_math.hpp.

Method: near-minimax fits by Lawson's algorithm (iteratively reweighted least squares on a
dense Chebyshev-distributed grid, float64 throughout), followed by rounding the coefficients
to binary32 one at a time, lowest degree first, re-fitting the remaining (higher degree, less
significant) coefficients after each rounding so they absorb the rounding error.

Run:  python3 tests/unit/gen_math_coeffs.py
It prints every coefficient as a C++ hex-float literal together with the approximation error
(in float64, with the float32 coefficients) of each fit. Those literals are what the header
uses; the float evaluation error on top of them is measured by tests/unit/test_shared_math.cpp.
Only numpy is needed.
"""
import numpy as np


def f32(v):
    return float(np.float32(v))


def hexf(v):
    """C++ hex-float literal of a binary32 value, e.g. 0x1.555556p-3f."""
    v = f32(v)
    if v == 0.0:
        return "0.0f"
    s = float(v).hex()  # like '0x1.5555560000000p-3'
    sign = "-" if s.startswith("-") else ""
    s = s.lstrip("-")
    mant, exp = s[2:].split("p")
    ip, fp = mant.split(".")
    fp = fp.rstrip("0")
    return f"{sign}0x{ip}{('.' + fp) if fp else ''}p{int(exp)}f"


def grid(a, b, n=6000):
    # Chebyshev-distributed points (dense near the ends, where minimax errors peak).
    k = np.arange(n)
    g = 0.5 * (a + b) + 0.5 * (b - a) * np.cos(np.pi * (k + 0.5) / n)
    return np.sort(g)


def lawson(basis, target, weight, iters=600):
    """Minimise max_i |weight_i * (basis_i . c - target_i)| (approximately)."""
    A = basis * weight[:, None]
    y = target * weight
    w = np.full(len(y), 1.0 / len(y))
    c = None
    for _ in range(iters):
        sw = np.sqrt(w)
        c, *_ = np.linalg.lstsq(A * sw[:, None], y * sw, rcond=None)
        e = np.abs(A @ c - y)
        w = w * e
        s = w.sum()
        if s == 0:
            break
        w /= s
    return c


def fit_rounded(basis, target, weight, iters=600):
    """Fit, then round coefficients to float32 one at a time (lowest first), re-fitting the rest."""
    n = basis.shape[1]
    fixed = []
    for j in range(n):
        resid = target - (basis[:, :j] @ np.array(fixed) if j else 0.0)
        c = lawson(basis[:, j:], resid, weight, iters)
        fixed.append(f32(c[0]))
    c = np.array(fixed)
    err = np.max(np.abs((basis @ c - target) * weight))
    return c, err


def report(name, coeffs, err, unit):
    print(f"// {name}: max weighted error {err:.3e} ({unit})")
    for i, v in enumerate(coeffs):
        print(f"//   c[{i}] = {hexf(v)}   ({v:.9g})")
    print()


def main():
    ln2 = np.log(2.0)

    # exp(r) ~= 1 + r + r^2 * P(r), P of degree 5, |r| <= ln2/2 (plus a margin for the reduction).
    r = grid(-0.3466 * 1.002, 0.3466 * 1.002)
    basis = np.stack([r ** (2 + j) for j in range(6)], axis=1)
    target = np.expm1(r) - r
    c, err = fit_rounded(basis, target, 1.0 / np.exp(r))
    report("exp: P(r) coefficients of r^2..r^7, relative to exp(r)", c, err, "relative")

    # log1p(f) ~= f + f^2 * Q(f), Q of degree 9, f in [sqrt(1/2)-1, sqrt(2)-1].
    f = grid(np.sqrt(0.5) - 1.0, np.sqrt(2.0) - 1.0)
    f = f[np.abs(f) > 1e-12]
    basis = np.stack([f ** (2 + j) for j in range(10)], axis=1)
    target = np.log1p(f) - f
    c, err = fit_rounded(basis, target, 1.0 / np.abs(np.log1p(f)))
    report("log1p: Q(f) coefficients of f^2..f^11, relative to log1p(f)", c, err, "relative")

    # tanh(x) ~= x + x^3 * T(x^2), T of degree 4 in x^2, 0 < x <= 0.625.
    x = grid(1e-6, 0.625)
    basis = np.stack([x ** (3 + 2 * j) for j in range(5)], axis=1)
    target = np.tanh(x) - x
    c, err = fit_rounded(basis, target, 1.0 / np.tanh(x))
    report("tanh: T coefficients of x^3..x^11, relative to tanh(x)", c, err, "relative")

    # sin(pi/2 r) ~= r * S(r^2) (degree 7), cos(pi/2 r) ~= 1 + r^2 * C(r^2) (degree 8), |r| <= 1/2.
    r = grid(1e-6, 0.5)
    basis = np.stack([r ** (1 + 2 * j) for j in range(4)], axis=1)
    target = np.sin(0.5 * np.pi * r)
    c, err = fit_rounded(basis, target, np.ones_like(r))
    report("sin(pi/2 r): coefficients of r, r^3, r^5, r^7 (absolute)", c, err, "absolute")

    basis = np.stack([r ** (2 + 2 * j) for j in range(4)], axis=1)
    target = np.cos(0.5 * np.pi * r) - 1.0
    c, err = fit_rounded(basis, target, np.ones_like(r))
    report("cos(pi/2 r) - 1: coefficients of r^2, r^4, r^6, r^8 (absolute)", c, err, "absolute")

    # Split constants (hi has trailing zero bits so that small integer multiples are exact).
    def split(v, bits):
        hi = f32(v)
        m, e = np.frexp(hi)
        hi = np.ldexp(np.round(np.ldexp(m, bits)), e - bits)
        lo = f32(v - hi)
        return hi, lo

    hi, lo = split(ln2, 16)
    print(f"// ln2 = {hexf(hi)} + {hexf(lo)}  (hi: 16 significant bits, error {abs(hi + lo - ln2):.3e})")
    print(f"// log2(e) = {hexf(1.0 / ln2)}")
    print(f"// ln2 (for exp reduction, full float + tail) = {hexf(ln2)} + {hexf(ln2 - f32(ln2))}")
    k = 2.0 * np.sqrt(2.0 / np.pi)
    print(f"// 2*sqrt(2/pi) = {hexf(k)} + {hexf(k - f32(k))}")
    print(f"// 0.044715 = {hexf(0.044715)} + {hexf(0.044715 - f32(0.044715))}")
    print(f"// 3*0.044715 = {hexf(3 * 0.044715)} + {hexf(3 * 0.044715 - f32(3 * 0.044715))}")


if __name__ == "__main__":
    main()
