#!/usr/bin/env python3
"""bench/lm_curve.py: examples/lm's GPT trained by us and by PyTorch side by side; loss curves.

Both sides start from the same parameters (ours, copied to PyTorch through DLPack), see the same
batches (examples/lm/lm.py's windows of the same text, keyed by (seed, step)), and follow the same
schedule: linear warm-up then cosine decay (lm.lr_at), AdamW with betas (0.9, 0.95), eps 1e-8,
weight decay on matrices only, clipping by the global norm (ours tlrt_clip_grad_norm, PyTorch
clip_grad_norm_). Dropout is 0 on both sides (the two libraries draw different masks). At the end
both evaluate lm.evaluate's fixed validation windows. Written: a Markdown table (per-interval mean
training losses, the final validation losses and their relative difference) and, with --png, a
plot of both curves (a PNG written by this script: no plotting package needed).

    python3 bench/lm_curve.py --config quick --device cpu --out R.md --png R.png
    python3 bench/lm_curve.py --config small --device cuda --steps 300 --out R.md --png R.png

Needs torch and the torchlean_rt package (TORCHLEAN_RT_LIB for a build tree); --data as the
examples (default: Debian's python3.11-doc sources).
"""
import argparse
import math
import os
import struct
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "lm"))
import gpt  # noqa: E402
import lm  # noqa: E402
from lm import rt  # noqa: E402

sys.path.insert(0, HERE)
import models  # noqa: E402  (torch_gpt, torch_forward: the same GPT in PyTorch)


def write_png(path, series, width=800, height=480):
    """A line plot of series [(label, [y...], (r, g, b))] against the step, on a white canvas with
    a frame and horizontal grid lines at whole units of y; the legend is the colours' order in the
    caption of the Markdown file that links it."""
    ys = [y for _, s, _ in series for y in s if math.isfinite(y)]
    lo, hi = math.floor(min(ys)), math.ceil(max(ys))
    n = max(len(s) for _, s, _ in series)
    m = 40  # margin
    px = [[(255, 255, 255)] * width for _ in range(height)]

    def to_xy(i, y):
        x = m + (width - 2 * m) * i / max(1, n - 1)
        v = height - m - (height - 2 * m) * (y - lo) / max(1e-9, hi - lo)
        return x, v

    def dot(x, y, c):
        xi, yi = int(round(x)), int(round(y))
        if 0 <= xi < width and 0 <= yi < height:
            px[yi][xi] = c

    for g in range(lo, hi + 1):  # grid
        _, v = to_xy(0, g)
        for x in range(m, width - m):
            dot(x, v, (220, 220, 220))
    for x in range(m, width - m + 1):  # frame
        dot(x, m, (0, 0, 0))
        dot(x, height - m, (0, 0, 0))
    for y in range(m, height - m + 1):
        dot(m, y, (0, 0, 0))
        dot(width - m, y, (0, 0, 0))
    for _, s, c in series:
        for i in range(1, len(s)):
            x0, y0 = to_xy(i - 1, s[i - 1])
            x1, y1 = to_xy(i, s[i])
            k = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
            for t in range(k + 1):
                dot(x0 + (x1 - x0) * t / k, y0 + (y1 - y0) * t / k, c)
    raw = b"".join(b"\x00" + bytes(v for p in row for v in p) for row in px)

    def chunk(tag, data):
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height,
                                                                  8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    return lo, hi


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="quick", choices=sorted(gpt.CONFIGS))
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--steps", type=int, help="default: the configuration's")
    ap.add_argument("--data", default=lm.DOC_SOURCES)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--every", type=int, default=10, help="steps per point of the table")
    ap.add_argument("--out")
    ap.add_argument("--png")
    args = ap.parse_args(argv)
    import torch
    F = torch.nn.functional
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rt.lib.tlrt_set_allow_tf32(False)
    cfg = dict(gpt.CONFIGS[args.config])
    steps = args.steps or cfg["steps"]
    cfg["steps"] = steps
    cfg["vocab"] = 256
    dev = rt.cuda(0) if args.device == "cuda" else rt.CPU
    tdev = "cuda" if args.device == "cuda" else "cpu"
    train, val = lm.load_text(args.data)
    model = gpt.GPT(cfg, dev, args.seed)
    P = models.torch_gpt(torch, model)
    decay = [P[k] for k, (_, _, d) in model.params.items() if d]
    nodecay = [P[k] for k, (_, _, d) in model.params.items() if not d]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=(0.9, 0.95), eps=1e-8)
    B, T = cfg["batch"], cfg["ctx"]
    batches = lm.Batches(train, B, T, dev, args.seed)
    tape = rt.Tape(dev)

    def torch_batch(starts, data):
        w = [data[s:s + T + 1] for s in starts]
        tok = torch.tensor([list(x[:-1]) for x in w], dtype=torch.long, device=tdev)
        lab = torch.tensor([list(x[1:]) for x in w], dtype=torch.long, device=tdev)
        return tok, lab

    ours, theirs = [], []
    t_ours = t_theirs = 0.0
    span = len(train) - T - 1
    for step in range(steps):
        lr = lm.lr_at(step, cfg, steps)
        starts = lm.window_starts(batches.stream, step * B, B, span)
        tok, lab = batches.next(starts)
        t0 = time.perf_counter()
        loss = model.train_step(tape, tok, lab, step, lr, 0.0, 0.1, 1.0)
        ours.append(loss.to_list()[0])
        t_ours += time.perf_counter() - t0
        tt, tl = torch_batch(starts, train)
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr
        out = F.cross_entropy(models.torch_forward(torch, F, P, cfg, tt), tl.reshape(-1))
        out.backward()
        torch.nn.utils.clip_grad_norm_(list(P.values()), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        theirs.append(float(out))
        t_theirs += time.perf_counter() - t0
    val_ours = lm.evaluate(model, tape, val, cfg, dev)
    vt = 0.0
    with torch.no_grad():
        for j in range(8):
            starts = lm.window_starts(lm.EVAL_STREAM, j * B, B, len(val) - T - 1)
            tt, tl = torch_batch(starts, val)
            vt += float(F.cross_entropy(models.torch_forward(torch, F, P, cfg, tt),
                                        tl.reshape(-1)))
    val_theirs = vt / 8
    rel = (val_ours - val_theirs) / val_theirs
    lines = [f"# examples/lm GPT ({args.config}), ours against PyTorch, {steps} steps on "
             f"{args.device}\n",
             f"- date: {time.strftime('%Y-%m-%d')}; PyTorch {torch.__version__}; "
             f"{rt.build_info()}",
             f"- configuration {cfg}; seed {args.seed}; dropout 0; AdamW (0.9, 0.95), weight "
             "decay 0.1 on matrices, clipping 1.0; float32, TF32 off",
             f"- data: {args.data} ({len(train)} training bytes, {len(val)} validation bytes)",
             f"- wall time of the training steps (one process, alternating steps): ours "
             f"{t_ours:.1f} s, PyTorch {t_theirs:.1f} s ({torch.get_num_threads()} torch threads)",
             f"- validation loss after {steps} steps: ours {val_ours:.5f}, PyTorch "
             f"{val_theirs:.5f}, relative difference {100 * rel:+.2f} %\n",
             "| steps | ours mean loss | PyTorch mean loss |", "|---|---:|---:|"]
    for a in range(0, steps, args.every):
        o, t = ours[a:a + args.every], theirs[a:a + args.every]
        lines.append(f"| {a}-{a + len(o) - 1} | {sum(o) / len(o):.6f} | {sum(t) / len(t):.6f} |")
    if args.png:
        lo, hi = write_png(args.png, [("ours", ours, (200, 30, 30)),
                                      ("PyTorch", theirs, (30, 60, 200))])
        lines.insert(5, f"- plot: {os.path.basename(args.png)} (red: ours, blue: PyTorch; "
                        f"training loss per step, y from {lo} to {hi} nats, grid every nat)")
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
