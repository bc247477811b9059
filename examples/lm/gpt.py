#!/usr/bin/env python3
"""examples/lm/gpt.py: a GPT-2-style language model trained through the tape on real English text.

The model: byte-level tokens (vocabulary 256), learned token and position embeddings, L
pre-LayerNorm blocks of causal multi-head attention (tlrt_tape_multi_head_attention: fused
flash attention) and a tanh-GELU MLP (tlrt_tape_linear_gelu: bias and GELU fused with the
product) with residual connections and dropout (tlrt_tape_dropout), a final LayerNorm and an LM
head tied to the token embedding. Trained with AdamW (the fused tlrt_adam_step_multi, weight decay
on matrices only), a cosine learning-rate schedule with linear warm-up and gradient clipping by
global norm. Token and label batches are int32 index buffers on the device
(tlrt_tape_gather_rows_ibuf, tlrt_tape_cross_entropy_ibuf). The text and the training loop are
examples/lm/lm.py's (the Python 3.11 documentation from Debian's python3.11-doc).

    python3 examples/lm/gpt.py --quick           # CPU, about 20 s: what CI runs
    python3 examples/lm/gpt.py --cuda            # the small configuration on the first GPU
    python3 examples/lm/gpt.py --quick --save gpt.safetensors --save-every 50
    python3 examples/lm/gpt.py --resume gpt.safetensors --save gpt.safetensors

--save PATH writes a safetensors checkpoint every --save-every steps and after the last one
(parameters, Adam moments "opt.m.NAME" / "opt.v.NAME", the step "opt.step", the configuration as
metadata); --resume PATH continues from one (its configuration; --steps may lengthen the
schedule), --stop-after K ends a run after step K as if interrupted. N steps + resume + N steps
give the same losses as 2N steps (the meson test gpt_py_resume). examples/lm/gpt.c is this
program in C over the ABI: the same losses, the same checkpoint bytes.

It prints a line every --log-every steps (loss, tokens/s, ms/step), then the validation loss and
a sample generated from a prompt. --min-improvement X exits 1 unless the validation loss fell by
at least X nats below its value at initialisation (CI's check that it learns; --test also skips,
exit 77, without the text or under valgrind). bench/models.py times the same model against
PyTorch. Needs only the torchlean_rt package (TORCHLEAN_RT_LIB for a build tree).
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm  # noqa: E402
from lm import rt  # noqa: E402

CONFIGS = {
    # d_model, layers, heads, context, batch, steps, lr, warmup (vocab: 256 bytes)
    "quick": dict(d=64, layers=2, heads=4, ctx=64, batch=8, steps=150, lr=3e-3, warmup=15),
    "small": dict(d=384, layers=6, heads=6, ctx=256, batch=16, steps=3000, lr=6e-4, warmup=200),
}


class GPT(lm.LanguageModel):
    """GPT-2's structure: the parameters (names as below) and the forward recorded on a tape."""

    def init_params(self):
        cfg = self.cfg
        d, L, V, T = cfg["d"], cfg["layers"], self.vocab, cfg["ctx"]
        normal, const = self.normal, self.const
        normal("wte", [V, d], 0.02)
        normal("wpe", [T, d], 0.01)
        proj_std = 0.02 / math.sqrt(2 * L)  # GPT-2: residual projections scaled by 1/sqrt(2L)
        for i in range(L):
            p = f"h{i}."
            const(p + "ln1.g", [d], 1.0)
            const(p + "ln1.b", [d], 0.0)
            for w in ("q", "k", "v"):
                normal(p + "attn.w" + w, [d, d], 0.02)
                const(p + "attn.b" + w, [d], 0.0)
            normal(p + "attn.wo", [d, d], proj_std)
            const(p + "attn.bo", [d], 0.0)
            const(p + "ln2.g", [d], 1.0)
            const(p + "ln2.b", [d], 0.0)
            normal(p + "mlp.wfc", [4 * d, d], 0.02)
            const(p + "mlp.bfc", [4 * d], 0.0)
            normal(p + "mlp.wproj", [d, 4 * d], proj_std)
            const(p + "mlp.bproj", [d], 0.0)
        const("lnf.g", [d], 1.0)
        const("lnf.b", [d], 0.0)

    def forward(self, tape, tokens, batch, n, train, dropout, key):
        """Records the forward on `tape`: returns (leaf ids by name, logits node of shape
        (batch * n, vocab))."""
        cfg = self.cfg
        d, H = cfg["d"], cfg["heads"]
        P = {k: tape.leaf(b, dims, train) for k, (b, dims, _) in self.params.items()}
        drop_key = [key]

        def drop(x, rows):
            if not train or dropout == 0.0:
                return x
            drop_key[0] += rows * d * 8  # masks of different nodes from disjoint key ranges
            return tape.dropout(x, dropout, drop_key[0])

        x = tape.add(tape.gather_rows(P["wte"], tokens),
                     tape.gather_rows(P["wpe"], self.positions(batch, n)))
        x = tape.reshape(drop(x, batch * n), [batch, n, d])
        for i in range(cfg["layers"]):
            p = f"h{i}."
            h = tape.layer_norm(x, P[p + "ln1.g"], P[p + "ln1.b"], 1e-5)
            a = tape.multi_head_attention(h, P[p + "attn.wq"], P[p + "attn.wk"], P[p + "attn.wv"],
                                          P[p + "attn.wo"], P[p + "attn.bq"], P[p + "attn.bk"],
                                          P[p + "attn.bv"], P[p + "attn.bo"], H, True)
            x = tape.add(x, drop(a, batch * n))
            h = tape.reshape(tape.layer_norm(x, P[p + "ln2.g"], P[p + "ln2.b"], 1e-5),
                             [batch * n, d])
            m = tape.linear_gelu(h, P[p + "mlp.wfc"], P[p + "mlp.bfc"])
            m = tape.linear(m, P[p + "mlp.wproj"], P[p + "mlp.bproj"])
            x = tape.add(x, tape.reshape(drop(m, batch * n), [batch, n, d]))
        x = tape.reshape(tape.layer_norm(x, P["lnf.g"], P["lnf.b"], 1e-5), [batch * n, d])
        logits = tape.matmul(x, P["wte"], False, True)  # the tied LM head: x wte^T
        return P, logits


if __name__ == "__main__":
    sys.exit(lm.main(sys.argv[1:], "gpt", GPT, CONFIGS, __doc__.split("\n\n")[0]))
