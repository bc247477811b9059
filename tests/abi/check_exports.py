#!/usr/bin/env python3
"""ABI check: the exported symbols of libtorchlean_rt agree with the headers and the version script.

Usage: check_exports.py LIBRARY MAPFILE HEADER_DIR

Compares three sets of names and fails, listing every difference, unless they are equal:
  (a) every function declared with TLRT_API in HEADER_DIR/*.h;
  (b) the global symbols of the GNU version script MAPFILE (all version nodes);
  (c) the dynamic symbols LIBRARY defines (nm -D --defined-only), minus the version node symbols
      themselves (the absolute symbol "TLRT_1.0" that ld emits for each node).
It also checks that every exported symbol starts with tlrt_, is a function, is bound to a version
node of the script, and that the library's SONAME is libtorchlean_rt.so.<major>, with <major>
taken from TLRT_ABI_VERSION_MAJOR in tlrt_runtime.h.
Exit status: 0 pass, 1 fail (meson test convention).
"""
import glob
import os
import re
import shutil
import subprocess
import sys

PREFIX = "tlrt_"
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_c_comments(text):
    """Removes /* */ and // comments (the headers hold no string literal that contains them)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def strip_preprocessor(text):
    """Drops preprocessor directives, continuation lines included."""
    out, cont = [], False
    for line in text.split("\n"):
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            continue
        out.append(line)
    return "\n".join(out)


def header_functions(header_dir):
    """{name: 'file'} of every function declared with TLRT_API; errors for malformed ones."""
    names, errors = {}, []
    headers = sorted(glob.glob(os.path.join(header_dir, "*.h")))
    if not headers:
        errors.append(f"no headers found in {header_dir}")
    for path in headers:
        with open(path, encoding="utf-8") as f:
            text = strip_preprocessor(strip_c_comments(f.read()))
        base = os.path.basename(path)
        for m in re.finditer(r"\bTLRT_API\b([^;{]*)", text):
            decl = " ".join(m.group(1).split())
            fm = re.search(r"(" + IDENT + r")\s*\(", decl)
            if not fm:
                errors.append(f"{base}: TLRT_API declaration that is not a function: {decl!r}")
                continue
            name = fm.group(1)
            if name in names:
                errors.append(f"{base}: {name} declared twice (also in {names[name]})")
            names[name] = base
    return names, errors


def version_script(mapfile):
    """(set of global symbols, set of version node names, errors) of a GNU version script."""
    with open(mapfile, encoding="utf-8") as f:
        text = strip_c_comments(f.read())
    symbols, nodes, errors = set(), set(), []
    # NODE { global: a; b; local: *; } [PARENT];
    for m in re.finditer(r"(" + IDENT + r"(?:\.[0-9]+)*)\s*\{(.*?)\}\s*(" + IDENT + r"(?:\.[0-9]+)*)?\s*;",
                         text, flags=re.S):
        nodes.add(m.group(1))
        section = "global"  # a node without a label exports what it lists
        for t in re.finditer(r"\b(global|local)\s*:|([^;:\s][^;]*);", m.group(2)):
            if t.group(1):
                section = t.group(1)
                continue
            sym = t.group(2).strip()
            if section == "global":
                if not re.fullmatch(IDENT, sym):
                    errors.append(f"version script: global entry {sym!r} is a pattern, not a name")
                symbols.add(sym)
            elif section == "local" and sym != "*":
                errors.append(f"version script: unexpected local entry {sym!r} (expected only '*')")
    if not nodes:
        errors.append(f"version script {mapfile}: no version node found")
    return symbols, nodes, errors


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


def library_symbols(library, nodes):
    """({name: (type, version)}, errors) of the dynamic symbols the library defines."""
    nm = shutil.which("nm")
    if nm is None:
        return {}, ["nm not found on PATH (binutils)"]
    syms, errors = {}, []
    for line in run([nm, "-D", "--defined-only", library]).splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        typ, full = parts[-2], parts[-1]
        name, _, version = full.partition("@")
        version = version.lstrip("@")
        if typ == "A" and name in nodes:
            continue  # the version node symbol itself
        syms[name] = (typ, version)
    return syms, errors


def soname(library):
    readelf = shutil.which("readelf")
    if readelf is None:
        return None, "readelf not found on PATH (binutils)"
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", run([readelf, "-d", library]))
    return (m.group(1) if m else None), None


def abi_major(header_dir):
    with open(os.path.join(header_dir, "tlrt_runtime.h"), encoding="utf-8") as f:
        m = re.search(r"#define\s+TLRT_ABI_VERSION_MAJOR\s+(\d+)", f.read())
    return int(m.group(1)) if m else None


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    library, mapfile, header_dir = argv[1:]
    failures = []

    hdr, errs = header_functions(header_dir)
    failures += errs
    mapped, nodes, errs = version_script(mapfile)
    failures += errs
    lib, errs = library_symbols(library, nodes)
    failures += errs

    H, M, L = set(hdr), mapped, set(lib)
    print(f"headers ({header_dir}): {len(H)} TLRT_API functions")
    print(f"version script ({os.path.basename(mapfile)}): {len(M)} global symbols, nodes {sorted(nodes)}")
    print(f"library ({os.path.basename(library)}): {len(L)} defined dynamic symbols")

    # Report each symbol once, naming the sets that hold it and the sets that lack it.
    lines = []
    for name in sorted(H | M | L):
        where = [s for s, present in (("headers", name in H), ("version script", name in M),
                                      ("library", name in L)) if present]
        if len(where) != 3:
            missing = [s for s in ("headers", "version script", "library") if s not in where]
            lines.append(f"  {name}: in {', '.join(where)}; missing from {', '.join(missing)}")
    if lines:
        failures.append("the three symbol sets differ:\n" + "\n".join(lines))

    for name, (typ, version) in sorted(lib.items()):
        if not name.startswith(PREFIX):
            failures.append(f"exported symbol without the {PREFIX} prefix: {name} ({typ})")
        if typ not in ("T", "W", "i"):
            failures.append(f"exported symbol {name} is not a function (nm type {typ})")
        if version not in nodes:
            failures.append(f"exported symbol {name} is not bound to a version node of the script "
                            f"(version {version or 'none'!r})")
    for name in sorted(H | M):
        if not name.startswith(PREFIX):
            failures.append(f"declared/listed symbol without the {PREFIX} prefix: {name}")

    major = abi_major(header_dir)
    if major is None:
        failures.append("TLRT_ABI_VERSION_MAJOR not found in tlrt_runtime.h")
    want = f"libtorchlean_rt.so.{major if major is not None else 1}"
    got, err = soname(library)
    if err:
        failures.append(err)
    elif got != want:
        failures.append(f"SONAME is {got!r}, expected {want!r}")
    else:
        print(f"SONAME: {got}")

    if failures:
        print("FAIL:")
        for f in failures:
            print(" - " + f)
        return 1
    print(f"OK: {len(H)} symbols agree across headers, version script and library")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (OSError, RuntimeError) as e:
        print(f"FAIL: {e}")
        sys.exit(1)
