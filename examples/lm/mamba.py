#!/usr/bin/env python3
"""examples/lm/mamba.py: a small Mamba-style language model trained through the tape on real text.

Each of the L residual blocks (pre-RMSNorm, tlrt_tape_rms_norm):
  xz = in_proj(h)                      (d -> 2 di: the branch x and the gate z)
  u  = silu(x)                         (tlrt_tape_silu; no causal convolution in this version)
  delta = softplus(dt_proj(u))         (di -> di), B_t = b_proj(u), C_t = c_proj(u)   (di -> N)
  the selective scan, per batch row, channel c and state n, over time t:
      h_t = exp(delta_t[c] A[c, n]) h_{t-1} + (delta_t[c] B_t[n]) u_t[c],   A = -exp(A_log)
      (tlrt_tape_selective_scan_diag_var: token-dependent A and B, time-major (T, batch di N))
  y  = sum_n C_t[n] h_t[c, n] + D[c] u_t[c]
  out = out_proj(y * silu(z))          (di -> d), added to the residual stream.
Byte-level tokens, a learned token embedding, a final RMSNorm and an LM head tied to the
embedding; AdamW, cosine schedule with warm-up, clipping: examples/lm/lm.py, as for gpt.py.

    python3 examples/lm/mamba.py --quick         # CPU, what CI runs
    python3 examples/lm/mamba.py --cuda          # the small configuration on the first GPU
    python3 examples/lm/mamba.py --quick --save mamba.safetensors      # checkpoints: lm.py
    python3 examples/lm/mamba.py --resume mamba.safetensors --save mamba.safetensors

The scan's state is materialised as (T, batch * di * N) floats per block (this small model keeps
it in memory for the backward); the broadcasts that build its inputs are tape nodes.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm  # noqa: E402
from lm import rt  # noqa: E402

CONFIGS = {
    # d_model, layers, inner width di, state N, context, batch, steps, lr, warmup
    "quick": dict(d=64, layers=2, di=128, state=8, ctx=64, batch=8, steps=150, lr=3e-3,
                  warmup=15),
    "small": dict(d=256, layers=4, di=512, state=16, ctx=256, batch=16, steps=3000, lr=1e-3,
                  warmup=200),
}


class Mamba(lm.LanguageModel):
    """The parameters (names as below) and the forward recorded on a tape."""

    def init_params(self):
        cfg = self.cfg
        d, L, di, N, V = cfg["d"], cfg["layers"], cfg["di"], cfg["state"], self.vocab
        self.normal("wte", [V, d], 0.02)
        for i in range(L):
            p = f"b{i}."
            self.const(p + "norm.g", [d], 1.0)
            self.normal(p + "in_proj.w", [2 * di, d], 0.02)
            self.normal(p + "dt_proj.w", [di, di], 0.02)
            self.const(p + "dt_proj.b", [di], math.log(math.expm1(0.01)))  # delta ~ 0.01 at start
            self.normal(p + "b_proj.w", [N, di], 0.02)
            self.normal(p + "c_proj.w", [N, di], 0.02)
            # A = -exp(A_log) = -(1 .. N) per channel (S4D-real), not decayed.
            a_log = [math.log(n + 1) for _ in range(di) for n in range(N)]
            self.params[p + "A_log"] = (rt.Buffer.from_list(a_log, self.device), [di, N], False)
            self.const(p + "D", [di], 1.0)
            self.normal(p + "out_proj.w", [d, di], 0.02 / math.sqrt(2 * L))
        self.const("normf.g", [d], 1.0)

    def forward(self, tape, tokens, batch, n, train, dropout, key):
        cfg = self.cfg
        d, di, N = cfg["d"], cfg["di"], cfg["state"]
        rows = batch * n
        P = {k: tape.leaf(b, dims, train) for k, (b, dims, _) in self.params.items()}
        h0 = tape.leaf(rt.Buffer.zeros(batch * di * N, self.device), [batch * di * N], False)

        def expand(x, out_dims, axis_map):
            """x broadcast to out_dims (tlrt_tape_broadcast_to; axis_map as tlrt_broadcast_to)."""
            return tape.broadcast_to(x, out_dims, axis_map)

        def time_major(x, width):
            """(batch * n, width) rows batch-major <-> (n * batch, width) rows time-major."""
            return tape.reshape(tape.permute(tape.reshape(x, [batch, n, width]), [1, 0, 2]),
                                [rows, width])

        def batch_major(x, width):
            return tape.reshape(tape.permute(tape.reshape(x, [n, batch, width]), [1, 0, 2]),
                                [rows, width])

        x = tape.gather_rows(P["wte"], tokens)  # (rows, d)
        for i in range(cfg["layers"]):
            p = f"b{i}."
            h = tape.rms_norm(x, P[p + "norm.g"], 1e-5)
            xz = tape.linear(h, P[p + "in_proj.w"], rt.TLRT_TAPE_NONE)  # (rows, 2 di)
            xz3 = tape.reshape(xz, [rows, 2, di])
            xb = tape.reshape(tape.slice_axis0(tape.permute(xz3, [1, 0, 2]), 0, 1), [rows, di])
            z = tape.reshape(tape.slice_axis0(tape.permute(xz3, [1, 0, 2]), 1, 1), [rows, di])
            u = tape.silu(xb)
            delta = tape.softplus(tape.linear(u, P[p + "dt_proj.w"], P[p + "dt_proj.b"]))
            Bt = tape.linear(u, P[p + "b_proj.w"], rt.TLRT_TAPE_NONE)  # (rows, N)
            Ct = tape.linear(u, P[p + "c_proj.w"], rt.TLRT_TAPE_NONE)  # (rows, N)
            # The scan's operands built time-major from the (rows, di) and (rows, N) projections
            # (rows t batch + b): the (rows, di, N) tensors need no permute copies.
            full = [rows, di, N]
            u_t, delta_t = time_major(u, di), time_major(delta, di)
            delta3 = expand(delta_t, full, [1, 2, 0])             # delta[r, c] over n
            A = tape.neg(tape.exp(P[p + "A_log"]))                   # (di, N)
            dA = tape.exp(tape.mul(delta3, expand(A, full, [0, 1, 2])))
            dB = tape.mul(delta3, expand(time_major(Bt, N), full, [1, 0, 2]))  # delta B[r, n]
            u3 = expand(u_t, full, [1, 2, 0])
            seq = [n, batch * di * N]
            hs = tape.selective_scan_diag_var(tape.reshape(dA, seq), tape.reshape(dB, seq),
                                              tape.reshape(u3, seq), h0)  # (n, batch di N)
            y = tape.reduce_sum_axis(
                tape.mul(tape.reshape(hs, full), expand(time_major(Ct, N), full, [1, 0, 2])), 2)
            y = batch_major(y, di)                                     # (rows, di)
            y = tape.add(y, tape.mul(u, expand(P[p + "D"], [rows, di], [0, 1])))
            y = tape.mul(y, tape.silu(z))
            x = tape.add(x, tape.linear(y, P[p + "out_proj.w"], rt.TLRT_TAPE_NONE))
        x = tape.rms_norm(x, P["normf.g"], 1e-5)
        return P, tape.matmul(x, P["wte"], False, True)


if __name__ == "__main__":
    sys.exit(lm.main(sys.argv[1:], "mamba", Mamba, CONFIGS, __doc__.split("\n\n")[0]))
