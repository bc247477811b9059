#!/usr/bin/env python3
"""check_lean_lake.py [LEAN_DIR | --self-test]: checks that Lake finds every module the Lean binding's lakefile
names, without a Lean toolchain (none is installable here). LEAN_DIR defaults to bindings/lean.

Parses LEAN_DIR/lakefile.lean (the DSL subset the generator writes and Lake documents: `package
NAME where` with `srcDir`, `lean_lib NAME where` with `srcDir`, `roots`, `globs`, and `lean_exe
NAME where` with `srcDir`, `root`) and fails, naming the file, when
  * a `lean_lib` root (default: the library's name) has no module file <srcDir>/A/B.lean;
  * a glob matches no file (`.one M`: M.lean; `.submodules M`: some M/**.lean;
    `.andSubmodules M`: M.lean or some M/**.lean); a `lean_exe` root has no file;
  * a module file (any .lean under the package other than the lakefile, so also one no target
    builds) imports a module of this package that has no file, or a module of no package the
    lakefile can see (core Init / Std / Lean / Lake, or a `require`d package: imports of other
    packages are only checked when the lakefile requires none);
  * a module file under a library's source directory is built by no target: neither matched by a
    glob nor imported, transitively, from a root (Lake would never compile it);
  * a path the lakefile builds from (`pkg.dir / "c" / "x.c"`) does not exist.
Exit 0 when all hold, 1 listing every failure. --self-test runs the check on small fabricated
packages (among them the layout before the root module was generated: a `lean_lib` without
`roots` and no root file) and fails unless each fails, or passes, as Lake would. Pure stdlib.
"""
import os
import re
import sys

CORE = {"Init", "Std", "Lean", "Lake"}


def strip_comments(text):
    """Removes Lean comments (nested /- -/ blocks, -- lines) and string contents are kept."""
    out, i, depth, n = [], 0, 0, len(text)
    while i < n:
        if text.startswith("/-", i):
            depth += 1
            i += 2
        elif depth and text.startswith("-/", i):
            depth -= 1
            i += 2
        elif depth:
            out.append("\n" if text[i] == "\n" else " ")
            i += 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


_NAME = r"(?:«[^»]*»|[A-Za-z_][\w']*)(?:\.(?:«[^»]*»|[A-Za-z_][\w']*))*"


def name_parts(name):
    return [p[1:-1] if p.startswith("«") else p for p in re.findall(r"«[^»]*»|[^.«»]+", name)]


def imports_of(text):
    """The modules a Lean file imports: its header (optional `module`, `prelude`, then `import`
    commands with the modifiers `public`, `private`, `meta`, `all`, `runtime`)."""
    toks = re.findall(_NAME + r"|\S", strip_comments(text))
    mods, i = [], 0
    mods_mod = {"public", "private", "meta", "all", "runtime"}
    while i < len(toks):
        t = toks[i]
        if t in ("module", "prelude"):
            i += 1
        elif t in mods_mod and i + 1 < len(toks) and toks[i + 1] in mods_mod | {"import"}:
            i += 1
        elif t == "import":
            i += 1
            while i < len(toks) and toks[i] in mods_mod:
                i += 1
            if i < len(toks):
                mods.append(toks[i])
            i += 1
        else:
            break
    return mods


def blocks(code, keyword):
    """[(name, body)] of `keyword NAME where <indented fields>` (or without `where`)."""
    out = []
    lines = code.split("\n")
    for k, line in enumerate(lines):
        m = re.match(r"^\s*" + keyword + r"\s+(" + _NAME + r")\b(.*)$", line)
        if not m:
            continue
        body = [m.group(2)]
        for nxt in lines[k + 1:]:
            if nxt.strip() and not nxt[:1].isspace():
                break
            body.append(nxt)
        out.append((m.group(1), "\n".join(body)))
    return out


def field(body, key):
    m = re.search(r"\b" + key + r"\s*:=\s*(.+?)(?=\n\s*\w+\s*:=|\Z)", body, flags=re.S)
    return m.group(1).strip() if m else None


def string_field(body, key, default):
    v = field(body, key)
    if v is None:
        return default
    m = re.match(r'^"([^"]*)"$', v)
    if not m:
        raise ValueError(f"{key} := {v}: only a string literal is understood")
    return m.group(1)


def name_list(v):
    return [n.lstrip("`") for n in re.findall(r"`" + _NAME, v)]


def globs_of(v):
    """[(kind, module)] of a globs := #[...] value: kind one / submodules / andSubmodules."""
    out = []
    inner = v.strip()
    if not (inner.startswith("#[") and inner.endswith("]")):
        raise ValueError(f"globs := {v}: only an array literal is understood")
    for item in [x.strip() for x in inner[2:-1].split(",") if x.strip()]:
        m = re.match(r"^(?:(?:Glob)?\.(one|submodules|andSubmodules)\s+)?`(" + _NAME + r")$", item)
        if not m:
            raise ValueError(f"glob {item!r} is not understood")
        out.append((m.group(1) or "one", m.group(2)))
    return out


def module_file(src, mod):
    return os.path.join(src, *name_parts(mod)) + ".lean"


def lean_files(top):
    for d, dirs, files in os.walk(top):
        dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x != "build")
        for f in sorted(files):
            if f.endswith(".lean"):
                yield os.path.join(d, f)


def check(lean_dir):
    errors = []
    lakefile = os.path.join(lean_dir, "lakefile.lean")
    if not os.path.isfile(lakefile):
        return [f"{lakefile}: missing (a lakefile.toml is not checked)"]
    code = strip_comments(open(lakefile, encoding="utf-8").read())
    pkgs = blocks(code, "package")
    if len(pkgs) != 1:
        return [f"{lakefile}: {len(pkgs)} `package` declarations, expected 1"]
    try:
        pkg_src = os.path.normpath(os.path.join(lean_dir, string_field(pkgs[0][1], "srcDir", ".")))
        libs = []   # (name, srcdir, roots, globs)
        for name, body in blocks(code, "lean_lib"):
            src = os.path.normpath(os.path.join(pkg_src, string_field(body, "srcDir", ".")))
            roots = name_list(field(body, "roots")) if field(body, "roots") else [name]
            globs = globs_of(field(body, "globs")) if field(body, "globs") else [("one", r) for r in roots]
            libs.append((name, src, roots, globs))
        exes = []
        for name, body in blocks(code, "lean_exe"):
            src = os.path.normpath(os.path.join(pkg_src, string_field(body, "srcDir", ".")))
            root = name_list(field(body, "root"))[0] if field(body, "root") else name
            exes.append((name, src, root))
    except ValueError as e:
        return [f"{lakefile}: {e}"]
    has_require = re.search(r"^\s*require\b", code, flags=re.M) is not None
    if not libs and not exes:
        errors.append(f"{lakefile}: no lean_lib or lean_exe")
    rel = lambda p: os.path.relpath(p, lean_dir)  # noqa: E731
    srcdirs = sorted({s for _, s, _, _ in libs} | {s for _, s, _ in exes})

    def resolve(mod):
        for s in srcdirs:
            f = module_file(s, mod)
            if os.path.isfile(f):
                return f
        return None

    built = set()   # module files some target builds
    roots_all = []
    for name, src, roots, globs in libs:
        for r in roots:
            f = module_file(src, r)
            if not os.path.isfile(f):
                errors.append(f"lean_lib {name}: root `{r} has no module file {rel(f)}")
            else:
                roots_all.append(f)
        for kind, mod in globs:
            f, d = module_file(src, mod), os.path.join(src, *name_parts(mod))
            subs = [x for x in lean_files(d)] if os.path.isdir(d) else []
            hits = ([f] if kind in ("one", "andSubmodules") and os.path.isfile(f) else []) + \
                   (subs if kind in ("submodules", "andSubmodules") else [])
            if not hits:
                errors.append(f"lean_lib {name}: glob .{kind} `{mod} matches no file "
                              f"(looked for {rel(f) if kind != 'submodules' else rel(d) + '/**.lean'})")
            built.update(os.path.normpath(h) for h in hits)
    for name, src, root in exes:
        f = module_file(src, root)
        if not os.path.isfile(f):
            errors.append(f"lean_exe {name}: root `{root} has no module file {rel(f)}")
        else:
            roots_all.append(f)
            built.add(os.path.normpath(f))

    # Imports of every module file of the package.
    files = [os.path.normpath(f) for f in lean_files(lean_dir)
             if os.path.normpath(f) != os.path.normpath(lakefile)]
    local_tops = {name_parts(r)[0] for _, _, roots, _ in libs for r in roots}
    local_tops |= {name_parts(r)[0] for _, _, r in exes}
    for s in srcdirs:
        for f in files:
            if f.startswith(os.path.normpath(s) + os.sep) or os.path.dirname(f) == os.path.normpath(s):
                local_tops.add(os.path.relpath(f, s).split(os.sep)[0].removesuffix(".lean"))
    imports = {}
    for f in files:
        imports[f] = imports_of(open(f, encoding="utf-8").read())
        for mod in imports[f]:
            top = name_parts(mod)[0]
            if resolve(mod):
                continue
            if top in local_tops:
                errors.append(f"{rel(f)}: imports {mod}, which has no module file "
                              f"({', '.join(rel(module_file(s, mod)) for s in srcdirs)})")
            elif top not in CORE and not has_require:
                errors.append(f"{rel(f)}: imports {mod}, a module of no package the lakefile "
                              "sees (core: Init, Std, Lean, Lake; no `require`)")

    # Module files no target builds: neither matched by a glob nor reached from a root.
    todo = list(built | {os.path.normpath(r) for r in roots_all})
    while todo:
        f = todo.pop()
        for mod in imports.get(f, []):
            g = resolve(mod)
            if g and os.path.normpath(g) not in built:
                built.add(os.path.normpath(g))
                todo.append(os.path.normpath(g))
    for f in files:
        if any(f.startswith(os.path.normpath(s) + os.sep) for s in srcdirs) and f not in built:
            errors.append(f"{rel(f)}: built by no target (no glob matches it and no root imports "
                          "it)")

    # Paths the build reads: pkg.dir / "a" / "b".
    for m in re.finditer(r'pkg\.dir((?:\s*/\s*"[^"]*")+)', code):
        parts = re.findall(r'"([^"]*)"', m.group(1))
        p = os.path.join(lean_dir, *parts)
        if not os.path.exists(p):
            errors.append(f"{rel(lakefile)}: builds from {'/'.join(parts)}, which does not exist")
    if not os.path.isfile(os.path.join(lean_dir, "lean-toolchain")):
        errors.append("lean-toolchain: missing")
    return errors


_SELF_TESTS = [
    # (what, {path: text}, substrings the failures must contain; [] = passes)
    ("a lean_lib without roots and no root module (the lakefile before the root was generated)",
     {"lakefile.lean": "import Lake\nopen Lake DSL\npackage p where\n\n@[default_target]\n"
                       "lean_lib Foo where\n  precompileModules := false\n",
      "Foo/Ffi.lean": "namespace Foo\nend Foo\n"},
     ["root `Foo has no module file Foo.lean", "glob .one `Foo matches no file",
      "Foo/Ffi.lean: built by no target"]),
    ("the generated layout: a root importing its submodule",
     {"lakefile.lean": "import Lake\nopen Lake DSL\npackage p where\n\nlean_lib Foo where\n"
                       "  roots := #[`Foo]\n  precompileModules := false\n",
      "Foo.lean": "/- banner -/\nimport Foo.Ffi\n/-! doc -/\n",
      "Foo/Ffi.lean": "-- x\nimport Lean.Data.Json\nnamespace Foo\nend Foo\n"}, []),
    ("an import of a module that does not exist",
     {"lakefile.lean": "import Lake\nopen Lake DSL\npackage p where\nlean_lib Foo\n",
      "Foo.lean": "import Foo.Ffi\nimport Foo.Missing\n", "Foo/Ffi.lean": "import Bar.Baz\n"},
     ["Foo.lean: imports Foo.Missing, which has no module file",
      "Foo/Ffi.lean: imports Bar.Baz, a module of no package"]),
    ("roots and globs naming no file; a path the build reads that is missing",
     {"lakefile.lean": "import Lake\nopen Lake DSL\npackage p where\n  srcDir := \"src\"\n"
                       "lean_lib Foo where\n  roots := #[`Foo, `Foo.Gone]\n"
                       "  globs := #[.andSubmodules `Foo, .submodules `Qux, Glob.one `Foo.Gone]\n"
                       "target x pkg : FilePath := do\n"
                       "  let src ← inputTextFile <| pkg.dir / \"c\" / \"shim.c\"\n",
      "src/Foo.lean": "import Foo.A\n", "src/Foo/A.lean": ""},
     ["root `Foo.Gone has no module file src/Foo/Gone.lean", "glob .submodules `Qux matches no file",
      "glob .one `Foo.Gone matches no file", "builds from c/shim.c, which does not exist"]),
]


def self_test():
    """Runs check() on small fabricated packages: the check must fail where Lake would."""
    import tempfile
    bad = 0
    for what, tree, want in _SELF_TESTS:
        with tempfile.TemporaryDirectory() as d:
            for path, text in dict(tree, **{"lean-toolchain": "leanprover/lean4:v4.22.0\n"}).items():
                os.makedirs(os.path.dirname(os.path.join(d, path)), exist_ok=True)
                with open(os.path.join(d, path), "w", encoding="utf-8") as f:
                    f.write(text)
            errors = check(d)
        missing = [w for w in want if not any(w in e for e in errors)]
        ok = (not errors) if not want else (not missing and len(errors) == len(want))
        if not ok:
            bad += 1
            print(f"SELF-TEST FAIL: {what}: expected {want or 'no failure'}, got {errors}")
    print(f"lean_lake_modules self-test: {len(_SELF_TESTS) - bad}/{len(_SELF_TESTS)} cases as expected")
    return 1 if bad else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    lean_dir = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "lean"))
    errors = check(lean_dir)
    for e in errors:
        print(f"FAIL: {e}")
    print(f"lean_lake_modules: {lean_dir}: " + (f"{len(errors)} failure(s)" if errors else
          "every root, glob and import resolves to a module file"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
