#!/usr/bin/env python3
"""The autograd tape is a client of the public ABI: core/tape/ may include only

  - the public headers, "abi/tlrt_*.h";
  - C++ standard library headers, <name> without a directory or extension (<vector>, <cstdint>);
  - its own header "core/tape/tape_internal.hpp";
  - exactly one internal header, "core/error.hpp": the entry-point guard (tlrt::guarded /
    tlrt::fail) that maps exceptions to a status and sets the thread's tlrt_last_error() message.
    The public ABI has no way to set that message (and should not get one: hosts must not forge
    library errors), and the tape's own errors (bad node id, shape mismatch at record time) need it;
  - the handle table "core/handle_table.hpp", a self-contained data structure (no library state)
    behind tlrt_tape handles, as behind tlrt_buffer handles.

usage: check_tape_includes.py SOURCE_ROOT
Exit status: 0 pass, 1 fail (listing every offending line).
"""
import glob
import os
import re
import sys

ALLOWED_LOCAL = {"core/tape/tape_internal.hpp", "core/error.hpp", "core/handle_table.hpp"}


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    files = sorted(glob.glob(os.path.join(root, "core", "tape", "*")))
    sources = [f for f in files if f.endswith((".cpp", ".hpp", ".h", ".cc"))]
    if not sources:
        print("no sources found in core/tape/", file=sys.stderr)
        return 1
    bad = []
    count = 0
    for path in sources:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                m = re.match(r"\s*#\s*(include|import)\b\s*(.*)", line)
                if not m:
                    continue
                count += 1
                arg = m.group(2).split("//")[0].strip()
                ok = False
                q = re.fullmatch(r'"([^"]+)"', arg)
                a = re.fullmatch(r"<([a-z_0-9]+)>", arg)
                if q:
                    name = q.group(1)
                    ok = (re.fullmatch(r"abi/tlrt_[a-z0-9_]+\.h", name) is not None
                          or name in ALLOWED_LOCAL)
                elif a:
                    ok = True  # a standard header: no directory, no extension
                if not ok:
                    bad.append(f"{os.path.relpath(path, root)}:{lineno}: {line.strip()}")
    if bad:
        print("core/tape/ includes headers outside the public ABI:")
        for b in bad:
            print("  " + b)
        return 1
    print(f"core/tape/: {len(sources)} files, {count} includes, all public or allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
