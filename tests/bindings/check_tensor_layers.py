#!/usr/bin/env python3
"""check_tensor_layers.py [BINDINGS_DIR | --self-test]: checks the hand-written Tensor layers of the
Julia and Lean bindings against the generated code they call, without Julia or Lean (neither is
installable here). BINDINGS_DIR defaults to bindings/.

Julia (julia/Tensor.jl, included by the generated julia/TorchleanRT.jl):
  * the generated module includes every hand-written file once, after its last generated
    function and before `end # module TorchleanRT`, and the file exists;
  * every `C.tlrt_x(...)` call names a raw binding of the generated module C with its number of
    arguments; every `C.TLRT_X` and `:TLRT_X` (the status of `_tensor_error`) is a constant of C;
  * every call of a function of the generated module (`buffer_size(b)`, `TorchleanRT.add(a, b)`,
    `TorchleanRTError(...)`, ...) passes a number of positional arguments that one of its
    generated methods accepts, or one that Tensor.jl's own methods of that name accept (Tensor.jl
    extends add, exp, ... to tensors); a splatted argument is refused (its count is unknown);
  * every exported name is defined; no function Tensor.jl defines unqualified is named like a
    function the generated code calls unqualified (`zeros(UInt64, n)`, ...: inside the module,
    such a definition would replace Base's function for the generated code too).
Lean (lean/TorchleanRt/Tensor.lean, imported by the generated root lean/TorchleanRt.lean):
  * the root module imports it, and it imports TorchleanRt.Ffi;
  * every `Ffi.name` is an `opaque` / `def` of namespace Ffi in lean/TorchleanRt/Ffi.lean and is
    applied to exactly its number of explicit parameters (write each call on one line); an
    argument `x.buf` sits at a `Buffer` parameter, `x.shape` at an `Array UInt64` one, `true` /
    `false` at a `Bool` one;
  * every `TLRT_X` it names is a `def` of Ffi.lean, and every `tensorError "TLRT_X" C` pairs a
    status name with the same constant;
Both: the table of broadcasting cases of julia/test/runtests.jl (BROADCAST_CASES) and the
`#guard broadcastShape ...` lines of Tensor.lean are exactly BROADCAST_CASES below, whose
expected shapes this script recomputes with its reference rule (and with numpy where importable).
The Lean #guards run whenever Tensor.lean is compiled; runtests.jl where Julia is installed.

--self-test runs the checks on small fabricated trees (a wrong name, a wrong arity, a wrong
argument kind, a missing include / import, a shadowing definition, a stale table, ...) and fails
unless each is reported, and unless a well-formed tree passes. Exit 0 when all hold, 1 listing
every failure. Pure stdlib.
"""
import ast
import os
import re
import sys

sys.dont_write_bytecode = True

STATS = {"julia calls": 0, "lean calls": 0}  # calls checked, for the summary line

# (a, b, the NumPy broadcast of a and b, or None when they do not broadcast)
BROADCAST_CASES = [
    ((), (), ()),
    ((), (3,), (3,)),
    ((2, 3), (), (2, 3)),
    ((2, 3), (2, 3), (2, 3)),
    ((2, 3), (3,), (2, 3)),
    ((2, 3), (1, 3), (2, 3)),
    ((2, 1), (1, 3), (2, 3)),
    ((4, 1, 3), (5, 1), (4, 5, 3)),
    ((1,), (7,), (7,)),
    ((0,), (1,), (0,)),
    ((2, 0), (2, 1), (2, 0)),
    ((8, 1, 6, 1), (7, 1, 5), (8, 7, 6, 5)),
    ((2, 3), (4,), None),
    ((2, 3), (3, 2), None),
    ((0,), (3,), None),
    ((2, 1), (8, 4, 3), None),
]


def reference_broadcast(a, b):
    """NumPy's rule: aligned at the last axis, a missing axis is 1, 1 stretches; None if not."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            return None
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def check_reference():
    errors = []
    for a, b, want in BROADCAST_CASES:
        for x, y in ((a, b), (b, a)):
            if reference_broadcast(x, y) != want:
                errors.append(f"reference: broadcast of {x} and {y} is {reference_broadcast(x, y)},"
                              f" the table says {want}")
    try:
        import numpy as np
    except ImportError:
        return errors
    for a, b, want in BROADCAST_CASES:
        try:
            got = tuple(np.broadcast_shapes(a, b))
        except ValueError:
            got = None
        if got != want:
            errors.append(f"reference: numpy broadcasts {a} and {b} to {got}, the table says "
                          f"{want}")
    return errors


# ---- shared text helpers -------------------------------------------------------------------------

def split_top(s, sep=","):
    """s split at `sep` outside brackets (strings are already blanked)."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{⟨":
            depth += 1
        elif ch in ")]}⟩":
            depth -= 1
        if ch == sep and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def balanced(text, i, open_ch, close_ch):
    """Index just past the bracket closing the one at text[i] (or len(text))."""
    depth = 0
    while i < len(text):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


# ---- Julia ---------------------------------------------------------------------------------------

def strip_julia(text):
    """Comments removed and string literals blanked to "" (docstrings, interpolations included);
    newlines kept so that positions map to lines."""
    out, i, n = [], 0, len(text)

    def skip_string(i):
        """i at the opening quote(s); returns the index past the closing ones."""
        triple = text.startswith('"""', i)
        q = '"""' if triple else '"'
        i += len(q)
        while i < n:
            if text[i] == "\\":
                i += 2
            elif text.startswith("$(", i):
                i = skip_code(i + 1)
            elif text.startswith(q, i):
                return i + len(q)
            else:
                i += 1
        return n

    def skip_code(i):
        """i at '(' of an interpolation; returns the index past its ')'."""
        depth = 0
        while i < n:
            if text[i] == '"':
                i = skip_string(i)
                continue
            if text[i] == "(":
                depth += 1
            elif text[i] == ")":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return n

    while i < n:
        if text.startswith("#=", i):
            depth, j = 0, i
            while j < n:
                if text.startswith("#=", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("=#", j):
                    depth, j = depth - 1, j + 2
                    if depth == 0:
                        break
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text[i] == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] == '"':
            j = skip_string(i)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def julia_arity(params):
    """(min, max) positional arguments of a parameter list (max None: varargs)."""
    pos = split_top(split_top(params, ";")[0]) if params.strip() else []
    lo, hi = 0, 0
    for p in pos:
        if p.endswith("...") or re.search(r"::\s*Vararg\b", p):
            hi = None
        elif re.search(r"(?<![=!<>])=(?!=)", p):
            hi = None if hi is None else hi + 1
        else:
            lo += 1
            hi = None if hi is None else hi + 1
    return lo, hi


def julia_call_args(args):
    """The positional arguments of a call's argument text (keywords dropped)."""
    pos = split_top(split_top(args, ";")[0]) if args.strip() else []
    return [a for a in pos if not re.match(r"^[A-Za-z_]\w*\s*=(?!=)", a)]


_JL_NAME = r"[A-Za-z_][A-Za-z_0-9]*!?"


def julia_definitions(code):
    """{name: [(min, max)]} of the unqualified functions defined in `code` (long and short forms)
    and the set of other names defined (structs, consts)."""
    defs, others = {}, set()
    for m in re.finditer(r"(?<![\w.:!$@])(" + _JL_NAME + r")\(", code):
        end = balanced(code, m.end() - 1, "(", ")")
        if is_julia_definition(code, m.start(), end):
            defs.setdefault(m.group(1), []).append(julia_arity(code[m.end():end - 1]))
    for m in re.finditer(r"^\s*(?:mutable\s+)?struct\s+(" + _JL_NAME + r")", code, flags=re.M):
        others.add(m.group(1))
    for m in re.finditer(r"^\s*const\s+(" + _JL_NAME + r")\s*=", code, flags=re.M):
        others.add(m.group(1))
    return defs, others


def is_julia_definition(code, start, end):
    """Whether the call-shaped `name(...)` spanning code[start:end] is a method definition."""
    if re.search(r"\bfunction\s+$", code[max(0, start - 20):start]):
        return True
    rest = code[end:end + 200]
    m = re.match(r"\s*(?:::\s*[\w.{}, <:]+?)?\s*(?:where\s*(?:\{[^}]*\}|[\w<:]+)\s*)*=(?!=)", rest)
    return bool(m)


def julia_calls(code):
    """[(name, qualified, args text, position)] of the unqualified (or TorchleanRT.-qualified)
    calls in `code` that are not definitions."""
    out = []
    for m in re.finditer(r"(?<![\w.:!$@])(TorchleanRT\.)?(" + _JL_NAME + r")\(", code):
        end = balanced(code, m.end() - 1, "(", ")")
        if not m.group(1) and is_julia_definition(code, m.start(), end):
            continue
        out.append((m.group(2), bool(m.group(1)), code[m.end():end - 1], m.start()))
    return out


def parse_generated_julia(text):
    """What the generated module offers: raw C functions {name: nargs}, C constants, the main
    module's functions {name: [(min, max)]} (struct constructors included), the names its code
    calls unqualified, and its `include` lines."""
    cm = re.search(r"^module C\b(.*?)^end # module C", text, flags=re.S | re.M)
    csec = strip_julia(cm.group(1)) if cm else ""
    main = strip_julia(text[:cm.start()] + text[cm.end():] if cm else text)
    raw = {}
    for m in re.finditer(r"^(tlrt_\w+)\(([^)]*)\) = @ccall", csec, flags=re.M):
        raw[m.group(1)] = len(split_top(m.group(2)))
    consts = set(re.findall(r"^const\s+(\w+)\s*=", csec, flags=re.M))
    funcs, others = julia_definitions(main)
    for m in re.finditer(r"^\s*(?:mutable\s+)?struct\s+(\w+)(.*?)^\s*end\b", main,
                         flags=re.S | re.M):
        fields = re.findall(r"^\s*(\w+)::", m.group(2), flags=re.M)
        if not re.search(r"\bfunction\s+" + m.group(1) + r"\(", m.group(2)):
            funcs.setdefault(m.group(1), []).append((len(fields), len(fields)))
    called = {name for name, q, _, _ in julia_calls(main) if not q}
    includes = [(m.group(1), m.start()) for m in
                re.finditer(r'^include\("([^"]+)"\)', text, flags=re.M)]
    return raw, consts, funcs, others, called, includes


def check_julia(jdir, hand_written=("Tensor.jl",)):
    errors = []
    gen_path = os.path.join(jdir, "TorchleanRT.jl")
    if not os.path.isfile(gen_path):
        return [f"julia: {gen_path} missing"]
    gen = open(gen_path, encoding="utf-8").read()
    raw, consts, funcs, _others, gen_called, includes = parse_generated_julia(gen)
    end_mod = gen.rfind("end # module TorchleanRT")
    last_fn = max((m.start() for m in re.finditer(r"^function ", gen, flags=re.M)), default=0)
    for f in hand_written:
        pos = [p for name, p in includes if name == f]
        if len(pos) != 1:
            errors.append(f"julia: TorchleanRT.jl includes {f} {len(pos)} times, expected once")
        elif not (last_fn < pos[0] < end_mod):
            errors.append(f"julia: include(\"{f}\") is not between the last generated function "
                          "and `end # module TorchleanRT`")
        path = os.path.join(jdir, f)
        if not os.path.isfile(path):
            errors.append(f"julia: {f} (included by TorchleanRT.jl) does not exist")
            continue
        errors += check_julia_file(f, open(path, encoding="utf-8").read(), raw, consts, funcs,
                                   gen_called)
    return errors


def check_julia_file(fname, text, raw, consts, funcs, gen_called):
    errors = []
    code = strip_julia(text)
    own, own_others = julia_definitions(code)
    for m in re.finditer(r"(?<![\w.])C\.(tlrt_\w+)\(", code):
        if m.group(1) not in raw:
            errors.append(f"julia: {fname}:{line_of(code, m.start())}: C.{m.group(1)} is not a "
                          "raw binding of the generated module C")
            continue
        n = len(julia_call_args(code[m.end():balanced(code, m.end() - 1, '(', ')') - 1]))
        STATS["julia calls"] += 1
        if n != raw[m.group(1)]:
            errors.append(f"julia: {fname}:{line_of(code, m.start())}: C.{m.group(1)} called with "
                          f"{n} arguments, the header has {raw[m.group(1)]}")
    for m in re.finditer(r"(?<![\w.])C\.(TLRT_\w+)|(?<![\w:]):(TLRT_\w+)", code):
        name = m.group(1) or m.group(2)
        if name not in consts:
            errors.append(f"julia: {fname}:{line_of(code, m.start())}: {name} is not a constant "
                          "of the generated module C")
    for name, qualified, args, pos in julia_calls(code):
        if name not in funcs:
            if qualified and name not in own and name not in own_others:
                errors.append(f"julia: {fname}:{line_of(code, pos)}: TorchleanRT.{name} is "
                              "defined neither by the generated module nor here")
            continue
        pargs = julia_call_args(args)
        if any(a.endswith("...") for a in pargs):
            errors.append(f"julia: {fname}:{line_of(code, pos)}: {name}(...) with a splatted "
                          "argument: its arity cannot be checked (pass the arguments one by one)")
            continue
        n = len(pargs)
        STATS["julia calls"] += 1
        ranges = funcs[name] + own.get(name, [])
        if not any(lo <= n and (hi is None or n <= hi) for lo, hi in ranges):
            accepted = sorted({f"{lo}" if lo == hi else f"{lo}..{'' if hi is None else hi}"
                               for lo, hi in ranges})
            errors.append(f"julia: {fname}:{line_of(code, pos)}: {name} called with {n} "
                          f"arguments; its methods take {', '.join(accepted)}")
    for m in re.finditer(r"^\s*export\s+(.+)$", code, flags=re.M):
        for name in (x.strip() for x in m.group(1).split(",")):
            if name and name not in own and name not in own_others and name not in funcs:
                errors.append(f"julia: {fname}: exports {name}, which is not defined")
    for name in sorted(set(own) | own_others):
        if name not in funcs and name in gen_called:
            errors.append(f"julia: {fname}: defines {name}, a name the generated code calls "
                          f"unqualified (Base.{name}): inside the module it would replace it")
    return errors


def julia_broadcast_table(text):
    m = re.search(r"^const BROADCAST_CASES = \[(.*?)^\]", text, flags=re.S | re.M)
    if not m:
        return None
    body = re.sub(r"#[^\n]*", "", m.group(1)).replace("nothing", "None")
    return [tuple(x) for x in ast.literal_eval("[" + body + "]")]


# ---- Lean ----------------------------------------------------------------------------------------

def strip_lean(text):
    """Comments removed (nested /- -/, doc comments, --) and string literals blanked to ""."""
    out, i, depth, n = [], 0, 0, len(text)
    while i < n:
        if text.startswith("/-", i):
            depth += 1
            i += 2
        elif depth and text.startswith("-/", i):
            depth -= 1
            i += 2
        elif depth:
            out.append("\n" if text[i] == "\n" else "")
            i += 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


_LEAN_KEYWORDS = {"then", "else", "do", "with", "fun", "in", "let", "if", "match", "return", "by",
                  "at", "from", "where", "have", "show", "for", "unless", "mut", "try", "catch",
                  "finally", "throw", "pure"}
_LEAN_IDENT = re.compile(r"[A-Za-z_0-9][\w'.!?]*")


def lean_app_args(code, i):
    """The arguments of the application whose head ends at code[i]: atoms, identifiers (with
    projections and indexing), bracketed groups, each after a space; it ends at a newline, a
    closing bracket, an operator or a keyword."""
    args = []
    n = len(code)
    while True:
        j = i
        while j < n and code[j] in " \t":
            j += 1
        if j == i or j >= n or code[j] == "\n":
            return args
        c = code[j]
        if c == "(":
            k = balanced(code, j, "(", ")")
        elif code.startswith("#[", j):
            k = balanced(code, j + 1, "[", "]")
        elif c == "⟨":
            k = balanced(code, j, "⟨", "⟩")
        elif c == '"':
            k = code.index('"', j + 1) + 1
        else:
            m = _LEAN_IDENT.match(code, j)
            if not m or m.group(0) in _LEAN_KEYWORDS:
                return args
            k = m.end()
        # postfix projections / indexing glued to the atom: x.shape, (← e).toNat, a[0]!
        while k < n:
            if code[k] == "[":
                k = balanced(code, k, "[", "]")
                while k < n and code[k] in "!?":
                    k += 1
            elif code[k] == "." and k + 1 < n and re.match(r"[A-Za-z_]", code[k + 1]):
                k = _LEAN_IDENT.match(code, k + 1).end()
            else:
                break
        args.append(code[j:k])
        i = k


def parse_ffi_lean(text):
    """({name: [parameter types]} of namespace Ffi, the set of names of namespace TorchleanRt)."""
    code = strip_lean(text)
    decls = {}
    m = re.search(r"^namespace Ffi\b(.*?)^end Ffi\b", code, flags=re.S | re.M)
    body = m.group(1) if m else ""
    for d in re.finditer(r"(?:opaque|def)\s+([A-Za-z_][\w']*)((?:\s*\([^():]+:[^()]*\))*)\s*:",
                         body):
        types = []
        for b in re.finditer(r"\(([^():]+):([^()]*)\)", d.group(2)):
            types += [b.group(2).strip()] * len(b.group(1).split())
        decls[d.group(1)] = types
    top = set(re.findall(r"^(?:def|opaque|structure|abbrev)\s+([A-Za-z_][\w'.]*)", code,
                         flags=re.M))
    return decls, top


def lean_imports(text):
    return re.findall(r"^import\s+(\S+)", strip_lean(text), flags=re.M)


def lean_kind(arg):
    """The type an argument surely has, from its spelling (None: unknown)."""
    if re.search(r"\.buf$", arg):
        return "Buffer"
    if re.search(r"\.shape$", arg):
        return "Array UInt64"
    if arg in ("true", "false"):
        return "Bool"
    return None


def check_lean(ldir, hand_written="TorchleanRt/Tensor.lean", module="TorchleanRt.Tensor"):
    errors = []
    paths = {k: os.path.join(ldir, p) for k, p in (("root", "TorchleanRt.lean"),
                                                   ("ffi", "TorchleanRt/Ffi.lean"),
                                                   ("tensor", hand_written))}
    for k, p in paths.items():
        if not os.path.isfile(p):
            return [f"lean: {os.path.relpath(p, ldir)} missing"]
    root = open(paths["root"], encoding="utf-8").read()
    if module not in lean_imports(root):
        errors.append(f"lean: the root module TorchleanRt.lean does not import {module}")
    text = open(paths["tensor"], encoding="utf-8").read()
    if "TorchleanRt.Ffi" not in lean_imports(text):
        errors.append(f"lean: {hand_written} does not import TorchleanRt.Ffi")
    decls, top = parse_ffi_lean(open(paths["ffi"], encoding="utf-8").read())
    code = strip_lean(text)
    for m in re.finditer(r"(?<![\w.'])(?:TorchleanRt\.)?Ffi\.([A-Za-z_][\w']*)", code):
        name, where = m.group(1), f"{hand_written}:{line_of(code, m.start())}"
        if name not in decls:
            errors.append(f"lean: {where}: Ffi.{name} is not declared in TorchleanRt/Ffi.lean")
            continue
        args = lean_app_args(code, m.end())
        params = decls[name]
        STATS["lean calls"] += 1
        if len(args) != len(params):
            errors.append(f"lean: {where}: Ffi.{name} applied to {len(args)} arguments "
                          f"({' '.join(args)}), it has {len(params)} parameters")
            continue
        for a, t in zip(args, params):
            kind, want = lean_kind(a), re.sub(r"^@&\s*", "", t).strip()
            if kind is not None and kind != want:
                errors.append(f"lean: {where}: Ffi.{name}: argument {a} ({kind}) at a "
                              f"parameter of type {t}")
    for m in re.finditer(r"(?<![\w.'])(TLRT_[A-Z0-9_]+)", code):
        if m.group(1) not in top:
            errors.append(f"lean: {hand_written}:{line_of(code, m.start())}: {m.group(1)} is not "
                          "defined in TorchleanRt/Ffi.lean")
    for m in re.finditer(r'tensorError\s+"(\w+)"\s+(\w+)', text):
        if m.group(1) != m.group(2):
            errors.append(f"lean: {hand_written}:{line_of(text, m.start())}: tensorError names "
                          f"{m.group(1)} with the code {m.group(2)}")
    return errors


def lean_broadcast_table(text):
    def shape(s):
        return tuple(int(x) for x in s.split(",") if x.strip())
    out = []
    for m in re.finditer(r"^#guard broadcastShape #\[([^\]]*)\] #\[([^\]]*)\] == "
                         r"(?:some #\[([^\]]*)\]|(none))\s*$", strip_lean(text), flags=re.M):
        want = None if m.group(4) else shape(m.group(3))
        out.append((shape(m.group(1)), shape(m.group(2)), want))
    return out


def check_tables(bdir):
    errors = []
    jt = os.path.join(bdir, "julia", "test", "runtests.jl")
    lt = os.path.join(bdir, "lean", "TorchleanRt", "Tensor.lean")
    for where, path, parse in (
            ("julia/test/runtests.jl BROADCAST_CASES", jt, julia_broadcast_table),
            ("lean/TorchleanRt/Tensor.lean #guard broadcastShape", lt, lean_broadcast_table)):
        if not os.path.isfile(path):
            errors.append(f"table: {path} missing")
            continue
        got = parse(open(path, encoding="utf-8").read())
        if got != BROADCAST_CASES:
            missing = [c for c in BROADCAST_CASES if c not in (got or [])]
            extra = [c for c in (got or []) if c not in BROADCAST_CASES]
            errors.append(f"table: {where} differs from the reference table (missing {missing}, "
                          f"not in the reference {extra})")
    return errors


def check(bdir):
    return (check_reference() + check_julia(os.path.join(bdir, "julia"))
            + check_lean(os.path.join(bdir, "lean")) + check_tables(bdir))


# ---- self-test -----------------------------------------------------------------------------------

_GEN_JL = '''# GENERATED
module TorchleanRT
module C
tlrt_add(a, b, out) = @ccall lib.tlrt_add(a::Ptr{tlrt_buffer}, b::Ptr{tlrt_buffer}, out::Ptr{Ptr{tlrt_buffer}})::Cint
tlrt_broadcast_to(x, i, ir, o, orank, m, out) = @ccall lib.tlrt_broadcast_to(x::Ptr{tlrt_buffer})::Cint
const TLRT_ERR_SHAPE = Cint(3)
end # module C
struct TorchleanRTError <: Exception
    status::Int32
    name::String
    message::String
    func::String
end
mutable struct Buffer
    ptr::Ptr{C.tlrt_buffer}
    function Buffer(p::Ptr{C.tlrt_buffer})
        finalizer(free!, new(p))
    end
end
function add(a::Buffer, b::Buffer)
    """docs: add(a, b, c, d) is not a call"""
    o = zeros(UInt64, 1)   # Base.zeros, called unqualified
    Buffer(o)
end
function broadcast_to(x::Buffer, in_dims::AbstractVector{<:Integer}, out_dims::AbstractVector{<:Integer}, axis_map::AbstractVector{<:Integer})
    x
end
tape_new(device::Integer = CPU) = 1
%(include)s
end # module TorchleanRT
'''

_GOOD_TENSOR_JL = '''export Tensor
struct Tensor{T,N}
    buf::Buffer
    dims::NTuple{N,Int}
end
_err(name::Symbol, f, m) = TorchleanRTError(Int32(getfield(C, name)), String(name), m, f)
add(a::Tensor, b::Tensor) = _binary((x, y) -> add(x, y), a, b; func = "add")
function _expand(t::Tensor, dims)
    s = "add(1, 2, 3) in a string; $(add(t.buf, t.buf)) interpolated"
    C.tlrt_add(t.buf, t.buf, Ref(C_NULL))   # a raw call, three arguments
    t.dims == dims || throw(_err(:TLRT_ERR_SHAPE, "f", "m"))
    x = C.TLRT_ERR_SHAPE
    tape_new()
    tape_new(0)
    broadcast_to(t.buf, collect(Int, t.dims), collect(Int, dims), [0, 1])
end
'''

_BAD_TENSOR_JL = _GOOD_TENSOR_JL + '''export nothere
zeros(n) = n
function bad(t)
    C.tlrt_bogus(t)
    C.tlrt_add(t.buf, t.buf)
    y = C.TLRT_ERR_BOGUS
    throw(_err(:TLRT_NOPE, "f", "m"))
    broadcast_to(t.buf, [1], [2])
    TorchleanRT.add(t.buf)
    add(t.buf, t.buf, t.buf)
    broadcast_to(args...)
    tape_new(1, 2)
    TorchleanRTError(3, "x")
end
'''

_FFI_LEAN = '''/- GENERATED -/
namespace TorchleanRt
opaque BufferPointed : NonemptyType
def Buffer : Type := BufferPointed.type
def TLRT_ERR_SHAPE : UInt32 := 3
def TLRT_ERR_INDEX : UInt32 := 5
namespace Ffi
/-- `tlrt_add` (doc: Ffi.add x is not a call) -/
@[extern "tlrt_lean_add"] opaque add (a : @& Buffer) (b : @& Buffer) : IO Buffer
@[extern "tlrt_lean_buffer_size"] opaque bufferSize (buffer : @& Buffer) : IO UInt64
@[extern "tlrt_lean_broadcast_to"] opaque broadcastTo (x : @& Buffer) (in_dims : @& Array UInt64) (out_dims : @& Array UInt64) (axis_map : @& Array UInt32) : IO Buffer
@[extern "tlrt_lean_matmul"] opaque matmul (a : @& Buffer) (b : @& Buffer) (m : UInt64) (n : UInt64) (p : UInt64) (trans_a : Bool) (trans_b : Bool) : IO Buffer
end Ffi
end TorchleanRt
'''

_LEAN_GUARDS = "\n".join(
    "#guard broadcastShape #[%s] #[%s] == %s" % (
        ", ".join(map(str, a)), ", ".join(map(str, b)),
        "none" if w is None else "some #[%s]" % ", ".join(map(str, w)))
    for a, b, w in BROADCAST_CASES)

_GOOD_TENSOR_LEAN = '''/- hand-written -/
import TorchleanRt.Ffi
namespace TorchleanRt
structure Tensor where
  buf : Buffer
  shape : Array UInt64
namespace Tensor
def e (f : String) : IO.Error := tensorError "TLRT_ERR_SHAPE" TLRT_ERR_SHAPE f "m"
def add (a b : Tensor) : IO Tensor := binary "add" (fun x y => Ffi.add x y) a b
def size (t : Tensor) : IO Nat := do
  -- Ffi.add t.buf in a comment
  let s := "Ffi.add in a string"
  return (← Ffi.bufferSize t.buf).toNat
def mm (a b : Tensor) (a2 : Array UInt64) : IO Buffer := do
  let c ← Ffi.matmul a.buf b.buf (a2[0]! * 2) a2[1]! 3 false true
  Ffi.broadcastTo c a.shape #[1, 2] (axisMap a2)
''' + _LEAN_GUARDS + '''
end Tensor
end TorchleanRt
'''

_BAD_TENSOR_LEAN = _GOOD_TENSOR_LEAN.replace(
    "#guard broadcastShape #[2, 3] #[4] == none\n", "") + '''
def bad (t : Tensor) : IO Unit := do
  let x ← Ffi.bogus t.buf
  let y ← Ffi.add t.buf
  let z ← Ffi.broadcastTo t.shape t.buf t.shape m
  let w ← Ffi.matmul t.buf t.buf 1 2 3 false
  throw (tensorError "TLRT_ERR_SHAPE" TLRT_ERR_INDEX "f" s!"{TLRT_ERR_NOPE}")
  let v := TLRT_ERR_NOPE
'''

def _jl_tuple(t):
    return "nothing" if t is None else repr(tuple(t))


_RUNTESTS_JL = "const BROADCAST_CASES = [\n%s\n]\n" % "\n".join(
    "    (%s, %s, %s)," % (_jl_tuple(a), _jl_tuple(b), _jl_tuple(w)) for a, b, w in BROADCAST_CASES)

_SELF_TESTS = [
    # (what, {path: text}, substrings the failures must contain; [] = passes)
    ("well-formed layers", {
        "julia/TorchleanRT.jl": _GEN_JL % {"include": 'include("Tensor.jl")'},
        "julia/Tensor.jl": _GOOD_TENSOR_JL,
        "julia/test/runtests.jl": _RUNTESTS_JL,
        "lean/TorchleanRt.lean": "/- g -/\nimport TorchleanRt.Ffi\nimport TorchleanRt.Tensor\n",
        "lean/TorchleanRt/Ffi.lean": _FFI_LEAN,
        "lean/TorchleanRt/Tensor.lean": _GOOD_TENSOR_LEAN}, []),
    ("wrong names, arities, kinds; shadowing; stale tables; missing include and import", {
        "julia/TorchleanRT.jl": _GEN_JL % {"include": ""},
        "julia/Tensor.jl": _BAD_TENSOR_JL,
        "julia/test/runtests.jl": _RUNTESTS_JL.replace("    ((0,), (1,), (0,)),\n", ""),
        "lean/TorchleanRt.lean": "/- g -/\nimport TorchleanRt.Ffi\n",
        "lean/TorchleanRt/Ffi.lean": _FFI_LEAN,
        "lean/TorchleanRt/Tensor.lean": _BAD_TENSOR_LEAN}, [
        "julia: TorchleanRT.jl includes Tensor.jl 0 times",
        "C.tlrt_bogus is not a raw binding",
        "C.tlrt_add called with 2 arguments, the header has 3",
        "TLRT_ERR_BOGUS is not a constant",
        "TLRT_NOPE is not a constant",
        "broadcast_to called with 3 arguments; its methods take 4",
        "add called with 1 arguments",
        "add called with 3 arguments",
        "broadcast_to(...) with a splatted argument",
        "tape_new called with 2 arguments; its methods take 0..1",
        "TorchleanRTError called with 2 arguments; its methods take 4",
        "exports nothere, which is not defined",
        "defines zeros, a name the generated code calls unqualified",
        "the root module TorchleanRt.lean does not import TorchleanRt.Tensor",
        "Ffi.bogus is not declared",
        "Ffi.add applied to 1 arguments",
        "Ffi.broadcastTo: argument t.shape (Array UInt64) at a parameter of type @& Buffer",
        "Ffi.broadcastTo: argument t.buf (Buffer) at a parameter of type @& Array UInt64",
        "Ffi.matmul applied to 6 arguments",
        "tensorError names TLRT_ERR_SHAPE with the code TLRT_ERR_INDEX",
        "TLRT_ERR_NOPE is not defined",
        "julia/test/runtests.jl BROADCAST_CASES differs from the reference table (missing "
        "[((0,), (1,), (0,))]",
        "#guard broadcastShape differs from the reference table (missing [((2, 3), (4,), None)]",
    ]),
]


def self_test():
    import tempfile
    bad = 0
    for what, tree, want in _SELF_TESTS:
        with tempfile.TemporaryDirectory() as d:
            for path, text in tree.items():
                os.makedirs(os.path.dirname(os.path.join(d, path)), exist_ok=True)
                with open(os.path.join(d, path), "w", encoding="utf-8") as f:
                    f.write(text)
            errors = check(d)
        missing = [w for w in want if not any(w in e for e in errors)]
        unexpected = [e for e in errors if not any(w in e for w in want)]
        if missing or unexpected:
            bad += 1
            print(f"SELF-TEST FAIL: {what}:")
            for w in missing:
                print(f"  not reported: {w}")
            for e in unexpected:
                print(f"  unexpected: {e}")
    print(f"tensor_layers self-test: {len(_SELF_TESTS) - bad}/{len(_SELF_TESTS)} cases as expected")
    return 1 if bad else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    bdir = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings"))
    errors = check(bdir)
    for e in errors:
        print(f"FAIL: {e}")
    print(f"tensor_layers: {bdir}: " + (f"{len(errors)} failure(s)" if errors else
          f"{STATS['julia calls']} Julia calls of generated functions and {STATS['lean calls']} "
          f"Lean Ffi calls match the generated code; {len(BROADCAST_CASES)} broadcasting cases "
          "agree with the reference"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
