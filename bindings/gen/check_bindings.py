#!/usr/bin/env python3
"""Checks the generated Rust, Lean 4 and Julia bindings against the C headers and the map.

    python3 bindings/gen/check_bindings.py [--abi DIR] [--bindings DIR]

Independent of the generator's emitters: it reads the generated text back and maps each binding's
types to C types with its own tables. For every symbol of abi/torchlean_rt.map (which must be
declared in a header):
  * Rust (torchlean-rt-sys/src/lib.rs): exactly one `pub fn tlrt_x(...)` whose parameter types
    and result type, mapped back to C, are the header's exactly (constness included);
  * Lean C shim (lean/c/tlrt_lean_shim.c): exactly one function tlrt_lean_<x> (a LEAN_EXPORT
    wrapper, or the static finalizer for tlrt_buffer_free / tlrt_tape_free /
    tlrt_safetensors_close) that calls tlrt_x
    exactly once, with one argument per header parameter, each cast to the header's type;
  * Lean declarations (lean/TorchleanRt/Ffi.lean): every @[extern "tlrt_lean_<x>"] names a shim
    wrapper and vice versa, and the Lean parameters match the C ones in number and kind
    (object @& -> b_lean_obj_arg, UInt64 -> uint64_t, UInt32 -> uint32_t, Float -> double, Bool /
    UInt8 -> uint8_t, USize -> size_t) plus the trailing world argument of the pinned toolchain's IO convention;
  * Julia (julia/TorchleanRT.jl): exactly one raw `tlrt_x(...) = @ccall libtorchlean_rt.tlrt_x(...)`
    whose argument and result types map back to the header's (Julia has no const);
  * Python (python/torchlean_rt/_torchlean_rt_abi.py, the declarations the package binds through
    ctypes, read back as literals): exactly one prototype with the header's types, names and header;
    the status enum, the other enums (tlrt_dtype), defines and structs equal the headers'; every
    C type has a ctypes spelling;
the values of the headers' other enums (tlrt_dtype) are constants of the Rust, Lean and Julia
bindings; and every call of a tlrt_ function in the safe layers (Rust ops.rs, lib.rs and
checkpoint.rs `sys::tlrt_x(`, Julia `C.tlrt_x(`) passes as many arguments as the header
declares. Exits 1 listing every mismatch.
"""
import argparse
import ast
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tlrt_abi as A  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))

_RS = {"tlrt_status": "tlrt_status", "u32": "uint32_t", "u64": "uint64_t", "u8": "uint8_t",
       "i32": "int32_t", "i64": "int64_t", "f64": "double", "f32": "float", "bool": "bool", "tlrt_device": "tlrt_device",
       "c_int": "int", "c_char": "char", "tlrt_buffer": "tlrt_buffer", "tlrt_tape": "tlrt_tape",
       "tlrt_safetensors": "tlrt_safetensors",
       "tlrt_allocator_stats": "tlrt_allocator_stats", "c_void": "void"}
_JL = {"Cint": "int", "UInt32": "uint32_t", "UInt64": "uint64_t", "UInt8": "uint8_t",
       "Int32": "int32_t", "Int64": "int64_t",
       "Cdouble": "double", "Cfloat": "float", "Bool": "bool", "Cvoid": "void", "Cchar": "char",
       "tlrt_buffer": "tlrt_buffer", "tlrt_tape": "tlrt_tape",
       "tlrt_safetensors": "tlrt_safetensors",
       "tlrt_allocator_stats": "tlrt_allocator_stats"}
_LEAN_C = {"UInt64": "uint64_t", "UInt32": "uint32_t", "UInt8": "uint8_t", "Float": "double",
           "Bool": "uint8_t", "USize": "size_t",
           # Lean's Int32 (a C int parameter) is compiled as its two's complement bits
           "Int32": "uint32_t"}


def c_of_rust(t):
    """'*const tlrt_buffer' -> 'const tlrt_buffer *'; '*mut *mut tlrt_buffer' -> 'tlrt_buffer **';
    '*const *const c_char' -> 'const char * const *'."""
    t = t.strip()
    ptrs = []
    while t.startswith("*"):
        m = re.match(r"\*(const|mut)\s+(.*)", t)
        ptrs.append(m.group(1))
        t = m.group(2).strip()
    if t not in _RS:
        return f"<rust {t}>"
    base = _RS[t]
    if not ptrs:
        return base
    # Each Rust pointer's constness is its pointee's: the innermost one's qualifies the base type,
    # an outer one's the pointer it points to (a C "* const" one level further in).
    c = ("const " if ptrs[-1] == "const" else "") + base
    for k in range(len(ptrs) - 1, 0, -1):
        c += " *" + (" const" if ptrs[k - 1] == "const" else "")
    return A.norm_type(c + " *")


def c_of_julia(t):
    t = t.strip()
    if t == "Cstring":
        return "char *"
    n = 0
    while t.startswith("Ptr{") and t.endswith("}"):
        t, n = t[4:-1], n + 1
    if t not in _JL:
        return f"<julia {t}>"
    return A.norm_type(_JL[t] + " " + "*" * n) if n else _JL[t]


def unconst(t):
    return A.norm_type(t.replace("const ", ""))


# C scalar typedefs the Julia side spells by their definition
_JL_ALIAS = {"tlrt_status": "int", "tlrt_device": "uint32_t"}


def julia_norm(t):
    t = unconst(t)
    base = t.replace("*", "").strip()
    return A.norm_type(t.replace(base, _JL_ALIAS.get(base, base), 1))


def split_args(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def call_args(text, start):
    """Arguments of the call whose '(' is at text[start]."""
    depth, i = 0, start
    while True:
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return split_args(text[start + 1:i])
        i += 1


def c_functions(text):
    """{name: (params string, body)} of the C function definitions tlrt_lean_*."""
    funcs = {}
    for m in re.finditer(r"^(?:LEAN_EXPORT lean_obj_res|static void) (tlrt_lean_\w+)\(([^)]*)\) \{",
                         text, flags=re.M):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if m.group(1) in funcs:
            funcs[m.group(1)] = None  # defined twice: reported below
        else:
            funcs[m.group(1)] = (m.group(2), text[m.end():i - 1])
    return funcs


def check(abi_dir, bdir):
    abi = A.parse_abi(abi_dir)
    protos = {p.name: p for p in abi.protos}
    for sname in abi.structs:  # each binding spells a struct of the headers by its C name
        _RS.setdefault(sname, sname)
        _JL.setdefault(sname, sname)
    for ename in abi.enum_types:  # an enum type (tlrt_dtype): its C name in Rust, Cint in Julia
        _RS.setdefault(ename, ename)
        _JL_ALIAS.setdefault(ename, "int")
    errors = []
    missing = [s for s in abi.map_symbols if s not in protos]
    errors += [f"map: {s} is not declared in any header" for s in missing]
    symbols = [s for s in abi.map_symbols if s in protos]
    unmapped = sorted(set(protos) - set(abi.map_symbols))

    def read(rel):
        with open(os.path.join(bdir, rel), encoding="utf-8") as f:
            return f.read()

    # ---- Rust
    rs = read("rust/torchlean-rt-sys/src/lib.rs")
    decls = {}
    for m in re.finditer(r"pub fn (tlrt_\w+)\(([^)]*)\)(?:\s*->\s*([^;]+))?;", rs):
        decls.setdefault(m.group(1), []).append((m.group(2), m.group(3)))
    for s in symbols:
        p = protos[s]
        d = decls.get(s, [])
        if len(d) != 1:
            errors.append(f"rust: {s} declared {len(d)} times")
            continue
        args = [a.split(":", 1)[1] for a in split_args(d[0][0])]
        got = [c_of_rust(a) for a in args]
        want = [t for t, _ in p.params]
        if got != want:
            errors.append(f"rust: {s} parameters {got} != header {want}")
        ret = c_of_rust(d[0][1]) if d[0][1] else "void"
        if ret != p.restype:
            errors.append(f"rust: {s} returns {ret}, header {p.restype}")
    ops = (read("rust/torchlean-rt/src/ops.rs") + read("rust/torchlean-rt/src/lib.rs")
           + read("rust/torchlean-rt/src/checkpoint.rs"))
    for m in re.finditer(r"sys::(tlrt_\w+)\(", ops):
        if m.group(1) in protos:
            n = len(call_args(ops, m.end() - 1))
            if n != len(protos[m.group(1)].params):
                errors.append(f"rust safe: call of {m.group(1)} with {n} arguments, header has "
                              f"{len(protos[m.group(1)].params)}")

    # ---- Lean shim
    shim = read("lean/c/tlrt_lean_shim.c")
    funcs = c_functions(shim)
    for s in symbols:
        p = protos[s]
        f = funcs.get("tlrt_lean_" + s[5:], "absent")
        if f == "absent" or f is None:
            errors.append(f"lean shim: tlrt_lean_{s[5:]} {'missing' if f == 'absent' else 'defined twice'}")
            continue
        body = f[1]
        calls = [m for m in re.finditer(r"\b" + s + r"\(", body)]
        if len(calls) != 1:
            errors.append(f"lean shim: tlrt_lean_{s[5:]} calls {s} {len(calls)} times")
            continue
        args = call_args(body, calls[0].end() - 1)
        if len(args) != len(p.params):
            errors.append(f"lean shim: {s} called with {len(args)} arguments, header has {len(p.params)}")
            continue
        for a, (t, n) in zip(args, p.params):
            cm = re.match(r"^\(([^()]*)\)", a)
            if not cm or A.norm_type(cm.group(1)) != t:
                errors.append(f"lean shim: {s} argument {n}: {a!r} is not cast to {t!r}")
    # ---- Lean declarations vs shim
    ffi = read("lean/TorchleanRt/Ffi.lean")
    externs = {}
    for m in re.finditer(r'@\[extern "(tlrt_lean_\w+)"\] opaque (\S+)((?: \([^()]*\))*) : (.+)', ffi):
        externs.setdefault(m.group(1), []).append((m.group(2), m.group(3), m.group(4)))
    exported = {n for n, v in funcs.items() if v and re.search(r"^LEAN_EXPORT lean_obj_res " + n + r"\(",
                                                            shim, flags=re.M)}
    for name in sorted(exported | set(externs)):
        e = externs.get(name, [])
        if len(e) != 1 or name not in exported:
            errors.append(f"lean: {name}: {len(e)} @[extern] declarations, "
                          f"{'a' if name in exported else 'no'} shim wrapper")
            continue
        lean_params = re.findall(r"\(([^():]+) : ([^()]*)\)", e[0][1])
        cparams = [c.strip() for c in split_args(funcs[name][0])]
        if not e[0][2].startswith("IO"):
            errors.append(f"lean: {name} is not in IO")
        world = cparams[-1:] == ["lean_obj_arg w"]
        if not world:
            errors.append(f"lean: {name}: no trailing world argument (pinned toolchain convention)")
        cparams = cparams[:-1] if world else cparams
        if len(cparams) != len(lean_params):
            errors.append(f"lean: {name}: {len(lean_params)} Lean parameters, {len(cparams)} in C")
            continue
        for (ln, lt), cp in zip(lean_params, cparams):
            lt = lt.strip()
            ctype = cp.rsplit(" ", 1)[0]
            want = "b_lean_obj_arg" if lt.startswith("@&") else _LEAN_C.get(lt, f"<lean {lt}>")
            if ctype != want:
                errors.append(f"lean: {name}: parameter {ln} : {lt} is {ctype} in C, expected {want}")
    # finalizers
    for s, fin in (("tlrt_buffer_free", "tlrt_lean_buffer_free"),
                   ("tlrt_tape_free", "tlrt_lean_tape_free"),
                   ("tlrt_safetensors_close", "tlrt_lean_safetensors_close")):
        if s in symbols and not re.search(r"lean_register_external_class\(\s*" + fin + ", ", shim):
            errors.append(f"lean shim: {fin} is not registered as a finalizer")

    # ---- Julia
    jl = read("julia/TorchleanRT.jl")
    raw = {}
    for m in re.finditer(r"^(tlrt_\w+)\(([^)]*)\) = @ccall libtorchlean_rt\.(tlrt_\w+)\((.*)\)::(\S+)$",
                         jl, flags=re.M):
        if m.group(1) != m.group(3):
            errors.append(f"julia: {m.group(1)} calls {m.group(3)}")
        raw.setdefault(m.group(1), []).append((m.group(4), m.group(5)))
    for s in symbols:
        p = protos[s]
        d = raw.get(s, [])
        if len(d) != 1:
            errors.append(f"julia: {s} bound {len(d)} times")
            continue
        got = [c_of_julia(a.split("::", 1)[1]) for a in split_args(d[0][0])]
        want = [julia_norm(t) for t, _ in p.params]
        if got != want:
            errors.append(f"julia: {s} parameters {got} != header {want}")
        if c_of_julia(d[0][1]) != julia_norm(p.restype):
            errors.append(f"julia: {s} returns {d[0][1]}, header {p.restype}")
    for m in re.finditer(r"\bC\.(tlrt_\w+)\(", jl):
        if m.group(1) in protos:
            n = len(call_args(jl, m.end() - 1))
            if n != len(protos[m.group(1)].params):
                errors.append(f"julia: call of C.{m.group(1)} with {n} arguments, header has "
                              f"{len(protos[m.group(1)].params)}")

    # ---- the values of the other enums (tlrt_dtype), as constants of each binding
    for ename, items in abi.enum_types.items():
        if not re.search(r"^pub type " + ename + r" = c_int;$", rs, flags=re.M):
            errors.append(f"rust: no `pub type {ename} = c_int;`")
        for n, v in items.items():
            for where, text, pat in (
                    ("rust", rs, r"^pub const " + n + r": " + ename + r" = (\w+);$"),
                    ("lean", ffi, r"^def " + n + r" : UInt32 := (\w+)$"),
                    ("julia", jl, r"^const " + n + r" = Cint\((\w+)\)$")):
                got = re.findall(pat, text, flags=re.M)
                if len(got) != 1 or int(got[0], 0) != v:
                    errors.append(f"{where}: {ename} value {n} defined as {got}, header {v}")

    # ---- Python (the declarations torchlean_rt.py binds; read back as literals, never executed)
    errors += check_python_decls(read("python/torchlean_rt/_torchlean_rt_abi.py"), abi, protos, symbols)
    return errors, symbols, unmapped


def check_python_decls(text, abi, protos, symbols):
    """python/torchlean_rt/_torchlean_rt_abi.py: only literal assignments; exactly one prototype per map symbol
    with the header's types and names (doc comments: bindings_generated_fresh); the status enum,
    defines and structs the headers'; every C type in CTYPES with a ctypes spelling of the right
    shape (pointer for pointer)."""
    errors = []
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        return [f"python: not Python: {e}"]
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            return [f"python: line {node.lineno}: not a plain assignment (data only)"]
        v = node.value
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "frozenset" \
                and len(v.args) == 1:
            v = v.args[0]
        try:
            values[node.targets[0].id] = ast.literal_eval(v)
        except ValueError:
            return [f"python: line {node.lineno}: {node.targets[0].id} is not a literal"]
    need = ("HEADERS", "PROTOTYPES", "STATUS", "ENUMS", "DEFINES", "STRUCTS", "CTYPES")
    if any(k not in values for k in need):
        return [f"python: missing {[k for k in need if k not in values]}"]
    decl = {}
    for d in values["PROTOTYPES"]:
        decl.setdefault(d[0], []).append(d)
    for s in symbols:
        p, d = protos[s], decl.get(s, [])
        if len(d) != 1:
            errors.append(f"python: {s} declared {len(d)} times")
            continue
        _, restype, params, header, _doc = d[0]  # a stale doc is bindings_generated_fresh's
        if (restype, [tuple(x) for x in params], header) != (p.restype, p.params, p.header):
            errors.append(f"python: {s} declared as {restype} ({params}) in {header}, header: {p!r}"
                          f" in {p.header}")
    extra = sorted(set(decl) - set(protos))
    if extra:
        errors.append(f"python: declared but in no header: {extra}")
    if values["STATUS"] != abi.enums:
        errors.append("python: STATUS differs from the tlrt_status enum")
    if values["ENUMS"] != abi.enum_types:
        errors.append("python: ENUMS differ from the headers' other enums (tlrt_dtype)")
    if values["DEFINES"] != {n: v for n, (v, _) in abi.defines.items()}:
        errors.append("python: DEFINES differ from the headers' integer #defines")
    if {n: [tuple(f) for f in fs] for n, fs in values["STRUCTS"].items()} != abi.structs:
        errors.append("python: STRUCTS differ from the headers' structs")
    if list(values["HEADERS"]) != abi.headers:
        errors.append("python: HEADERS differ from the parsed headers")
    ctypes_of = values["CTYPES"]
    used = {t for p in abi.protos for t in [p.restype] + [t for t, _ in p.params] if t != "void"}
    used |= {t for fs in abi.structs.values() for t, _ in fs}
    for t in sorted(used):
        c = ctypes_of.get(t)
        if c is None:
            errors.append(f"python: C type {t!r} has no ctypes spelling")
        elif ("*" in t) != (c.startswith("POINTER(") or c in ("c_void_p", "c_char_p")):
            errors.append(f"python: C type {t!r} spelled {c!r}")
        elif c.startswith("POINTER(") and c[8:-1] not in abi.structs and not c[8:-1].startswith("c_") \
                and not c[8:-1].startswith("POINTER("):
            errors.append(f"python: C type {t!r} spelled {c!r}: an unknown pointee")
    return errors


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--abi", default=os.path.join(REPO, "abi"))
    ap.add_argument("--bindings", default=os.path.join(REPO, "bindings"))
    a = ap.parse_args(argv)
    errors, symbols, unmapped = check(a.abi, a.bindings)
    for e in errors:
        print("check_bindings: " + e)
    if unmapped:
        print(f"check_bindings: note: {len(unmapped)} header functions are not in torchlean_rt.map "
              f"(bound anyway; tests/abi checks the map): {', '.join(unmapped)}")
    print(f"check_bindings: {len(symbols)} map symbols x 5 bindings (Rust, Lean shim + decls, "
          f"Julia, Python declarations): {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
