#!/usr/bin/env bash
# examples/run-hello.sh [--cuda]: from a fresh Debian 12 machine to a running example in one
# command. Installs what is missing (meson, ninja, a C/C++ compiler; apt-get, as root or via sudo,
# saying so), builds and runs examples/hello.
#   (no flag)  CPU-only build (-Dcuda=disabled) in `build` at the repository root;
#   --cuda     CUDA build for the architecture of the GPU present (nvcc from $CUDA_HOME/bin,
#              default /usr/local/cuda) in `build-cuda-examples`, then `hello --cuda` on GPU 0.
#              Without a GPU it stops at once, before compiling anything (exit 1).
set -eu
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=cpu
case "${1:-}" in
  "") ;;
  --cuda) mode=cuda ;;
  *) echo "usage: $0 [--cuda]" >&2; exit 2 ;;
esac

. examples/common.sh
need_tools meson:meson ninja:ninja-build gcc:gcc g++:g++
pick_build "$mode"
configure_build
meson compile -C "$BUILD" examples/hello
echo
[ "$mode" = cuda ] && exec "$BUILD/examples/hello" --cuda
exec "$BUILD/examples/hello"
