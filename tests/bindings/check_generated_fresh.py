#!/usr/bin/env python3
"""Regenerates the Rust / Lean / Julia bindings into a temporary directory and compares them with
the committed files under bindings/: fails (listing the stale files and a diff excerpt) when a
header changed and the generator was not re-run (python3 bindings/gen/gen_bindings.py)."""
import difflib
import os
import subprocess
import sys
import tempfile

root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
with tempfile.TemporaryDirectory() as tmp:
    r = subprocess.run([sys.executable, os.path.join(root, "bindings", "gen", "gen_bindings.py"),
                        "--abi", os.path.join(root, "abi"), "--out", tmp])
    if r.returncode != 0:
        sys.exit(1)
    stale = 0
    for d, _, files in os.walk(tmp):
        for f in sorted(files):
            rel = os.path.relpath(os.path.join(d, f), tmp)
            new = open(os.path.join(d, f), encoding="utf-8").read()
            path = os.path.join(root, "bindings", rel)
            old = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
            if old != new:
                stale += 1
                print(f"STALE: bindings/{rel}")
                diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(),
                                                 f"bindings/{rel}", "regenerated", lineterm=""))
                print("\n".join(diff[:40]))
    print(f"bindings_generated_fresh: {stale} stale file(s); "
          + ("re-run python3 bindings/gen/gen_bindings.py" if stale else "up to date"))
    sys.exit(1 if stale else 0)
