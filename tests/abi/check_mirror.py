#!/usr/bin/env python3
"""Mirror check: the CPU and CUDA backends implement the same op families one for one.

Usage: check_mirror.py REPO_ROOT

  (a) the basenames of cuda/*.cu equal the basenames of stub/*.cpp;
  (b) every core/backend/<family>.hpp has both stub/<family>.cpp and cuda/<family>.cu (but for
      core/backend/policy.hpp, the policy types the interfaces share, and parallel.hpp, core's
      CPU thread pool that the CPU backend's kernels run on);
  (c) every function declared in the TLRT_<FAMILY>_BACKEND_API macro of core/backend/<family>.hpp
      is defined at namespace scope in namespace tlrt::stub in stub/<family>.cpp and in namespace
      tlrt::cuda in cuda/<family>.cu (a definition: the name followed by its parameter list and a
      body, outside any class, function or anonymous namespace).
Functions defined in tlrt::stub / tlrt::cuda that the interface does not declare (helpers shared
by the CUDA translation units, for example) are listed as notes, not failures.
Exit status: 0 pass, 1 fail (meson test convention).
"""
import glob
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# Headers of core/backend/ that are not a family: the policy types (numeric mode, matmul policy)
# that the families' interfaces take as parameters, and core's CPU thread pool (a service the CPU
# kernels call, implemented by core/parallel.cpp).
SHARED_INTERFACE_HEADERS = {"policy", "parallel"}
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "alignof", "decltype",
            "static_assert", "catch", "noexcept", "throw", "operator", "defined", "alignas"}


def scrub(text):
    """Blanks comments, string and character literals and preprocessor directives, keeping
    newlines so that positions map to the same line numbers."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if at_line_start and c == "#":  # directive, with its continuation lines
            while i < n:
                if text[i] == "\n" and text[i - 1] != "\\":
                    break
                out.append("\n" if text[i] == "\n" else " ")
                i += 1
            continue
        at_line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c)
            i = j
        else:
            if c == "\n":
                at_line_start = True
            out.append(c)
            i += 1
    return "".join(out)


def macro_body(text, macro):
    """The replacement text of #define MACRO (continuation lines joined), or None."""
    lines = text.split("\n")
    for k, line in enumerate(lines):
        if re.match(r"\s*#\s*define\s+" + re.escape(macro) + r"\b", line):
            body = [line]
            while body[-1].rstrip().endswith("\\") and k + 1 < len(lines):
                k += 1
                body.append(lines[k])
            joined = " ".join(l.rstrip().rstrip("\\") for l in body)
            return re.sub(r"^\s*#\s*define\s+" + re.escape(macro), "", joined, count=1)
    return None


def declared_functions(body):
    """Function names declared in a macro body: for each ';'-terminated declaration, the
    identifier right before its parameter list."""
    body = re.sub(r"/\*.*?\*/", " ", body, flags=re.S)
    names = []
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        m = re.search(r"(" + IDENT + r")\s*\(", decl)
        if m:
            names.append(m.group(1))
    return names


def namespace_scope_definitions(path):
    """{qualified name: line} of the functions defined at namespace scope in a source file.
    Qualified names use the enclosing named namespaces ("tlrt::stub::unary"); anything inside an
    anonymous namespace, a class or a function body is skipped."""
    with open(path, encoding="utf-8") as f:
        raw = f.read()
    text = scrub(raw)
    defs = {}
    stack = []  # entries: ('ns', name) | ('anon',) | ('linkage',) | ('block',)
    start = 0   # start of the current statement (text since the last ; { or })
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == ";":
            start = i + 1
        elif c == "}":
            if stack:
                stack.pop()
            start = i + 1
        elif c == "{":
            head = " ".join(text[start:i].split())
            kind = ("block",)
            m = re.fullmatch(r"(?:inline\s+)?namespace\s*(" + IDENT + r"(?:\s*::\s*" + IDENT + r")*)?",
                             head)
            if m:
                # "namespace a::b {" opens both with one brace: one stack entry named "a::b"
                kind = ("ns", re.sub(r"\s+", "", m.group(1))) if m.group(1) else ("anon",)
            elif re.fullmatch(r"extern\s*\"\s*\"", head):
                kind = ("linkage",)
            else:
                at_ns_scope = all(e[0] in ("ns", "linkage") for e in stack)
                if at_ns_scope:
                    name = function_name(head)
                    if name:
                        scope = "::".join(e[1] for e in stack if e[0] == "ns")
                        qual = re.sub(r"\s+", "", scope + "::" + name if scope else name)
                        line = text.count("\n", 0, i) + 1
                        defs.setdefault(qual, line)
            stack.append(kind)
            start = i + 1
        i += 1
    return defs


def function_name(head):
    """The (possibly qualified) name of a function definition head such as
    "template <ew::Unary OP> __global__ void unary_kernel(const float *x, ...) noexcept", or None
    when the head is something else (a class, an initialiser, a lambda, a control statement)."""
    if not head or "=" in head.split("(")[0]:
        return None
    if re.match(r"(?:template\s*<.*>\s*)?(?:struct|class|union|enum)\b", head):
        return None
    # the parameter list: the first '(' at angle-bracket depth 0 whose matching ')' is followed
    # only by qualifiers (const, noexcept, override, trailing return, attributes)
    depth = 0
    for k, ch in enumerate(head):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            m = re.search(r"((?:" + IDENT + r"\s*::\s*)*~?" + IDENT + r")\s*$", head[:k])
            if not m:
                return None
            name = m.group(1)
            if name.split("::")[-1].strip() in KEYWORDS:
                return None
            close = matching_paren(head, k)
            if close is None:
                return None
            rest = head[close + 1:].strip()
            if re.fullmatch(r"(?:(?:const|volatile|noexcept(?:\s*\(.*\))?|override|final|"
                            r"__attribute__\s*\(\(.*\)\)|->\s*[^{;]+|&|&&)\s*)*", rest):
                return name
            return None
    return None


def matching_paren(s, k):
    depth = 0
    for j in range(k, len(s)):
        if s[j] == "(":
            depth += 1
        elif s[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return None


def main(argv):
    if len(argv) != 2:
        print("usage: check_mirror.py REPO_ROOT", file=sys.stderr)
        return 2
    root = argv[1]
    failures, notes = [], []

    def bases(folder, ext):
        return {os.path.basename(p)[: -len(ext)]
                for p in glob.glob(os.path.join(root, folder, "*" + ext))}

    cu, cpp, fam = bases("cuda", ".cu"), bases("stub", ".cpp"), bases(os.path.join("core", "backend"), ".hpp")
    fam -= SHARED_INTERFACE_HEADERS
    print(f"cuda/*.cu: {sorted(cu)}")
    print(f"stub/*.cpp: {sorted(cpp)}")
    print(f"core/backend/*.hpp: {sorted(fam)}")
    if not fam:
        failures.append("no family headers in core/backend/")
    # (a)
    for b in sorted(cu - cpp):
        failures.append(f"cuda/{b}.cu has no CPU twin stub/{b}.cpp")
    for b in sorted(cpp - cu):
        failures.append(f"stub/{b}.cpp has no CUDA twin cuda/{b}.cu")
    # (b)
    for f in sorted(fam):
        for folder, ext, have in (("stub", ".cpp", cpp), ("cuda", ".cu", cu)):
            if f not in have:
                failures.append(f"family {f} (core/backend/{f}.hpp) has no {folder}/{f}{ext}")
    for b in sorted((cu | cpp) - fam):
        failures.append(f"backend translation unit {b} has no interface header core/backend/{b}.hpp")
    # (c)
    total = 0
    for f in sorted(fam):
        hpp = os.path.join(root, "core", "backend", f + ".hpp")
        with open(hpp, encoding="utf-8") as fh:
            htext = fh.read()
        macro = f"TLRT_{f.upper()}_BACKEND_API"
        body = macro_body(htext, macro)
        if body is None:
            failures.append(f"core/backend/{f}.hpp does not define {macro}")
            continue
        names = declared_functions(body)
        if not names:
            failures.append(f"{macro} in core/backend/{f}.hpp declares no function")
            continue
        dupes = sorted({x for x in names if names.count(x) > 1})
        if dupes:
            notes.append(f"{macro} declares overloads/duplicates of {dupes} (checked by name)")
        flat = " ".join(scrub(htext).split())
        for ns in ("stub", "cuda"):
            if not re.search(r"namespace (?:tlrt ?:: ?)?" + ns + r" ?\{ ?" + macro + r"\b", flat):
                failures.append(f"core/backend/{f}.hpp does not expand {macro} inside namespace "
                                f"tlrt::{ns}")
        total += len(set(names))
        for ns, folder, ext in (("stub", "stub", ".cpp"), ("cuda", "cuda", ".cu")):
            src = os.path.join(root, folder, f + ext)
            if not os.path.exists(src):
                continue  # reported by (b)
            defs = namespace_scope_definitions(src)
            want = f"tlrt::{ns}::"
            for name in sorted(set(names)):
                if want + name in defs:
                    continue
                elsewhere = [q for q in defs if q.split("::")[-1] == name]
                hint = f" (found only as {', '.join(elsewhere)})" if elsewhere else ""
                failures.append(f"{folder}/{f}{ext}: {macro} declares {name}, but no definition "
                                f"of {want}{name} at namespace scope{hint}")
            extra = sorted(q for q in defs if q.startswith(want) and q[len(want):] not in names)
            if extra:
                notes.append(f"{folder}/{f}{ext} also defines {', '.join(extra)} (not in {macro})")
        print(f"{f}: {macro} declares {sorted(set(names))}")

    for n_ in notes:
        print("note: " + n_)
    if failures:
        print("FAIL:")
        for x in failures:
            print(" - " + x)
        return 1
    print(f"OK: {len(fam)} families, {total} backend functions, each defined in stub/ and cuda/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
