#!/usr/bin/env python3
"""examples/lm/check_resume.py: the meson tests gpt_c_resume, gpt_py_resume, mamba_c_resume,
mamba_py_resume.

    check_resume.py --workdir DIR --steps N [--safetensors] -- COMMAND...

COMMAND is a language-model example (build/examples/gpt, or python3 examples/lm/gpt.py, ...)
with its options (--quick --test). Three runs, each printing every step's loss:
  A:  COMMAND --steps 2N --save DIR/a.safetensors
  B1: COMMAND --steps 2N --stop-after N --save DIR/b.safetensors       (stops after step N)
  B2: COMMAND --resume DIR/b.safetensors --save DIR/b.safetensors      (steps N+1 .. 2N)
Fails unless B1 and B2 print A's losses step for step, B2 ends with A's validation loss and
sample, and the two final checkpoints are byte-identical (the same parameters, Adam moments,
step and configuration, bit for bit: on the CPU the dropout keys and batch windows derive from
the step, so an interrupted run continues exactly). With --safetensors the checkpoint is also
read with Hugging Face's safetensors package (numpy), when it is importable: the tensors'
names, dtypes and shapes, the step and the metadata. Exit 77 (skipped) when an example skips
(no text). Under valgrind (TLRT_UNDER_VALGRIND: meson's valgrind setup runs this script under
memcheck) a native COMMAND runs the three times under memcheck itself (its tiny configuration,
--valgrind-supp the suppressions), without the twin and the safetensors package; a Python one
is skipped (CPython under memcheck is slow and noisy).

--twin ARG (repeated: one argument each) names a second program that must agree with COMMAND:
its run A (the same options) must print the same losses and write the same checkpoint bytes
(gpt_c_resume: build/examples/gpt and python3 examples/lm/gpt.py make the same library calls
with the same keys, so they agree bit for bit on the CPU; mamba_c_resume: mamba and mamba.py).
"""
import argparse
import os
import re
import subprocess
import sys


def run(cmd, label):
    print(f"---- {label}: {' '.join(cmd)}", flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace")
    print(p.stdout, end="", flush=True)
    if p.returncode == 77:
        print(f"check_resume: {label} skipped (77): skipping")
        sys.exit(77)
    if p.returncode != 0:
        print(f"check_resume: FAILED: {label} exited {p.returncode}")
        sys.exit(1)
    return p.stdout


STEP = re.compile(r"^step +(\d+) +loss +(\S+)", re.M)


def losses(out):
    return {int(k): v for k, v in STEP.findall(out)}


def final(out, what):
    m = re.search(r"^\w+: " + what + r".*$", out, re.M)
    return m.group(0) if m else None


def check_safetensors(path, steps):
    try:
        from safetensors import safe_open
    except ImportError:
        print("check_resume: the safetensors package is not importable: its reading not checked")
        return []
    errors = []
    with safe_open(path, framework="numpy") as f:
        keys = set(f.keys())
        meta = f.metadata() or {}
        step = f.get_tensor("opt.step") if "opt.step" in keys else None
        if step is None or step.dtype.name != "int64" or step.shape != () or int(step) != steps:
            errors.append(f"opt.step: {step!r}, expected the int64 scalar {steps}")
        d, vocab = int(meta.get("d", 0)), 256
        wte = f.get_tensor("wte") if "wte" in keys else None
        if wte is None or wte.dtype.name != "float32" or wte.shape != (vocab, d):
            errors.append(f"wte: {None if wte is None else (wte.dtype, wte.shape)}, expected "
                          f"float32 of shape ({vocab}, {d})")
        params = sorted(k for k in keys if not k.startswith("opt."))
        for k in params:
            for prefix in ("opt.m.", "opt.v."):
                if prefix + k not in keys:
                    errors.append(f"{prefix + k} is missing")
                elif f.get_slice(prefix + k).get_shape() != f.get_slice(k).get_shape():
                    errors.append(f"{prefix + k} has another shape than {k}")
        if len(keys) != 3 * len(params) + 1:
            errors.append(f"{len(keys)} tensors for {len(params)} parameters")
        for key in ("model", "steps", "seed", "lr", "warmup", "ctx", "batch", "format"):
            if key not in meta:
                errors.append(f"metadata {key!r} is missing")
        print(f"check_resume: safetensors {__import__('safetensors').__version__} reads {path}: "
              f"{len(params)} parameters and their moments, step {steps}, metadata "
              f"{sorted(meta)}")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--steps", type=int, default=12, help="N: the run is 2N steps")
    ap.add_argument("--safetensors", action="store_true")
    ap.add_argument("--twin", action="append", default=[], metavar="ARG")
    ap.add_argument("--valgrind-supp", metavar="FILE")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    program_args = cmd[1:]  # for the twin
    if not cmd:
        ap.error("no COMMAND")
    if os.environ.get("TLRT_UNDER_VALGRIND"):
        if os.path.basename(cmd[0]).startswith("python"):
            print("check_resume: a Python example: skipped under valgrind")
            return 77
        cmd = ["valgrind", "--error-exitcode=1", "--leak-check=full", "--show-leak-kinds=definite",
               "--errors-for-leak-kinds=definite,indirect"] + (
            ["--suppressions=" + args.valgrind_supp] if args.valgrind_supp else []) + cmd
        args.twin, args.safetensors = [], False
    os.makedirs(args.workdir, exist_ok=True)
    a = os.path.join(args.workdir, "a.safetensors")
    b = os.path.join(args.workdir, "b.safetensors")
    for p in (a, b):
        if os.path.exists(p):
            os.remove(p)
    n = args.steps
    common = ["--log-every", "1", "--sample-length", "16"]
    out_a = run(cmd + common + ["--steps", str(2 * n), "--save", a], "A (2N steps)")
    out_b1 = run(cmd + common + ["--steps", str(2 * n), "--stop-after", str(n), "--save", b],
                 "B1 (N steps of 2N)")
    out_b2 = run(cmd + common + ["--resume", b, "--save", b], "B2 (resumed, N more)")
    la, lb1, lb2 = losses(out_a), losses(out_b1), losses(out_b2)
    errors = []
    if sorted(la) != list(range(1, 2 * n + 1)):
        errors.append(f"A printed the losses of steps {sorted(la)}, not 1..{2 * n}")
    if sorted(lb1) != list(range(1, n + 1)):
        errors.append(f"B1 printed the losses of steps {sorted(lb1)}, not 1..{n}")
    if sorted(lb2) != list(range(n + 1, 2 * n + 1)):
        errors.append(f"B2 printed the losses of steps {sorted(lb2)}, not {n + 1}..{2 * n}")
    for k in range(1, 2 * n + 1):
        other = lb1.get(k) if k <= n else lb2.get(k)
        if la.get(k) != other:
            errors.append(f"step {k}: loss {la.get(k)} in A, {other} after "
                          f"{'the stop' if k <= n else 'the resume'}")
    for what in ("validation loss [0-9]", "sample:"):
        fa, fb = final(out_a, what), final(out_b2, what)
        if fa is None or fa != fb:
            errors.append(f"last lines differ: A {fa!r}, B2 {fb!r}")
    if not (os.path.exists(a) and os.path.exists(b)):
        errors.append("a checkpoint is missing")
    elif open(a, "rb").read() != open(b, "rb").read():
        errors.append(f"{a} and {b} differ")
    if args.safetensors and os.path.exists(a):
        errors += check_safetensors(a, 2 * n)
    if args.twin:
        t = os.path.join(args.workdir, "twin.safetensors")
        if os.path.exists(t):
            os.remove(t)
        out_t = run(args.twin + program_args + common + ["--steps", str(2 * n), "--save", t],
                    "twin of A")
        if losses(out_t) != la:
            errors.append("the twin printed other losses than A")
        if not os.path.exists(t) or open(t, "rb").read() != open(a, "rb").read():
            errors.append(f"the twin's checkpoint {t} differs from A's")
    for e in errors:
        print("check_resume: FAILED: " + e)
    if errors:
        return 1
    print(f"check_resume: {2 * n} steps = {n} + resume + {n}: the same {2 * n} losses, validation "
          f"loss and sample; the checkpoints are byte-identical ({os.path.getsize(a)} bytes)"
          + (f"; {' '.join(args.twin)} agrees bit for bit" if args.twin else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
