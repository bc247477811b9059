#!/usr/bin/env python3
"""Layering of the source tree (docs/DESIGN.md, "Layers"):

  (a) the backends (cuda/, stub/) include no public header (abi/...) and neither core/runtime.hpp
      nor core/settings.hpp: core resolves the policy of a call and passes it down, so no
      backend reads a process switch;
  (b) exactly one product source reads the process environment: core/settings.cpp (getenv,
      secure_getenv and environ in core/, cuda/, stub/ anywhere else fail);
  (c) the benchmarks and examples (bench/, examples/) use only the public headers: no
      "core/...", "cuda/..." or "stub/..." include.

usage: check_layering.py SOURCE_ROOT
Exit status: 0 pass, 1 fail (listing every offending line).
"""
import os
import re
import sys

SOURCE_EXT = (".c", ".cc", ".cpp", ".cu", ".cuh", ".h", ".hpp")
BANNED_IN_BACKENDS = re.compile(r'"(abi/[^"]+|core/runtime\.hpp|core/settings\.hpp)"')
PRIVATE_IN_CLIENTS = re.compile(r'"((core|cuda|stub)/[^"]+)"')
ENV_READ = re.compile(r"\b(getenv|secure_getenv|environ)\b")
SETTINGS = os.path.join("core", "settings.cpp")


def sources(root, top):
    for d, _, names in os.walk(os.path.join(root, top)):
        for n in sorted(names):
            if n.endswith(SOURCE_EXT):
                yield os.path.join(d, n)


def code_lines(path):
    """(line number, text) of each line with // comments removed (block comments kept: a
    mention inside one is rare and would be a false alarm worth reading anyway)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for no, line in enumerate(f, 1):
            yield no, line.split("//")[0]


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    bad = []
    seen = 0
    for top in ("cuda", "stub"):
        for path in sources(root, top):
            seen += 1
            for no, line in code_lines(path):
                m = re.match(r"\s*#\s*include\s*(.*)", line)
                if m and BANNED_IN_BACKENDS.search(m.group(1)):
                    bad.append(f"{os.path.relpath(path, root)}:{no}: backend includes "
                               f"{m.group(1).strip()} (policy must come in as a parameter)")
    env_readers = set()
    for top in ("core", "cuda", "stub"):
        for path in sources(root, top):
            rel = os.path.relpath(path, root)
            for no, line in code_lines(path):
                if ENV_READ.search(line):
                    env_readers.add(rel)
                    if rel != SETTINGS:
                        bad.append(f"{rel}:{no}: reads the environment ({line.strip()}); only "
                                   f"{SETTINGS} may")
    if SETTINGS not in env_readers:
        bad.append(f"{SETTINGS} reads no environment variable (expected the one reader)")
    for top in ("bench", "examples"):
        for path in sources(root, top):
            seen += 1
            for no, line in code_lines(path):
                m = re.match(r"\s*#\s*include\s*(.*)", line)
                if m and PRIVATE_IN_CLIENTS.search(m.group(1)):
                    bad.append(f"{os.path.relpath(path, root)}:{no}: includes the private "
                               f"header {m.group(1).strip()}; use the public headers")
    if seen == 0:
        print("no sources found under cuda/, stub/, bench/, examples/", file=sys.stderr)
        return 1
    for b in bad:
        print(b)
    print(f"layering: {seen} files checked, {len(bad)} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
