#!/usr/bin/env python3
"""Every exported symbol must be exercised by the bad-input tests.

usage: check_bad_input_coverage.py abi/torchlean_rt.map tests/abi/test_bad_input*.cpp

Reads the `global:` list of the GNU version script and fails (exit 1, listing them) if a symbol
does not appear in the test's code. Comments and string literals are stripped first, so a name
that only occurs in a message or a table's label does not count; a use as a function-pointer
value (the test's tables pass tlrt_add and friends to generic checkers) counts like a call.
"""
import re
import sys


def exported_symbols(map_text):
    text = re.sub(r"/\*.*?\*/", " ", map_text, flags=re.S)
    text = re.sub(r"#[^\n]*", " ", text)
    symbols = []
    for block in re.finditer(r"global\s*:(.*?)(?:local\s*:|\})", text, flags=re.S):
        for entry in block.group(1).split(";"):
            name = entry.strip()
            if name:
                symbols.append(name)
    return symbols


def strip_comments_and_strings(src):
    # One pass, so that "//" inside a string and quotes inside comments are handled correctly.
    pattern = re.compile(
        r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pattern.sub(lambda m: " " if m.group(0)[0] == "/" else '""', src)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        symbols = exported_symbols(f.read())
    code = ""
    for path in argv[2:]:
        with open(path, encoding="utf-8") as f:
            code += strip_comments_and_strings(f.read()) + "\n"
    if not symbols:
        print(f"no exported symbols found in {argv[1]}", file=sys.stderr)
        return 1
    used = set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", code))
    missing = [s for s in symbols if s not in used]
    if missing:
        print(f"{len(missing)} of {len(symbols)} exported symbols are not exercised by "
              f"{' '.join(argv[2:])}:")
        for s in missing:
            print(f"  {s}")
        return 1
    print(f"all {len(symbols)} exported symbols are exercised by {' '.join(argv[2:])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
