#!/usr/bin/env python3
"""Export scikit-learn's handwritten digits for the digits examples.

usage: export_digits.py OUT

Loads sklearn.datasets.load_digits() from the INSTALLED scikit-learn package (the data ship inside
it: 1797 images of 8x8 pixels with values 0..16, labels 0..9; nothing is downloaded and nothing is
copied into this repository) and writes OUT, little-endian:

    magic   4 bytes   b"TLDG"
    n       uint32    number of images (1797)
    d       uint32    features per image (64)
    x       n*d float32, row-major, pixel value / 16 (so in [0, 1])
    y       n uint8   labels 0..9

examples/digits_mlp.c, examples/digits_mlp.py and the Rust example read this format.
Exit status: 0 on success, 77 (meson's "skipped") when scikit-learn is not installed, 1 on error.
"""
import struct
import sys


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:
        print(f"export_digits.py: scikit-learn is not installed ({e}); "
              "install it with `python3 -m pip install scikit-learn`", file=sys.stderr)
        return 77
    digits = load_digits()
    x, y = digits.data, digits.target
    n, d = x.shape
    if d != 64 or len(y) != n or not (0 <= int(y.min()) and int(y.max()) <= 9):
        print(f"export_digits.py: unexpected data: {n} x {d}, labels {y.min()}..{y.max()}",
              file=sys.stderr)
        return 1
    feats = (x.astype("float64") / 16.0).astype("<f4")
    with open(argv[1], "wb") as f:
        f.write(b"TLDG")
        f.write(struct.pack("<II", n, d))
        f.write(feats.tobytes(order="C"))
        f.write(y.astype("u1").tobytes())
    print(f"export_digits.py: wrote {n} images of {d} features to {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
