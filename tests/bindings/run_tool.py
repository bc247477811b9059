#!/usr/bin/env python3
"""run_tool.py PROGRAM ARGS...: runs a tool-driven test of the 'bindings' suite (cargo, gcc, the
generator checks) and exits with its status; exits 77 (skip) under the valgrind test setup
(TLRT_UNDER_VALGRIND), where wrapping cargo or a compiler in memcheck checks nothing of ours."""
import os
import subprocess
import sys

if os.environ.get("TLRT_UNDER_VALGRIND"):
    print("skipped under valgrind")
    sys.exit(77)
sys.exit(subprocess.run(sys.argv[1:]).returncode)
