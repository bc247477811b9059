#!/usr/bin/env python3
"""digits_mlp.py: examples/digits_mlp.c through the Python bindings (bindings/python/torchlean_rt/).

    python3 examples/digits_mlp.py [--cuda] [--epochs N] [--target PERCENT] [digits.bin]

The same program as the C example, step for step: the same fixed-seed SplitMix64 shuffle, 80/20
split, nn.Linear initialisation and batch order, MLP 64-128-10 (ReLU, cross-entropy) recorded on
an autograd tape (rt.Tape), Adam with the fused in-place step rt.adam_step. So on the same device
it prints the same numbers as build/examples/digits_mlp (the ops are deterministic).
The data: the TLDG file of examples/export_digits.py when a path is given, otherwise
sklearn.datasets.load_digits() from the installed scikit-learn (scaled the same way, value / 16).
--cuda runs on CUDA device 0 and fails loudly where there is none. Exit status 0 when the final
test accuracy is at least the target (--target, default 95%), 1 otherwise, 77 when no data source
is available (no file given and scikit-learn missing). The library is found as the bindings find
it (TORCHLEAN_RT_LIB, else an installed library; run-digits.sh sets the variable).
"""
import array
import math
import os
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings",
                                "python"))
import torchlean_rt as rt  # noqa: E402

D_IN, D_HID, D_OUT, BATCH = 64, 128, 10, 32
LR, BETA1, BETA2, EPS = 2e-3, 0.9, 0.999, 1e-8
M64 = (1 << 64) - 1


class SplitMix64:
    """The C example's generator, bit for bit."""

    def __init__(self, seed):
        self.s = seed & M64

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def uniform(self):
        return (self.next() >> 11) / 9007199254740992.0

    def shuffle(self, a):
        for i in range(len(a), 1, -1):
            j = self.next() % i
            a[i - 1], a[j] = a[j], a[i - 1]


def load(path):
    """(features as a list of 64-float array('f') rows, labels as a list of ints)."""
    if path:
        with open(path, "rb") as f:
            data = f.read()
        if data[:4] != b"TLDG":
            raise SystemExit(f"digits_mlp.py: {path} is not a TLDG file")
        n, d = struct.unpack_from("<II", data, 4)
        if d != D_IN:
            raise SystemExit(f"digits_mlp.py: {path} has {d} features per image, expected 64")
        x = array.array("f", data[12:12 + 4 * n * d])
        if sys.byteorder != "little":
            x.byteswap()
        y = list(data[12 + 4 * n * d:12 + 4 * n * d + n])
        if len(x) != n * d or len(y) != n:
            raise SystemExit(f"digits_mlp.py: {path} is truncated")
    else:
        try:
            from sklearn.datasets import load_digits
        except ImportError:
            print("digits_mlp.py: no data file given and scikit-learn is not installed: skipped")
            sys.exit(77)
        digits = load_digits()
        n = len(digits.target)
        x = array.array("f", (v / 16.0 for v in digits.data.reshape(-1).tolist()))
        y = [int(v) for v in digits.target]
    return [x[i * D_IN:(i + 1) * D_IN] for i in range(n)], y


def main(argv):
    dev, epochs, path, target = rt.CPU, 30, None, 95.0
    args = iter(argv[1:])
    for a in args:
        if a == "--cuda":
            dev = rt.cuda(0)
        elif a == "--epochs":
            epochs = int(next(args))
        elif a == "--target":
            target = float(next(args))
        elif not a.startswith("-"):
            path = a
        else:
            print(f"usage: {argv[0]} [--cuda] [--epochs N] [--target PERCENT] [digits.bin]",
                  file=sys.stderr)
            return 2
    xs, ys = load(path)
    n = len(ys)
    rng = SplitMix64(2026)
    order = list(range(n))
    rng.shuffle(order)
    ntrain = n * 4 // 5
    train, test = order[:ntrain], order[ntrain:]
    print(f"digits_mlp.py: {n} images ({ntrain} train, {n - ntrain} test), MLP 64-128-10, "
          f"Adam lr {LR:g}, batch {BATCH}, on {'the CPU' if dev == rt.CPU else 'CUDA device 0'}")
    print(f"library: {rt.build_info()}")

    # Parameters in nn.Linear's layout and initialisation; zeroed Adam moments.
    dims = [[D_HID, D_IN], [D_HID], [D_OUT, D_HID], [D_OUT]]
    fan_in = [D_IN, D_IN, D_HID, D_HID]
    params, moments = [], []
    for k in range(4):
        size = math.prod(dims[k])
        bound = 1.0 / math.sqrt(fan_in[k])
        w = array.array("f", ((2.0 * rng.uniform() - 1.0) * bound for _ in range(size)))
        params.append(rt.Buffer.from_buffer(w, dev))
        moments.append((rt.Buffer.zeros(size, dev), rt.Buffer.zeros(size, dev)))

    tape = rt.Tape(dev)

    def forward(idx, train_mode):
        xb = rt.Buffer.from_buffer(_concat(xs, idx), dev)
        ids = [tape.leaf(params[k], dims[k], train_mode) for k in range(4)]
        x = tape.leaf(xb, [len(idx), D_IN], False)
        h = tape.relu(tape.linear(x, ids[0], ids[1]))
        return ids, tape.linear(h, ids[2], ids[3]), xb

    def accuracy(idx):
        correct = 0
        for off in range(0, len(idx), 512):
            part = idx[off:off + 512]
            _, logits, xb = forward(part, False)
            vals = tape.value(logits).to_list()
            for i, j in enumerate(part):
                row = vals[i * D_OUT:(i + 1) * D_OUT]
                best = 0
                for c in range(1, D_OUT):
                    if row[c] > row[best]:
                        best = c
                correct += best == ys[j]
            tape.reset()
            xb.free()
        return 100.0 * correct / len(idx)

    t0, step, test_acc = time.perf_counter(), 0, 0.0
    for epoch in range(1, epochs + 1):
        te = time.perf_counter()
        rng.shuffle(train)
        loss_sum, nb = 0.0, 0
        for off in range(0, ntrain, BATCH):
            part = train[off:off + BATCH]
            ids, logits, xb = forward(part, True)
            loss = tape.cross_entropy(logits, [ys[j] for j in part])
            tape.backward(loss)
            loss_sum += tape.value(loss).to_list()[0]
            grads = [tape.grad(i) for i in ids]
            tape.reset()
            step += 1
            for k in range(4):
                rt.adam_step(params[k], grads[k], moments[k][0], moments[k][1], step, LR, BETA1,
                             BETA2, EPS, 0.0, False)
                grads[k].free()
            xb.free()
            nb += 1
        train_acc, test_acc = accuracy(train), accuracy(test)
        print(f"epoch {epoch:3d}  loss {loss_sum / nb:.4f}  train acc {train_acc:6.2f}%  "
              f"test acc {test_acc:6.2f}%  {time.perf_counter() - te:.3f} s", flush=True)
    print(f"final test accuracy: {test_acc:.2f}% ({n - ntrain} images; target >= {target:.0f}%), "
          f"{time.perf_counter() - t0:.1f} s in all")
    tape.free()
    if test_acc < target:
        print(f"digits_mlp.py: test accuracy {test_acc:.2f}% is below the {target:.0f}% target",
              file=sys.stderr)
        return 1
    return 0


def _concat(xs, idx):
    out = array.array("f")
    for i in idx:
        out.extend(xs[i])
    return out


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except rt.TlrtError as e:
        print(f"digits_mlp.py: {e}", file=sys.stderr)
        sys.exit(1)
