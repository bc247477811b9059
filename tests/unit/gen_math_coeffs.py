#!/usr/bin/env python3
"""Derive every numeric literal used by core/numerics/shared_math.hpp.

Polynomials: near-minimax fits by Lawson's algorithm (iteratively reweighted least squares on a
dense Chebyshev-distributed grid, float64 throughout), followed by rounding the coefficients
to binary32 one at a time, lowest degree first, re-fitting the remaining (higher degree, less
significant) coefficients after each rounding so they absorb the rounding error.

Split constants: a value v is stored as hi + lo with hi = v rounded to a given number of
significant bits (so that products of hi with small integers, or differences with nearby
floats, are exact) and lo = float32(v - hi).

Run:  python3 tests/unit/gen_math_coeffs.py
It prints every literal as a C++ hex-float together with the approximation error (in float64,
with the float32 coefficients) of each fit, in the order the header uses them (highest degree
first, as Horner's scheme consumes them). The float evaluation error on top of the fits is
measured by tests/unit/test_shared_math.cpp. Only numpy is needed.
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
    print(f"// {name}: max error {err:.3e} ({unit}); Horner order (highest degree first):")
    print("//   " + ", ".join(hexf(v) for v in reversed(coeffs)))
    print()


def split(v, bits):
    """v = hi + lo, hi = v rounded to `bits` significant bits, lo = float32(v - hi)."""
    m, e = np.frexp(v)
    hi = float(np.ldexp(np.round(np.ldexp(m, bits)), e - bits))
    return hi, f32(v - hi)


def main():
    ln2 = np.log(2.0)

    # exp: e^r = 1 + r * q(r), q(r) = 1 + r * P(r), i.e. e^r ~ 1 + r + c2 r^2 + ... + c6 r^6 on
    # |r| <= ln2/2 (with a margin for the rounded reduction). Relative to e^r.
    r = grid(-0.3466 * 1.002, 0.3466 * 1.002)
    basis = np.stack([r ** (2 + j) for j in range(5)], axis=1)
    c, err = fit_rounded(basis, np.expm1(r) - r, 1.0 / np.exp(r))
    report("exp: c2..c6 of e^r ~ 1 + r + c2 r^2 + ... + c6 r^6, |r| <= ln2/2", c, err,
           "relative to e^r")

    # log: log1p(f) ~ f + f^2 * Q(f), Q of degree 8, f in [-1/3, 1/3] (with a small margin).
    f = grid(-1.0002 / 3.0, 1.0002 / 3.0)
    f = f[np.abs(f) > 1e-12]
    basis = np.stack([f ** (2 + j) for j in range(9)], axis=1)
    c, err = fit_rounded(basis, np.log1p(f) - f, 1.0 / np.abs(np.log1p(f)))
    report("log: Q(f) coefficients of f^2..f^10, log1p(f) ~ f + f^2 Q(f), |f| <= 1/3", c, err,
           "relative to log1p(f)")

    # tanh: tanh(a) ~ a + a^3 * T(a^2), T of degree 2 in a^2, 0 < a <= 0.3.
    x = grid(1e-6, 0.3)
    basis = np.stack([x ** (3 + 2 * j) for j in range(3)], axis=1)
    c, err = fit_rounded(basis, np.tanh(x) - x, 1.0 / np.tanh(x))
    report("tanh: T coefficients of a^3, a^5, a^7, 0 < a <= 0.3", c, err, "relative")

    # Reciprocal seed: 1/d ~ s0 + s1 d + s2 d^2 + s3 d^3 on [1, 2] (then one Newton step).
    d = grid(1.0, 2.0)
    basis = np.stack([d ** j for j in range(4)], axis=1)
    c, err = fit_rounded(basis, 1.0 / d, d)
    report("1/d seed: coefficients of 1, d, d^2, d^3 on [1, 2]", c, err, "relative")

    # cos(2 pi u): sin(pi/2 r) ~ r * S(r^2) (degree 7), cos(pi/2 r) ~ 1 + r^2 * C(r^2) (degree
    # 6), |r| <= 1/2, absolute errors.
    r = grid(1e-6, 0.5)
    basis = np.stack([r ** (1 + 2 * j) for j in range(4)], axis=1)
    c, err = fit_rounded(basis, np.sin(0.5 * np.pi * r), np.ones_like(r))
    report("sin(pi/2 r): coefficients of r, r^3, r^5, r^7", c, err, "absolute")
    basis = np.stack([r ** (2 + 2 * j) for j in range(3)], axis=1)
    c, err = fit_rounded(basis, np.cos(0.5 * np.pi * r) - 1.0, np.ones_like(r))
    report("cos(pi/2 r) - 1: coefficients of r^2, r^4, r^6", c, err, "absolute")

    # Constants.
    print(f"// log2(e) = {hexf(1.0 / ln2)}")
    hi, lo = split(ln2, 16)
    print(f"// ln2 = {hexf(hi)} + {hexf(lo)}  (hi: 16 significant bits, so j * hi is exact for"
          f" |j| < 256; |hi + lo - ln2| = {abs(hi + lo - ln2):.2e})")
    k = 2.0 * np.sqrt(2.0 / np.pi)  # 2 * sqrt(2/pi): gelu's 2z = K (x + C x^3)
    hi, lo = split(k, 19)
    print(f"// K = 2 sqrt(2/pi) = {hexf(hi)} + {hexf(lo)}  (hi: 19 significant bits, a multiple"
          f" of 2^-18)")
    kc = k * 0.044715
    hi, lo = split(kc, 22)
    print(f"// K * 0.044715 = {hexf(hi)} + {hexf(lo)}  (hi: 22 significant bits);"
          f" 3 * hi = {hexf(3 * hi)} (exact: {f32(3 * hi) == 3 * hi})")
    print(f"// 2/3 (log reduction) = {hexf(2.0 / 3.0)} = 0x{np.float32(2.0 / 3.0).view(np.uint32):08x}")


if __name__ == "__main__":
    main()
