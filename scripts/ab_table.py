#!/usr/bin/env python3
"""Merges the A and B tables of scripts/ab-builds.sh into one markdown table per benchmark: the
rows' labels, A's and B's first "ours ms" column and B / A. A row of B with no A row is skipped.

usage: ab_table.py DIR [NAME...]   (DIR holds ab_<name>_A<r>.md and ab_<name>_B<r>.md; round 1)
"""
import glob
import os
import re
import sys


def rows(path):
    header, out = None, []
    for line in open(path, encoding="utf-8"):
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None or cells[0] == header[0]:
            header = cells
            continue
        out.append((header, cells))
    return out


def ours_col(header):
    for i, h in enumerate(header):
        if h.startswith("ours ms"):
            return i
    return None


def main(argv):
    d = argv[1]
    names = argv[2:] or sorted({re.sub(r"_[AB]\d+\.md$", "", os.path.basename(p))[3:]
                               for p in glob.glob(os.path.join(d, "ab_*_A1.md"))})
    for n in names:
        a, b = os.path.join(d, f"ab_{n}_A1.md"), os.path.join(d, f"ab_{n}_B1.md")
        if not (os.path.exists(a) and os.path.exists(b)):
            print(f"\n### {n}: no A/B pair\n")
            continue
        ra = {}
        for h, c in rows(a):
            k = ours_col(h)
            if k is not None and len(c) > k:
                ra[tuple(c[:k])] = c[k]
        print(f"\n### {n}\n\n| case | A ms | B ms | B / A |\n|---|---:|---:|---:|")
        ratios = []
        for h, c in rows(b):
            k = ours_col(h)
            if k is None or len(c) <= k or tuple(c[:k]) not in ra:
                continue
            try:
                x, y = float(ra[tuple(c[:k])]), float(c[k])
            except ValueError:
                continue
            r = y / x if x > 0 else float("nan")
            ratios.append(r)
            print(f"| {' '.join(c[:k])} | {x:.4g} | {y:.4g} | {r:.3f} |")
        if ratios:
            ratios.sort()
            print(f"\n{len(ratios)} rows; B / A median {ratios[len(ratios) // 2]:.3f}, "
                  f"min {ratios[0]:.3f}, max {ratios[-1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
