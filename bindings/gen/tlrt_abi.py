"""Parser and classifier of the public C headers of libtorchlean_rt (pure Python stdlib).

The one C-header parser of the bindings. Used by bindings/gen/gen_bindings.py (writes the Rust,
Lean 4 and Julia bindings and the declarations the Python ctypes module binds, so that module
parses no header at import), bindings/gen/check_bindings.py (checks them against the headers and
abi/torchlean_rt.map), torchlean_rt.parse_header_text and tests/bindings/test_python.py.

parse_abi(abi_dir) reads the umbrella header torchlean_rt.h, every header it includes (in that
order) and then any other abi/tlrt_*.h not included yet (sorted), and returns an Abi: the TLRT_API
prototypes, the tlrt_status enum, the other enums of the library (tlrt_dtype), the integer
object-like #defines, the structs, and the symbols of torchlean_rt.map.

classify(proto) maps each parameter to one KIND, the vocabulary every generated binding is written
in. An unknown pattern raises AbiError naming the function: a new header that needs a new pattern
fails loudly (the stale check of the 'bindings' suite then fails) instead of being bound wrongly.
"""
import os
import re


class AbiError(Exception):
    pass


class Proto:
    def __init__(self, name, restype, params, header, doc):
        self.name, self.restype, self.params, self.header, self.doc = (
            name, restype, params, header, doc)

    def __repr__(self):
        ps = ", ".join(f"{t} {n}" for t, n in self.params) or "void"
        return f"{self.restype} {self.name}({ps})"


class Abi:
    def __init__(self):
        self.protos = []      # [Proto] in header order
        self.enums = {}       # name -> int (the tlrt_status enum)
        self.enum_types = {}  # the other tlrt_* enums: type name -> {item: int} (tlrt_dtype)
        self.defines = {}     # name -> (int, ctype)   ctype: 'u32', 'u64', 'i32' or 'device'
        self.structs = {}     # name -> [(type, field)]; an array field's type is 'T[N]'
        self.struct_headers = {}  # struct name -> the header declaring it
        self.map_symbols = []  # symbols of torchlean_rt.map
        self.headers = []     # header file names, in parse order

    def proto(self, name):
        for p in self.protos:
            if p.name == name:
                return p
        raise KeyError(name)


def norm_type(t):
    """'const  float*' -> 'const float *'; 'tlrt_buffer**' -> 'tlrt_buffer **'."""
    t = " ".join(t.replace("*", " * ").split())
    return re.sub(r"\*\s+(?=\*)", "*", t)


def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _blank_preprocessor(text):
    out, cont = [], False
    for line in text.split("\n"):
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def _clean_comment(c):
    body = c[2:-2] if c.startswith("/*") else c[2:]
    lines = [re.sub(r"^\s*\* ?", "", l).rstrip() for l in body.split("\n")]
    return "\n".join(lines).strip()


_INT_EXPR = re.compile(r"^[0-9a-fA-FxX()<>|&~+\-*/ ]*$")
_LIMITS = {"UINT64_MAX": (1 << 64) - 1, "UINT32_MAX": (1 << 32) - 1}


def eval_int(value, known):
    """Integer value of a #define body such as ((tlrt_device)0u) or (((uint64_t)1) << 60)."""
    v = re.sub(r"\(\s*(?:uint64_t|uint32_t|uint8_t|int|tlrt_device|tlrt_status)\s*\)", "", value)
    names = dict(_LIMITS, **known)
    for name in sorted(set(re.findall(r"\b[A-Za-z_]\w*\b", v)), key=len, reverse=True):
        if name in names:
            v = re.sub(r"\b" + name + r"\b", "(%d)" % names[name], v)
    v = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", v)
    if not v.strip() or re.search(r"[A-Za-z_]\w*", re.sub(r"0[xX][0-9a-fA-F]+", "", v)):
        return None
    if not _INT_EXPR.match(v):
        return None
    try:
        r = eval(v, {"__builtins__": {}}, {})  # digits, parentheses and operators only
    except Exception:
        return None
    return r if isinstance(r, int) else None


def _define_ctype(body, value):
    if "tlrt_device" in body:
        return "device"
    if value < 0:
        return "i32"  # a C int (TLRT_CROSS_ENTROPY_NO_IGNORE)
    if "uint64_t" in body or "UINT64_MAX" in body or value > 0xFFFFFFFF:
        return "u64"
    return "u32"


def parse_header(text, header, abi):
    code = _blank_preprocessor(text)
    last_comment, last_doc, since_decl = "", "", True
    for m in re.finditer(r"(/\*.*?\*/|//[^\n]*)|(\bTLRT_API\b[^;{]*;)", code, flags=re.S):
        if m.group(1):
            last_comment, since_decl = _clean_comment(m.group(1)), True
            continue
        decl = " ".join(_strip_comments(m.group(2)).split())
        dm = re.match(r"TLRT_API\s+(.+?)\b(tlrt_\w+)\s*\((.*)\)\s*;$", decl)
        if not dm:
            raise AbiError(f"{header}: cannot parse declaration {decl!r}")
        restype, name, plist = norm_type(dm.group(1)), dm.group(2), dm.group(3).strip()
        params = []
        if plist not in ("", "void"):
            for p in plist.split(","):
                pm = re.match(r"^(.*?)(\b[A-Za-z_]\w*)$", p.strip())
                if not pm or not pm.group(1).strip():
                    raise AbiError(f"{header}: {name}: cannot parse parameter {p!r}")
                params.append((norm_type(pm.group(1)), pm.group(2)))
        doc = last_comment if since_decl else last_doc
        last_doc, since_decl = doc, False
        abi.protos.append(Proto(name, restype, params, header, doc))
    plain = _blank_preprocessor(_strip_comments(text))
    # Only the library's own types (tlrt_*): tlrt_dlpack.h also carries the DLPack specification's
    # structs, which the entry points take as void * and the bindings do not need.
    for em in re.finditer(r"typedef\s+enum\s+\w*\s*\{(.*?)\}\s*(\w+)\s*;", plain, flags=re.S):
        if not em.group(2).startswith("tlrt_"):
            continue
        # tlrt_status into abi.enums (the status codes every binding lists); any other enum type
        # (an argument type such as tlrt_dtype) into abi.enum_types[its name].
        items = abi.enums if em.group(2) == "tlrt_status" else abi.enum_types.setdefault(em.group(2), {})
        value = -1
        for item in em.group(1).split(","):
            item = item.strip()
            if not item:
                continue
            im = re.match(r"^([A-Za-z_]\w*)\s*(?:=\s*(.+))?$", item)
            if not im:
                raise AbiError(f"{header}: cannot parse enum item {item!r}")
            value = eval_int(im.group(2), dict(abi.enums, **items)) if im.group(2) is not None \
                else value + 1
            if value is None:
                raise AbiError(f"{header}: enum value {item!r} is not an integer")
            items[im.group(1)] = value
    known = {k: v for k, (v, _) in abi.defines.items()}
    known.update(abi.enums)
    for items in abi.enum_types.values():
        known.update(items)
    for dm in re.finditer(r"^\s*#\s*define\s+(TLRT_\w+)[ \t]+([^\n]+)$", _strip_comments(text),
                          flags=re.M):
        body = dm.group(2).strip()
        v = eval_int(body, known)
        if v is not None:
            abi.defines[dm.group(1)] = (v, _define_ctype(body, v))
            known[dm.group(1)] = v
    # Structs after the defines: an array field's length may be one (uint64_t a[TLRT_X_MAX]).
    for sm in re.finditer(r"typedef\s+struct\s+(\w+)?\s*\{(.*?)\}\s*(\w+)\s*;", plain, flags=re.S):
        if not sm.group(3).startswith("tlrt_"):
            continue
        fields = []
        for f in sm.group(2).split(";"):
            f = " ".join(f.split())
            if f:
                fm = re.match(r"^(.*?)(\b[A-Za-z_]\w*)\s*(?:\[([^\]]+)\])?$", f)
                if not fm or not fm.group(1).strip():
                    raise AbiError(f"{header}: struct {sm.group(3)}: cannot parse field {f!r}")
                t = norm_type(fm.group(1))
                if fm.group(3) is not None:
                    n = eval_int(fm.group(3).strip(), known)
                    if n is None or n <= 0:
                        raise AbiError(f"{header}: struct {sm.group(3)}: field {fm.group(2)}: "
                                       f"array length {fm.group(3)!r} is not a positive integer")
                    t = f"{t}[{n}]"
                fields.append((t, fm.group(2)))
        abi.structs[sm.group(3)] = fields
        abi.struct_headers[sm.group(3)] = header


def parse_abi(abi_dir):
    abi = Abi()
    order, seen = [], set()

    def visit(name):
        if name in seen:
            return
        seen.add(name)
        with open(os.path.join(abi_dir, name), encoding="utf-8") as f:
            text = f.read()
        for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, flags=re.M):
            visit(inc)
        order.append((name, text))

    visit("torchlean_rt.h")
    abi_dir_files = sorted(f for f in os.listdir(abi_dir) if re.match(r"tlrt_\w+\.h$", f))
    for f in abi_dir_files:
        visit(f)
    for name, text in order:
        abi.headers.append(name)
        parse_header(text, name, abi)
    names = [p.name for p in abi.protos]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise AbiError(f"declared twice: {sorted(dup)}")
    with open(os.path.join(abi_dir, "torchlean_rt.map"), encoding="utf-8") as f:
        abi.map_symbols = re.findall(r"^\s*(tlrt_\w+)\s*;", _strip_comments(f.read()), flags=re.M)
    return abi


# ----------------------------------------------------------------------------------------------
# Classification
# ----------------------------------------------------------------------------------------------

SCALARS = {"uint64_t": "u64", "uint32_t": "u32", "uint8_t": "u8", "double": "f64", "float": "f32",
           "bool": "bool", "tlrt_device": "device", "int": "int", "tlrt_status": "status",
           # an element type (a C enum: int-sized), TLRT_DTYPE_* of abi/tlrt_buffer.h
           "tlrt_dtype": "dtype",
           # a foreign handle passed by value (a cudaStream_t or cudaEvent_t): an address-sized
           # integer in every binding, never dereferenced by it
           "void *": "ptr"}
RESULTS = {"tlrt_status": "status", "void": "void", "uint32_t": "u32", "uint64_t": "u64",
           "bool": "bool", "const char *": "string"}
OUTS = {"tlrt_buffer **": "out_buf", "tlrt_tape **": "out_tape", "uint64_t *": "out_u64",
        "uint32_t *": "out_u32", "bool *": "out_bool", "tlrt_device *": "out_device",
        "tlrt_allocator_stats *": "out_stats", "void **": "out_ptr", "tlrt_dtype *": "out_dtype",
        # an open safetensors file (abi/tlrt_checkpoint.h), and a string owned by it
        "tlrt_safetensors **": "out_st", "const char **": "out_str"}
# The opaque handle types of the headers (passed by pointer; never a struct of the bindings).
HANDLE_TYPES = ("tlrt_buffer", "tlrt_tape", "tlrt_safetensors")
# Host data arrays (a count of elements after each): elem kind f32 / f64 (values), u8 (bytes of
# little-endian float32), i32 / i64 (the values of an integer buffer).
HOST_DATA_IN = {"const float *": "f32", "const double *": "f64", "const uint8_t *": "u8",
                "const int32_t *": "i32", "const int64_t *": "i64"}
HOST_DATA_OUT = {"float *": "f32", "double *": "f64", "uint8_t *": "u8", "int32_t *": "i32",
                 "int64_t *": "i64"}

# Arrays without a count parameter right after them, and where their length comes from:
#   ('param', name)       the value of an integer parameter;
#   ('product', [names])  the product of integer parameters (overflow-checked by the binding);
#   ('node_rank', name)   the rank of a tape node (tlrt_tape_shape);
#   ('node_dim0', name)   the first dimension of a tape node;
#   ('node_spatial', name) the rank of a tape node minus 2 (its spatial axes after batch and
#                         channels; 0 for a node of rank < 2, which the library then rejects).
# A binding checks an input array's length against it (else the library would read past it) and
# allocates an output array of that length.
UNCOUNTED = {
    ("tlrt_permute", "perm"): ("param", "rank"),
    ("tlrt_broadcast_to", "axis_map"): ("param", "out_rank"),
    ("tlrt_reduce_from_broadcast", "axis_map"): ("param", "out_rank"),
    ("tlrt_dgemm", "a"): ("product", ["m", "n"]),
    ("tlrt_dgemm", "b"): ("product", ["n", "p"]),
    ("tlrt_dgemm", "c"): ("product", ["m", "p"]),
    ("tlrt_tape_permute", "perm"): ("node_rank", "x"),
    ("tlrt_tape_broadcast_to", "axis_map"): ("param", "out_rank"),
    ("tlrt_tape_cross_entropy", "labels"): ("node_dim0", "logits"),
    # tlrt_safetensors_save: one buffer, shape and rank per name, one value per metadata key
    **{("tlrt_safetensors_save", arr): ("param", "count") for arr in ("buffers", "dims", "ranks")},
    ("tlrt_safetensors_save", "meta_values"): ("param", "meta_count"),
    # tlrt_adam_step_multi: a gradient, two moments and a weight decay per parameter
    **{("tlrt_adam_step_multi", arr): ("param", "count")
       for arr in ("grads", "m", "v", "weight_decays")},
    **{("tlrt_tape_conv", arr): ("node_spatial", "x") for arr in ("stride", "padding", "dilation")},
    # N-D convolution and pooling: the per-axis geometry arrays have `rank` entries (the count of
    # in_spatial).
    **{(f"tlrt_{op}", arr): ("param", "rank")
       for op in ("conv_fwd", "conv_bwd", "convtranspose_fwd", "convtranspose_bwd")
       for arr in ("kernel_size", "stride", "padding", "dilation")},
    **{(f"tlrt_{op}", arr): ("param", "rank")
       for op in ("maxpool_fwd", "maxpool_bwd", "avgpool_fwd", "avgpool_bwd",
                  "smooth_maxpool_fwd", "smooth_maxpool_bwd")
       for arr in ("kernel", "stride", "padding")},
}
# Optional buffers (NULL allowed): Option in Lean / Rust, `nothing` in Julia.
OPTIONAL = {("tlrt_sgd_step", "momentum_buf"),
            *{(f"tlrt_{op}_fwd", "bias")
              for op in ("conv", "conv2d", "convtranspose", "convtranspose2d")},
            *{(f"tlrt_{op}_fwd_geom", "bias") for op in ("conv", "convtranspose")},
            *{(f"tlrt_flash_attention_{e}", "mask") for e in ("fwd", "bwd", "bwd_q", "bwd_k", "bwd_v")},
            ("tlrt_tape_flash_attention", "mask"), ("tlrt_tape_backward_ex", "seed"),
            *{("tlrt_attention_fwd", "mask"), ("tlrt_attention_bwd", "mask")},
            *{("tlrt_attention_bwd", g) for g in ("dq", "dk", "dv")},
            ("tlrt_scatter_add_ibuf", "x"), ("tlrt_scatter_add_rows_ibuf", "mat"),
            ("tlrt_rms_norm_fwd", "gamma"), ("tlrt_rms_norm_bwd", "gamma")}
# Optional scalar out-parameters (NULL allowed): the bindings always pass a place.
OPTIONAL_OUT = {("tlrt_tape_shape", "requires_grad")}
# Output-shape queries `uint64_t *dims, uint32_t capacity, uint32_t *rank`: the define whose value
# is a capacity that always suffices (the bindings pass room for that many dims).
DIMS_CAPACITY = {"tlrt_conv_output_dims": "TLRT_CONV_MAX_DIMS",
                 "tlrt_convtranspose_output_dims": "TLRT_CONV_MAX_DIMS",
                 "tlrt_pool_output_dims": "TLRT_POOL_MAX_DIMS",
                 "tlrt_safetensors_info": "TLRT_SAFETENSORS_MAX_RANK"}
# Arrays of pointers (`const char *const *` strings, `const tlrt_buffer *const *` buffers,
# `const uint64_t *const *` shapes: kinds str_arr, buf_arr, dims_arr) take their length from a
# count parameter BEFORE them (a C idiom: tlrt_safetensors_save(path, count, names, ...)):
# (function, count parameter) -> the first array it counts (its .length is ('count', count));
# the other arrays of that count have an UNCOUNTED entry ('param', count), so every binding
# checks that they are as long as the first.
COUNT_BEFORE = {("tlrt_safetensors_save", "count"): "names",
                ("tlrt_clip_grad_norm", "count"): "grads",
                ("tlrt_adam_step_multi", "count"): "params",
                ("tlrt_safetensors_save", "meta_count"): "meta_keys"}
# Shapes (dims_arr): (function, dims parameter) -> the uint32_t ranks array holding each inner
# array's length (a binding passes NULL for an empty inner array: the C shorthand of a 1-D or
# scalar shape; any other length must equal the rank).
DIMS_LISTS = {("tlrt_safetensors_save", "dims"): "ranks"}
ARRAYS_OF_POINTERS = {"const char * const *": "str_arr", "const tlrt_buffer * const *": "buf_arr",
                      "tlrt_buffer * const *": "buf_arr",  # buffers modified in place
                      "const uint64_t * const *": "dims_arr"}


def array_field(t):
    """'uint64_t[8]' -> ('uint64_t', 8); a scalar field type -> (t, None)."""
    m = re.match(r"^(.*)\[(\d+)\]$", t)
    return (m.group(1), int(m.group(2))) if m else (t, None)


def struct_in_name(t):
    """'const tlrt_conv_geometry *' -> 'tlrt_conv_geometry' (a struct passed by const pointer as
    an input); None for every other type."""
    m = re.match(r"^const (tlrt_\w+) \*$", t)
    return m.group(1) if m and m.group(1) not in HANDLE_TYPES else None


class Param:
    """kind: buf (input handle; .mut for a non-const tlrt_buffer *), tape, a scalar kind
    (u64 u32 u8 f64 f32 bool device int status, dtype: a tlrt_dtype, and ptr: a foreign handle as
    void *), arr64 / arr32 (host index lists; .length is
    ('count', name) or an UNCOUNTED source), count (the length of the array before it; not a
    parameter of the bindings), data_in / data_out (host data; .elem f32 / f64 / u8 (bytes) /
    i32 / i64; .length ('count', name) or a source), out_* (trailing results; out_dtype a
    tlrt_dtype *), out_dims (uint64_t * room for
    TLRT_TAPE_MAX_RANK dims; its length is the out_rank parameter right after it), out_rank,
    out_ptr (a void ** receiving a foreign handle), struct_in (a const pointer to a struct of the
    headers, .struct its name), out_dims_cap (uint64_t * room for the shape of an output-shape
    query: .length ('define', name) its capacity, passed in the capacity parameter right after it,
    then out_rank), str (a NUL-terminated UTF-8 string, const char *), st (an open safetensors
    file, .mut for a non-const tlrt_safetensors *), out_st / out_str (a new safetensors handle /
    a string the handle owns), str_arr / buf_arr / dims_arr (arrays of strings / buffer handles /
    shapes, ARRAYS_OF_POINTERS: .length as for arr64; a dims_arr's .ranks names the ranks array
    giving each shape's length)."""

    def __init__(self, ctype, name, kind, **kw):
        self.ctype, self.name, self.kind = ctype, name, kind
        self.mut = kw.get("mut", False)
        self.optional = kw.get("optional", False)
        self.length = kw.get("length")
        self.elem = kw.get("elem")
        self.of = kw.get("of")   # count: the array parameter it counts
        self.struct = kw.get("struct")  # struct_in: the struct's name
        self.ranks = kw.get("ranks")    # dims_arr: the ranks parameter

    @property
    def is_out(self):
        return self.kind.startswith("out_")

    def __repr__(self):
        return f"Param({self.ctype!r}, {self.name}, {self.kind})"


class Fn:
    def __init__(self, proto, result, params):
        self.proto, self.result, self.params = proto, result, params
        self.name = proto.name

    @property
    def short(self):
        return self.name[5:]

    @property
    def ins(self):
        """Parameters a binding exposes (not counts, not outputs)."""
        return [p for p in self.params
                if not p.is_out and p.kind not in ("count", "data_out", "capacity")]

    @property
    def outs(self):
        return [p for p in self.params if p.is_out and p.kind != "out_rank"]

    def param(self, name):
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


def classify(proto):
    name, ps = proto.name, proto.params
    if proto.restype not in RESULTS:
        raise AbiError(f"{name}: unknown result type {proto.restype!r}")
    result = RESULTS[proto.restype]
    out, i = [], 0
    seen_out = False
    while i < len(ps):
        t, n = ps[i]
        nxt = ps[i + 1] if i + 1 < len(ps) else None
        if t in ("const tlrt_buffer *", "tlrt_buffer *"):
            out.append(Param(t, n, "buf", mut=(t == "tlrt_buffer *"),
                             optional=(name, n) in OPTIONAL))
        elif t in ("tlrt_tape *", "const tlrt_tape *"):
            out.append(Param(t, n, "tape", mut=(t == "tlrt_tape *")))
        elif t in ("tlrt_safetensors *", "const tlrt_safetensors *"):
            out.append(Param(t, n, "st", mut=(t == "tlrt_safetensors *")))
        elif t == "const char *":
            out.append(Param(t, n, "str"))
        elif t == "uint64_t" and (name, n) in COUNT_BEFORE:
            out.append(Param(t, n, "count", of=COUNT_BEFORE[(name, n)]))
        elif t in ARRAYS_OF_POINTERS:
            firsts = {v: k[1] for k, v in COUNT_BEFORE.items() if k[0] == name}
            if n in firsts:
                length = ("count", firsts[n])
            elif (name, n) in UNCOUNTED:
                length = UNCOUNTED[(name, n)]
            else:
                raise AbiError(f"{name}: array {n} has no count (COUNT_BEFORE) and no entry in "
                               "UNCOUNTED (bindings/gen/tlrt_abi.py)")
            kind = ARRAYS_OF_POINTERS[t]
            if kind == "dims_arr" and (name, n) not in DIMS_LISTS:
                raise AbiError(f"{name}: shapes {n} have no ranks array in DIMS_LISTS")
            out.append(Param(t, n, kind, length=length, ranks=DIMS_LISTS.get((name, n))))
        elif struct_in_name(t):
            out.append(Param(t, n, "struct_in", struct=struct_in_name(t)))
        elif t in SCALARS:
            out.append(Param(t, n, SCALARS[t]))
        elif t in ("const uint64_t *", "const uint32_t *"):
            kind = "arr64" if t == "const uint64_t *" else "arr32"
            if nxt and nxt[0] in ("uint32_t", "uint64_t") and (name, n) not in UNCOUNTED:
                out.append(Param(t, n, kind, length=("count", nxt[1])))
                out.append(Param(nxt[0], nxt[1], "count", of=n))
                i += 1
            elif (name, n) in UNCOUNTED:
                out.append(Param(t, n, kind, length=UNCOUNTED[(name, n)]))
            else:
                raise AbiError(f"{name}: array {n} has no count parameter after it and no entry "
                               "in UNCOUNTED (bindings/gen/tlrt_abi.py)")
        elif t in HOST_DATA_IN:
            if (name, n) in UNCOUNTED:
                out.append(Param(t, n, "data_in", elem=HOST_DATA_IN[t], length=UNCOUNTED[(name, n)]))
            elif nxt and nxt[0] == "uint64_t":
                out.append(Param(t, n, "data_in", elem=HOST_DATA_IN[t], length=("count", nxt[1])))
                out.append(Param(nxt[0], nxt[1], "count", of=n))
                i += 1
            else:
                raise AbiError(f"{name}: host data {n} without a uint64_t count after it")
        elif t in HOST_DATA_OUT:
            if (name, n) in UNCOUNTED:
                out.append(Param(t, n, "data_out", elem=HOST_DATA_OUT[t],
                                 length=UNCOUNTED[(name, n)]))
            elif nxt and nxt[0] == "uint64_t":
                # float *dst, uint64_t n: a download into a host array
                out.append(Param(t, n, "data_out", elem=HOST_DATA_OUT[t], length=("count", nxt[1])))
                out.append(Param(nxt[0], nxt[1], "count", of=n))
                i += 1
            else:
                raise AbiError(f"{name}: host array {n} without a uint64_t count after it")
        elif (t == "uint64_t *" and nxt and nxt[0] == "uint32_t" and i + 2 < len(ps)
              and ps[i + 2][0] == "uint32_t *"):
            if name not in DIMS_CAPACITY:
                raise AbiError(f"{name}: output-shape array {n} has no entry in DIMS_CAPACITY "
                               "(bindings/gen/tlrt_abi.py)")
            out.append(Param(t, n, "out_dims_cap", length=("define", DIMS_CAPACITY[name])))
            out.append(Param(nxt[0], nxt[1], "capacity", of=n))
            out.append(Param(ps[i + 2][0], ps[i + 2][1], "out_rank"))
            seen_out = True
            i += 2
        elif t == "uint64_t *" and nxt and nxt[0] == "uint32_t *":
            out.append(Param(t, n, "out_dims", length=("count", nxt[1])))
            out.append(Param(nxt[0], nxt[1], "out_rank"))
            seen_out = True
            i += 1
        elif t in OUTS:
            out.append(Param(t, n, OUTS[t], optional=(name, n) in OPTIONAL_OUT))
            seen_out = True
        else:
            raise AbiError(f"{name}: parameter {t} {n} matches no binding pattern; extend "
                           "bindings/gen/tlrt_abi.py")
        if seen_out and not out[-1].is_out:
            raise AbiError(f"{name}: input {n} after an out-parameter")
        i += 1
    if result != "status" and any(p.is_out for p in out):
        raise AbiError(f"{name}: out-parameters without a status result")
    return Fn(proto, result, out)


def classify_all(abi):
    return [classify(p) for p in abi.protos]


def camel(s):
    """buffer_from_f32 -> bufferFromF32"""
    parts = s.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def pascal(s):
    return "".join(p[:1].upper() + p[1:] for p in s.split("_"))
