#!/usr/bin/env python3
"""bench/models.py: one training step of a whole model, ours against PyTorch's, on the GPU.

The GPT of examples/lm/gpt.py (pre-LayerNorm blocks, one fused q / k / v projection read in place by
tlrt_tape_attention_qkv (PyTorch: one linear of the concatenated weights, its output viewed as heads
for scaled_dot_product_attention), tanh-GELU MLP, tied LM head, AdamW with weight decay on matrices,
betas (0.9, 0.95)), or with --configs mamba the Mamba of examples/lm/mamba.py (PyTorch's side:
torch_mamba_forward, its selective scan the reference loop over time), is built once with our
parameters; PyTorch's copy starts from the same values (DLPack, then a copy). Each step on both
sides: forward, cross-entropy, backward, AdamW (torch.optim.AdamW, fused); no dropout and no
clipping, so both sides compute the same function and the first losses agree to float32
rounding. Tokens are uniform random over the vocabulary (a torch.Generator on the device), the
labels the next tokens; TF32 off on both sides. Reported per configuration: ms/step (wall clock
over `--steps` steps after `--warmup`, the device synchronised at both ends), tokens/s, the peak
of device memory (ours: tlrt_allocator_stats' peak_bytes, with the tape's nodes released as Python
drops them and the backward freeing the graph, as in examples/lm/lm.py; PyTorch:
max_memory_allocated less what was allocated before its parameters: the batches, shared by both
sides, count on neither), the first losses of both, and torch.compile's step (mode default) with
--compile; --profile FILE writes the kernel tables (torch.profiler, top 30 by device time) of 5
steps of each side.

    python3 bench/models.py --configs launch,small --out bench/results/<date>-h200-models.md

Needs torch with CUDA and the torchlean_rt package (TORCHLEAN_RT_LIB for a build tree).
"""
import argparse
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
import torchlean_rt as rt  # noqa: E402



def load_example(name):
    spec = importlib.util.spec_from_file_location(
        name + "_example", os.path.join(HERE, "..", "examples", "lm", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpt = load_example("gpt")
mamba = load_example("mamba")

CONFIGS = {
    # The launch-bound configuration of the language-model issue and the example's GPU one.
    "launch": dict(d=128, layers=4, heads=4, ctx=64, batch=64, vocab=8192),
    "small": dict(d=384, layers=6, heads=6, ctx=256, batch=16, vocab=8192),
    # GPT-2 small's shape (124M parameters with its vocabulary).
    "gpt2": dict(d=768, layers=12, heads=12, ctx=1024, batch=8, vocab=50257),
    # examples/lm/mamba.py's GPU configuration (byte vocabulary).
    "mamba": dict(model="mamba", d=256, layers=4, di=512, state=16, ctx=256, batch=16,
                  vocab=256),
}
LR = 3e-4


def torch_gpt(torch, model):
    """PyTorch parameters (leaf tensors) holding copies of ours, by name, in our shapes."""
    params = {}
    for name, (buf, dims, _) in model.params.items():
        t = torch.from_dlpack(buf).reshape(dims).clone()
        params[name] = t.requires_grad_(True)
    return params


def causal_attention(torch, F, q, k, v):
    """F.scaled_dot_product_attention(q, k, v, is_causal=True), spelled out where the installed
    torch predates it (Debian's 1.13, used for the CPU comparisons of bench/lm_curve.py)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    n = q.shape[-2]
    s = (q @ k.transpose(-2, -1)) / (q.shape[-1] ** 0.5)
    mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v


def torch_forward(torch, F, P, cfg, tokens):
    B, T, d, H = cfg["batch"], cfg["ctx"], cfg["d"], cfg["heads"]
    dh = d // H
    x = P["wte"][tokens] + P["wpe"][:T].unsqueeze(0)
    for i in range(cfg["layers"]):
        p = f"h{i}."
        h = F.layer_norm(x, (d,), P[p + "ln1.g"], P[p + "ln1.b"], 1e-5)

        w = torch.cat([P[p + "attn.wq"], P[p + "attn.wk"], P[p + "attn.wv"]])
        b = torch.cat([P[p + "attn.bq"], P[p + "attn.bk"], P[p + "attn.bv"]])
        q, k, v = F.linear(h, w, b).view(B, T, 3, H, dh).permute(2, 0, 3, 1, 4)
        a = causal_attention(torch, F, q, k, v)
        a = a.transpose(1, 2).reshape(B, T, d)
        x = x + F.linear(a, P[p + "attn.wo"], P[p + "attn.bo"])
        h = F.layer_norm(x, (d,), P[p + "ln2.g"], P[p + "ln2.b"], 1e-5)
        m = F.gelu(F.linear(h, P[p + "mlp.wfc"], P[p + "mlp.bfc"]), approximate="tanh")
        x = x + F.linear(m, P[p + "mlp.wproj"], P[p + "mlp.bproj"])
    x = F.layer_norm(x, (d,), P["lnf.g"], P["lnf.b"], 1e-5)
    return x.reshape(B * T, d) @ P["wte"].t()


def kernel_table(torch, run, steps):
    """The CUDA kernels of `steps` calls of run() (torch.profiler, which sees every kernel of the
    process, ours included): the top 30 by total device time, as text."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            run()
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="cuda_time_total", row_limit=30,
                                     max_name_column_width=70)


def torch_mamba_forward(torch, F, P, cfg, tokens):
    """examples/lm/mamba.py's forward in PyTorch eager, its selective scan the reference loop over
    time (the form of the Mamba authors' selective_scan_ref): h_t = exp(delta_t A) h_{t-1} +
    (delta_t B_t) u_t, y_t = C_t h_t + D u_t."""
    B, T = tokens.shape
    d, di, N = cfg["d"], cfg["di"], cfg["state"]

    def rms_norm(x, g):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * g
    x = P["wte"][tokens]  # (B, T, d)
    for i in range(cfg["layers"]):
        p = f"b{i}."
        h = rms_norm(x, P[p + "norm.g"])
        xz = h @ P[p + "in_proj.w"].t()
        u, z = F.silu(xz[..., :di]), xz[..., di:]
        delta = F.softplus(F.linear(u, P[p + "dt_proj.w"], P[p + "dt_proj.b"]))
        Bt, Ct = u @ P[p + "b_proj.w"].t(), u @ P[p + "c_proj.w"].t()  # (B, T, N)
        A = -torch.exp(P[p + "A_log"])  # (di, N)
        dA = torch.exp(delta.unsqueeze(-1) * A)  # (B, T, di, N)
        dB = delta.unsqueeze(-1) * Bt.unsqueeze(2)
        hs, st = [], torch.zeros(B, di, N, device=x.device)
        for t in range(T):
            st = dA[:, t] * st + dB[:, t] * u[:, t].unsqueeze(-1)
            hs.append(st)
        y = (torch.stack(hs, 1) * Ct.unsqueeze(2)).sum(-1) + u * P[p + "D"]
        x = x + (y * F.silu(z)) @ P[p + "out_proj.w"].t()
    x = rms_norm(x, P["normf.g"])
    return x.reshape(B * T, d) @ P["wte"].t()


def bench_config(torch, name, cfg, steps, warmup, compile_too, profile_out=None):
    F = torch.nn.functional
    dev = rt.cuda(0)
    B, T, V = cfg["batch"], cfg["ctx"], cfg["vocab"]
    gen = torch.Generator(device="cuda").manual_seed(1)
    batches = []
    for _ in range(warmup + steps):
        seq = torch.randint(0, V, (B, T + 1), device="cuda", generator=gen, dtype=torch.int32)
        batches.append((seq[:, :-1].contiguous(), seq[:, 1:].contiguous()))
    is_mamba = cfg.get("model") == "mamba"
    forward = torch_mamba_forward if is_mamba else torch_forward
    model_class = mamba.Mamba if is_mamba else gpt.GPT
    model = model_class(dict(cfg, lr=LR, warmup=0, steps=steps), dev, seed=7)
    rows = {"config": name, "params": model.count()}

    # PyTorch eager (and compiled) from the same initial values.
    P = torch_gpt(torch, model)

    def torch_run(step_fn, label):
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()  # the batches and the reference copy P
        params = {k: v.detach().clone().requires_grad_(True) for k, v in P.items()}
        decay = [params[k] for k, (_, _, dec) in model.params.items() if dec]
        nodecay = [params[k] for k, (_, _, dec) in model.params.items() if not dec]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": nodecay, "weight_decay": 0.0}],
                                lr=LR, betas=(0.9, 0.95), eps=1e-8, fused=True)
        fwd = step_fn(params)
        losses = []
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        t0 = None
        for i, (tok, lab) in enumerate(batches):
            if i == warmup:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
            logits = fwd(tok.long())
            loss = F.cross_entropy(logits, lab.reshape(-1).long())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.detach())
        torch.cuda.synchronize()
        ms = 1000 * (time.perf_counter() - t0) / steps
        if profile_out is not None and label == "torch":
            tok, lab = batches[0]

            def one():
                loss = F.cross_entropy(fwd(tok.long()), lab.reshape(-1).long())
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            profile_out.append(f"## {name}: PyTorch eager, 5 steps\n\n```\n"
                               f"{kernel_table(torch, one, 5)}\n```\n")
        rows[label + " ms"] = ms
        rows[label + " peak MiB"] = (torch.cuda.max_memory_allocated() - before) / 2**20
        rows[label + " losses"] = [float(v) for v in losses[:3]]
        del params, opt

    torch_run(lambda params: (lambda tok: forward(torch, F, params, cfg, tok)), "torch")
    if compile_too:
        torch_run(lambda params: torch.compile(
            lambda tok: forward(torch, F, params, cfg, tok)), "compile")

    # Ours.
    tape = rt.Tape(dev)
    toks = [(rt.from_dlpack(tok.reshape(-1)), rt.from_dlpack(lab.reshape(-1)))
            for tok, lab in batches]
    rt.synchronize(dev)
    losses = []
    t0 = None
    for i, (tok, lab) in enumerate(toks):
        if i == warmup:
            rt.synchronize(dev)
            t0 = time.perf_counter()
        losses.append(model.train_step(tape, tok, lab, i, LR))
    rt.synchronize(dev)
    ms = 1000 * (time.perf_counter() - t0) / steps
    if profile_out is not None:
        tok, lab = toks[0]
        table = kernel_table(torch, lambda: model.train_step(tape, tok, lab, 0, LR), 5)
        profile_out.append(f"## {name}: ours, 5 steps\n\n```\n{table}\n```\n")
    rows["ours ms"] = ms
    rows["ours peak MiB"] = (rt.stats(dev)["peak_bytes"]) / 2**20
    rows["ours losses"] = [v.to_list()[0] for v in losses[:3]]
    rows["tokens/s ours"] = B * T / (ms / 1000)
    rows["tokens/s torch"] = B * T / (rows["torch ms"] / 1000)
    tape.free()
    return rows


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default="launch,small")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--profile", help="write the kernel tables of both steps to this file")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        raise SystemExit("models: needs torch")
    if not torch.cuda.is_available() or not rt.cuda_available():
        raise SystemExit("models: needs a CUDA device for both torch and torchlean_rt")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rt.lib.tlrt_set_allow_tf32(False)
    out = [f"# Model-level training steps against PyTorch\n",
           f"- date: {time.strftime('%Y-%m-%d')}; {torch.cuda.get_device_name()}; "
           f"PyTorch {torch.__version__}; {rt.build_info()}",
           f"- float32, TF32 off; {args.steps} timed steps after {args.warmup}; no dropout, no "
           "clipping; AdamW (ours: tlrt_adam_step_multi, one call a step; torch: fused=True)\n",
           "| config | params | ours ms | torch ms | ours/torch | compile ms | ours tokens/s | "
           "ours peak MiB | torch peak MiB | first losses ours | first losses torch |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    profiles = [] if args.profile else None
    for name in args.configs.split(","):
        r = bench_config(torch, name, CONFIGS[name], args.steps, args.warmup, args.compile,
                         profiles)
        comp = f"{r['compile ms']:.2f}" if "compile ms" in r else "-"
        line = (f"| {name} {CONFIGS[name]} | {r['params']} | {r['ours ms']:.2f} | "
                f"{r['torch ms']:.2f} | {r['ours ms'] / r['torch ms']:.2f} | {comp} | "
                f"{r['tokens/s ours']:.0f} | {r['ours peak MiB']:.0f} | "
                f"{r['torch peak MiB']:.0f} | "
                f"{', '.join(f'{v:.5f}' for v in r['ours losses'])} | "
                f"{', '.join(f'{v:.5f}' for v in r['torch losses'])} |")
        print(line, flush=True)
        out.append(line)
        # Written after every configuration: a run stopped at a time limit keeps what it measured.
        text = "\n".join(out) + "\n"
        if args.profile:
            with open(args.profile, "w") as f:
                f.write("# Kernels of one training step (torch.profiler)\n\n" + "\n".join(profiles))
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
