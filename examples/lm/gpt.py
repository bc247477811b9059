#!/usr/bin/env python3
"""examples/lm/gpt.py: a GPT-2-style language model trained through the tape on real English text.

The model: byte-level tokens (vocabulary 256), learned token and position embeddings, L
pre-LayerNorm blocks of causal multi-head attention and a tanh-GELU MLP (tlrt_tape_linear_gelu: bias
and GELU fused with the product) with residual connections and dropout (tlrt_tape_dropout), a final
LayerNorm and an LM head tied to the token embedding. Attention is one fused q / k / v projection
(the three weights and biases, kept as separate parameters, concatenated on the tape: one (3 d, d)
product) read in place by tlrt_tape_attention_qkv (no split or permute; its gradient is one buffer),
then the output projection. Trained with AdamW (the fused tlrt_adam_step_multi, weight decay on
matrices only), a cosine learning-rate schedule with linear warm-up and gradient clipping by
global norm.
Token and label batches are int32 index buffers on the device (tlrt_tape_gather_rows_ibuf,
tlrt_tape_cross_entropy_ibuf). The text and the training loop are examples/lm/lm.py's (the Python
3.11 documentation from Debian's python3.11-doc).

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

It prints a line every --log-every steps (loss, tokens/s, ms/step), then the validation loss and a
sample generated from a prompt with a KV cache (GPT.decoder: one token per step through the plain
ops, tlrt_attention_fwd with len_q = 1 over each layer's cached q / k / v rows; when the cache holds
ctx tokens it restarts from the last ctx / 2, since positions are absolute). --min-improvement X
exits 1 unless the validation loss fell by at least X nats below its value at initialisation (CI's
check that it learns; --test also skips, exit 77, without the text or under valgrind).
bench/models.py times the same model against PyTorch. Needs only the torchlean_rt package
(TORCHLEAN_RT_LIB for a build tree).
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

        # The position embedding's first n rows broadcast over the batch: its gradient is the sum
        # over the batch (a column reduction), not a scatter-add of batch * n rows.
        wpe = P["wpe"] if n == cfg["ctx"] else tape.slice_axis0(P["wpe"], 0, n)
        x = tape.add(tape.gather_rows(P["wte"], tokens),
                     tape.reshape(tape.broadcast_to(wpe, [batch, n, d], [0, 1, 2]),
                                  [batch * n, d]))
        x = tape.reshape(drop(x, batch * n), [batch, n, d])
        for i in range(cfg["layers"]):
            p = f"h{i}."
            h = tape.reshape(tape.layer_norm(x, P[p + "ln1.g"], P[p + "ln1.b"], 1e-5),
                             [batch * n, d])
            # One (3 d, d) projection, read in place by the attention node (heads_kv = heads).
            wqkv = tape.concat_axis0(tape.concat_axis0(P[p + "attn.wq"], P[p + "attn.wk"]),
                                     P[p + "attn.wv"])
            bqkv = tape.concat1d(tape.concat1d(P[p + "attn.bq"], P[p + "attn.bk"]),
                                 P[p + "attn.bv"])
            qkv = tape.reshape(tape.linear(h, wqkv, bqkv), [batch, n, 3 * d])
            a = tape.reshape(tape.attention_qkv(qkv, H, H, True, 1.0 / math.sqrt(d // H)),
                             [batch * n, d])
            a = tape.reshape(tape.linear(a, P[p + "attn.wo"], P[p + "attn.bo"]), [batch, n, d])
            x = tape.add(x, drop(a, batch * n))
            h = tape.reshape(tape.layer_norm(x, P[p + "ln2.g"], P[p + "ln2.b"], 1e-5),
                             [batch * n, d])
            m = tape.linear_gelu(h, P[p + "mlp.wfc"], P[p + "mlp.bfc"])
            m = tape.linear(m, P[p + "mlp.wproj"], P[p + "mlp.bproj"])
            x = tape.add(x, tape.reshape(drop(m, batch * n), [batch, n, d]))
        x = tape.reshape(tape.layer_norm(x, P["lnf.g"], P["lnf.b"], 1e-5), [batch * n, d])
        logits = tape.matmul(x, P["wte"], False, True)  # the tied LM head: x wte^T
        return P, logits

    def decoder(self):
        """The next byte's logits (a list) from the bytes so far, one token per step with a KV
        cache: each layer keeps the fused q / k / v rows of the tokens it has seen ((L, 3 d),
        grown by tlrt_concat_axis0) and attends from the new token's row (len_q = 1, causal
        aligned bottom-right: every cached key) through views of both buffers. The cache's
        position 0 is byte `start` of the text; when it holds ctx tokens, it is rebuilt from the
        last ctx / 2 (the positions are absolute). The same operations as gpt.c's decoder."""
        cfg, dev = self.cfg, self.device
        d, H, T, V, layers = cfg["d"], cfg["heads"], cfg["ctx"], self.vocab, cfg["layers"]
        W = {k: b for k, (b, _, _) in self.params.items()}
        fused = []
        for i in range(layers):
            p = f"h{i}."
            wqkv = rt.concat_axis0(rt.concat_axis0(W[p + "attn.wq"], W[p + "attn.wk"], d, d, d),
                                   W[p + "attn.wv"], 2 * d, d, d)
            bqkv = rt.concat1d(rt.concat1d(W[p + "attn.bq"], W[p + "attn.bk"], d, d),
                               W[p + "attn.bv"], 2 * d, d)
            fused.append((wqkv, bqkv))
        state = {"cache": [None] * layers, "len": 0, "start": 0, "fed": 0}
        scale = 1.0 / math.sqrt(d // H)

        def step(token, pos, head):
            tok = rt.Buffer.from_ints([token], "int32", dev)
            at = rt.Buffer.from_ints([pos], "int32", dev)
            x = rt.add(rt.gather_rows_ibuf(W["wte"], V, d, tok),
                       rt.gather_rows_ibuf(W["wpe"], T, d, at))
            n = state["len"] + 1
            for i in range(layers):
                p = f"h{i}."
                h = rt.layer_norm_fwd(x, W[p + "ln1.g"], W[p + "ln1.b"], 1, d, 1e-5)[0]
                qkv = rt.linear_fwd(h, fused[i][0], fused[i][1], 1, d, 3 * d, 0)[0]
                c = state["cache"][i]
                c = qkv if c is None else rt.concat_axis0(c, qkv, n - 1, 1, 3 * d)
                state["cache"][i] = c
                g = rt.attention_geometry(1, H, H, 1, n, d // H, q=(0, 3 * d, 3 * d, d // H),
                                          k=(d, n * 3 * d, 3 * d, d // H),
                                          v=(2 * d, n * 3 * d, 3 * d, d // H))
                o = rt.attention_fwd(qkv, c, c, None, g, scale, True, float("-inf"))[0]
                x = rt.add(x, rt.linear_fwd(o, W[p + "attn.wo"], W[p + "attn.bo"], 1, d, d, 0)[0])
                h = rt.layer_norm_fwd(x, W[p + "ln2.g"], W[p + "ln2.b"], 1, d, 1e-5)[0]
                m = rt.linear_fwd(h, W[p + "mlp.wfc"], W[p + "mlp.bfc"], 1, d, 4 * d,
                                  rt.TLRT_ACT_GELU)[0]
                x = rt.add(x, rt.linear_fwd(m, W[p + "mlp.wproj"], W[p + "mlp.bproj"], 1, 4 * d,
                                            d, 0)[0])
            state["len"] = n
            if not head:
                return None
            h = rt.layer_norm_fwd(x, W["lnf.g"], W["lnf.b"], 1, d, 1e-5)[0]
            return rt.matmul(h, W["wte"], 1, d, V, False, True).to_list()

        def next_logits(out):
            if state["fed"] == 0 and len(out) > T:  # a long prompt: its last ctx bytes
                state["start"] = state["fed"] = len(out) - T
            z = None
            while state["fed"] < len(out):
                i = state["fed"]
                if i - state["start"] == T:  # full: restart from the last ctx / 2 bytes
                    state.update(cache=[None] * layers, len=0, start=i - T // 2)
                    for j in range(i - T // 2, i):
                        step(out[j], j - state["start"], False)
                z = step(out[i], i - state["start"], i == len(out) - 1)
                state["fed"] = i + 1
            return z

        return next_logits


if __name__ == "__main__":
    sys.exit(lm.main(sys.argv[1:], "gpt", GPT, CONFIGS, __doc__.split("\n\n")[0]))
