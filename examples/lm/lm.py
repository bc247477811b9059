"""examples/lm/lm.py: what the language-model examples share (gpt.py, mamba.py).

  - the text: load_text (a file, or the *.txt files of a folder: by default the Python 3.11
    documentation's reStructuredText sources from Debian's python3.11-doc, 12 MB; every 20th file
    is the validation set) and Batches (random windows of bytes as int32 index buffers on the
    device: tokens and next-byte labels);
  - LanguageModel: parameters (Buffers, with their shapes and whether AdamW decays them), their
    Adam moments, and train_step (forward, cross-entropy, backward, clipping, the fused
    tlrt_adam_step_multi over every parameter); a model class adds init_params and forward;
  - lr_at (linear warm-up, cosine decay), evaluate, sample, and main,
    the command line both examples run with;
  - checkpoints (safetensors: rt.save_safetensors / rt.SafeTensors): --save PATH writes every
    --save-every steps and after the last one the parameters under their names and shapes, the
    Adam moments as "opt.m.NAME" / "opt.v.NAME", the number of steps taken as the int64 scalar
    "opt.step" and the configuration as metadata (model, its shape, steps, lr, warmup, seed,
    dropout, weight_decay, clip, val_init); --resume PATH loads all of it (the configuration from
    the file; --steps may lengthen the schedule) and trains on; --stop-after K ends a run after
    step K as if it were interrupted. Batch windows, dropout masks and samples draw from keys
    that derive from (seed, step) alone (SplitMix64, mix() below), so N steps + resume + N steps
    give the same losses and the same checkpoint bytes as 2N steps on the CPU
    (examples/lm/check_resume.py, the meson tests *_resume, checks it). examples/lm/gpt.c and
    examples/lm/mamba.c are gpt.py and mamba.py in C with the same keys and file layout.
Byte-level tokens: the vocabulary is the 256 bytes of UTF-8 text (nothing to download or train).
"""
import argparse
import glob
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))
import torchlean_rt as rt  # noqa: E402

DOC_SOURCES = "/usr/share/doc/python3.11/html/_sources"
CKPT_FORMAT = "torchlean_rt examples/lm checkpoint 1"
M64 = (1 << 64) - 1


# ---- random keys --------------------------------------------------------------------------------

def mix(x):
    """SplitMix64's output function (tlrt_rng.h's sm): a 64-bit hash of a 64-bit counter."""
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


# The streams: training windows (from the seed), validation windows (fixed), sampling.
EVAL_STREAM = mix(0x6576616C)  # "eval"


def train_stream(seed):
    return mix(seed)


def sample_stream(seed):
    return mix(seed + 0x73616D70)  # "samp"


def window_starts(stream, first, count, span):
    """Window starts number first .. first + count - 1 of a stream, each in [0, span)."""
    return [mix((stream + first + i) & M64) % span for i in range(count)]


# ---- data ---------------------------------------------------------------------------------------

def load_text(path):
    """(train bytes, validation bytes) of a file, or of the *.txt files under a folder (sorted;
    every 20th file to validation)."""
    if os.path.isfile(path):
        data = open(path, "rb").read()
        cut = len(data) * 19 // 20
        return data[:cut], data[cut:]
    files = sorted(glob.glob(os.path.join(path, "**", "*.txt"), recursive=True))
    if not files:
        raise SystemExit(f"no text under {path} (Debian: apt-get install python3.11-doc, or "
                         "give --data FILE_OR_FOLDER)")
    train, val = [], []
    for i, f in enumerate(files):
        (val if i % 20 == 19 else train).append(open(f, "rb").read())
    return b"\n".join(train), b"\n".join(val)


class Batches:
    """Random windows of ctx + 1 bytes: tokens (batch * ctx) and next-byte labels, as int32
    index buffers on the device. The windows of step s are numbers s * batch .. of the seed's
    stream: they depend on (seed, step) only, so a resumed run draws what an uninterrupted one
    would."""

    def __init__(self, data, batch, ctx, device, seed):
        if len(data) < ctx + 2:
            raise SystemExit(f"{len(data)} bytes of text, fewer than a context of {ctx}")
        self.data, self.batch, self.ctx, self.device = data, batch, ctx, device
        self.stream = train_stream(seed)

    def window(self, start):
        return self.data[start:start + self.ctx + 1]

    def at(self, step):
        """The batch of training step `step` (0-based)."""
        return self.next(window_starts(self.stream, step * self.batch, self.batch,
                                       len(self.data) - self.ctx - 1))

    def next(self, starts):
        toks, labels = [], []
        for s in starts:
            w = self.window(s)
            toks.extend(w[:-1])
            labels.extend(w[1:])
        return (rt.Buffer.from_ints(toks, "int32", self.device),
                rt.Buffer.from_ints(labels, "int32", self.device))


# ---- models -------------------------------------------------------------------------------------

class LanguageModel:
    """Parameters (Buffers on the device), their Adam moments, one training step. Subclasses
    define init_params (calling normal / const) and forward(tape, tokens, batch, n, train,
    dropout, key) -> (leaf ids by name, logits node of shape (batch * n, vocab))."""

    def __init__(self, cfg, device, seed):
        self.cfg, self.device = cfg, device
        self.vocab = cfg.get("vocab", 256)
        self.params = {}  # name -> (Buffer, dims, weight decay?)
        self._key = seed * 1_000_003
        self.init_params()
        self.moments = {k: (rt.Buffer.zeros(b.size, device), rt.Buffer.zeros(b.size, device))
                        for k, (b, _, _) in self.params.items()}

    def normal(self, name, dims, std, decay=True):
        """A parameter drawn from N(0, std^2) (tlrt_rand_normal, keys 2^32 apart)."""
        self._key += 1 << 32
        self.params[name] = (rt.rand_normal(self.device, math.prod(dims), 0.0, std, self._key),
                             dims, decay)

    def const(self, name, dims, value):
        """A parameter filled with `value`, not decayed (norm scales and biases)."""
        self.params[name] = (rt.Buffer.full(math.prod(dims), value, self.device), dims, False)

    def count(self):
        return sum(b.size for b, _, _ in self.params.values())

    def save(self, path, step, metadata):
        """The checkpoint after `step` steps: parameters (their shapes), "opt.m.NAME",
        "opt.v.NAME", the int64 scalar "opt.step", and `metadata` (str to str)."""
        tensors = {}
        for k, (buf, dims, _) in self.params.items():
            m, v = self.moments[k]
            tensors[k] = rt.Tensor(buf, dims)
            tensors["opt.m." + k] = rt.Tensor(m, dims)
            tensors["opt.v." + k] = rt.Tensor(v, dims)
        tensors["opt.step"] = rt.Tensor(rt.Buffer.from_ints([step], "int64"), ())
        rt.save_safetensors(path, tensors, metadata)

    def load(self, f, path):
        """Replaces the parameters and moments with those of the open checkpoint f (an
        rt.SafeTensors), checking names, dtypes and shapes; returns its step."""
        expected = 3 * len(self.params) + 1
        if len(f) != expected:
            raise SystemExit(f"{path} holds {len(f)} tensors; this model's checkpoint has "
                             f"{expected}")
        for k, (_, dims, decay) in list(self.params.items()):
            loaded = []
            for name in (k, "opt.m." + k, "opt.v." + k):
                if name not in f or f.info(name) != ("F32", tuple(dims)):
                    raise SystemExit(f"{path}: tensor {name} is not F32 of shape {tuple(dims)}")
                loaded.append(f.load_buffer(name, self.device))
            self.params[k] = (loaded[0], dims, decay)
            self.moments[k] = (loaded[1], loaded[2])
        if "opt.step" not in f or f.info("opt.step") != ("I64", ()):
            raise SystemExit(f"{path}: opt.step is not an I64 scalar")
        return f.load_buffer("opt.step").to_int_list()[0]

    def train_step(self, tape, tokens, labels, step, lr, dropout=0.0, weight_decay=0.1,
                   clip=None, key=0):
        """One step: forward, cross-entropy, backward, clipping (clip: the global norm limit, or
        None), AdamW on every parameter. Returns the loss as a one-element Buffer (not read:
        reading it waits for the device)."""
        cfg = self.cfg
        P, logits = self.forward(tape, tokens, cfg["batch"], cfg["ctx"], True, dropout, key)
        loss = tape.cross_entropy(logits, labels)
        del logits  # the host is done with them; the loss node keeps them for its backward
        tape.backward(loss)  # frees each rule's saved values as it goes (retain_graph=False)
        names = list(self.params)
        grads = [tape.grad(P[k]) for k in names]
        value = tape.value(loss)
        tape.reset()
        if clip is not None:
            rt.clip_grad_norm(grads, clip)  # on the device, in place, no host read
        # AdamW on every parameter in one call (one launch on CUDA), bit for bit adam_step's.
        rt.adam_step_multi([self.params[k][0] for k in names], grads,
                           [self.moments[k][0] for k in names],
                           [self.moments[k][1] for k in names], step + 1, lr, 0.9, 0.95, 1e-8,
                           weight_decay, True,
                           weight_decays=[weight_decay if self.params[k][2] else 0.0
                                          for k in names])
        return value



def lr_at(step, cfg, steps):
    """Linear warm-up, then cosine decay to a tenth."""
    lr, warm = cfg["lr"], cfg["warmup"]
    if step < warm:
        return lr * (step + 1) / warm
    q = (step - warm) / max(1, steps - warm)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, q))))


def evaluate(model, tape, data, cfg, device, batches=8):
    """The mean loss over `batches` fixed windows of the validation text (EVAL_STREAM's)."""
    b = Batches(data, cfg["batch"], cfg["ctx"], device, 0)
    total = 0.0
    for j in range(batches):
        starts = window_starts(EVAL_STREAM, j * cfg["batch"], cfg["batch"],
                               len(data) - cfg["ctx"] - 1)
        tokens, labels = b.next(starts)
        _, logits = model.forward(tape, tokens, cfg["batch"], cfg["ctx"], False, 0.0, 0)
        total += tape.value(tape.cross_entropy(logits, labels)).to_list()[0]
        tape.reset()
    return total / batches


def sample(model, tape, prompt, length, temperature, device, seed):
    """Text generated after `prompt` (bytes): each step the logits of the next byte, from the
    model's decoder when it has one (model.decoder(): a callable from the bytes so far to the
    logits, e.g. gpt.py's KV cache), else from one forward over the last ctx bytes; the next
    byte drawn from their softmax at `temperature` (0: greedy) with the uniforms of the seed's
    sampling stream (as gpt.c draws them)."""
    stream = sample_stream(seed)
    ctx = model.cfg["ctx"]
    out = bytearray(prompt)
    decoder = model.decoder() if hasattr(model, "decoder") else None
    V = model.vocab
    for k in range(length):
        if decoder is not None:
            z = decoder(out)
        else:
            window = bytes(out[-ctx:])
            tokens = rt.Buffer.from_ints(list(window), "int32", device)
            _, logits = model.forward(tape, tokens, 1, len(window), False, 0.0, 0)
            last = rt.slice_axis0(tape.value(logits), len(window), V, len(window) - 1, 1)
            z = last.to_list()
            tape.reset()
        if temperature <= 0:
            nxt = max(range(V), key=lambda i: z[i])
        else:
            m = max(z)
            w = [math.exp((v - m) / temperature) for v in z]
            total = 0.0
            for x in w:  # in order (sum() may compensate: gpt.c adds plainly)
                total += x
            target = (mix((stream + k) & M64) >> 11) * (1.0 / 9007199254740992.0) * total
            nxt, acc = V - 1, 0.0
            for i, x in enumerate(w):
                acc += x
                if acc > target:
                    nxt = i
                    break
        out.append(nxt)
    return bytes(out)


def main(argv, name, model_class, configs, description):
    """The command line of an example: `name` prefixes its lines, configs has "quick" (CPU, CI)
    and "small" (--cuda) presets."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help="the small CPU configuration of CI")
    ap.add_argument("--cuda", action="store_true", help="train on the first GPU")
    ap.add_argument("--data", default=DOC_SOURCES, help="a text file or a folder of *.txt")
    ap.add_argument("--steps", type=int, help="training steps (default: the configuration's)")
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0, help="global gradient norm limit")
    ap.add_argument("--log-every", type=int, default=None)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--prompt", default="The Python interpreter ")
    ap.add_argument("--sample-length", type=int, default=None)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--min-improvement", type=float, default=None,
                    help="exit 1 unless the validation loss fell by at least this many nats")
    ap.add_argument("--test", action="store_true",
                    help="as a test: exit 77 (skipped) without the text or under valgrind")
    ap.add_argument("--save", metavar="PATH", help="write a checkpoint (safetensors) every "
                    "--save-every steps and after the last step")
    ap.add_argument("--save-every", type=int, default=1000, metavar="N")
    ap.add_argument("--resume", metavar="PATH", help="continue from a checkpoint of --save (its "
                    "configuration; --steps may lengthen the schedule)")
    ap.add_argument("--stop-after", type=int, metavar="K",
                    help="end after step K of the schedule, as if interrupted")
    args = ap.parse_args(argv)
    if args.test and os.environ.get("TLRT_UNDER_VALGRIND"):
        print(f"{name}: skipped under valgrind (CPython under memcheck)")
        return 77
    if args.test and not os.path.exists(args.data):
        print(f"{name}: skipped (no {args.data}: apt-get install python3.11-doc)")
        return 77

    preset = "small" if args.cuda and not args.quick else "quick"
    cfg = dict(configs[preset])
    ckpt, val0 = None, None
    if args.resume:  # the configuration (model, schedule, seed, regularisation) of the file
        ckpt = rt.SafeTensors(args.resume)
        meta = ckpt.metadata
        if meta.get("format") != CKPT_FORMAT or meta.get("model") != name:
            raise SystemExit(f"{name}: {args.resume} is not a checkpoint of {name} (metadata "
                             f"format {CKPT_FORMAT!r}, model {name!r} expected)")
        try:
            cfg = {k: type(v)(meta[k]) for k, v in configs["quick"].items()}
            args.seed, val0 = int(meta["seed"]), float(meta["val_init"])
            args.dropout, args.weight_decay = float(meta["dropout"]), float(meta["weight_decay"])
            args.clip = float(meta["clip"])
        except (KeyError, ValueError) as e:
            raise SystemExit(f"{name}: {args.resume}: incomplete or malformed metadata ({e})")
    steps = cfg["steps"] = args.steps or cfg["steps"]
    device = rt.cuda(0) if args.cuda else rt.CPU
    if args.cuda and not rt.cuda_available():
        raise SystemExit(f"{name}: --cuda, but no usable CUDA device")
    log_every = args.log_every or max(1, steps // 10)
    train, val = load_text(args.data)
    print(f"{name}: {len(train)} training / {len(val)} validation bytes from {args.data}; "
          f"{rt.device_name(device)}")
    model = model_class(cfg, device, args.seed)
    shape = ", ".join(f"{k} {v}" for k, v in cfg.items() if k not in ("steps", "lr", "warmup"))
    print(f"{name}: {shape}; {model.count()} parameters, {steps} steps")
    tape = rt.Tape(device)
    start = 0
    if ckpt is not None:
        start = model.load(ckpt, args.resume)
        ckpt.close()
        print(f"{name}: resumed from {args.resume} after step {start} (validation loss at "
              f"initialisation {val0:.4f})")
        if start > steps:
            raise SystemExit(f"{name}: {args.resume} holds step {start}, past the {steps} steps "
                             "of the run")
    else:
        val0 = evaluate(model, tape, val, cfg, device)
        print(f"{name}: validation loss at initialisation {val0:.4f} (ln 256 = "
              f"{math.log(256):.4f})")

    def fmt(v):
        return format(v, ".17g") if isinstance(v, float) else str(v)

    meta = {k: fmt(v) for k, v in cfg.items()}
    meta.update(format=CKPT_FORMAT, model=name, seed=str(args.seed), dropout=fmt(args.dropout),
                weight_decay=fmt(args.weight_decay), clip=fmt(float(args.clip or 0.0)),
                val_init=fmt(val0))
    end = min(args.stop_after, steps) if args.stop_after else steps
    batches = Batches(train, cfg["batch"], cfg["ctx"], device, args.seed)
    tokens_per_step = cfg["batch"] * cfg["ctx"]
    t_log, loss_sum, n_sum = time.perf_counter(), 0.0, 0
    for step in range(start, end):
        tokens, labels = batches.at(step)
        lr = lr_at(step, cfg, steps)
        loss_value = model.train_step(tape, tokens, labels, step, lr, args.dropout,
                                      args.weight_decay, args.clip or None,
                                      key=(args.seed + step) << 40)
        loss_sum += loss_value.to_list()[0]
        n_sum += 1
        if (step + 1) % log_every == 0 or step + 1 == end:
            rt.synchronize(device)
            dt = time.perf_counter() - t_log
            print(f"step {step + 1:5d}  loss {loss_sum / n_sum:.4f}  lr {lr:.2e}  "
                  f"{tokens_per_step * n_sum / dt:9.0f} tokens/s  {1000 * dt / n_sum:7.2f} ms/step",
                  flush=True)
            t_log, loss_sum, n_sum = time.perf_counter(), 0.0, 0
        if args.save and ((step + 1) % args.save_every == 0 or step + 1 == end):
            model.save(args.save, step + 1, meta)
            print(f"{name}: saved {args.save} (step {step + 1})")
    if args.save and start == end:  # nothing trained (a resume at the end): still write it
        model.save(args.save, end, meta)
        print(f"{name}: saved {args.save} (step {end})")
    val1 = evaluate(model, tape, val, cfg, device)
    print(f"{name}: validation loss {val1:.4f} (from {val0:.4f})")
    length = args.sample_length or (120 if preset == "quick" else 400)
    text = sample(model, tape, args.prompt.encode(), length, args.temperature, device, args.seed)
    print(f"{name}: sample: " + text.decode("utf-8", errors="replace"))
    tape.free()
    if args.min_improvement is not None and val0 - val1 < args.min_improvement:
        print(f"{name}: FAILED: the validation loss fell by {val0 - val1:.4f} nats, less than "
              f"{args.min_improvement}")
        return 1
    return 0
