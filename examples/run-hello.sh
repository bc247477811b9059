#!/usr/bin/env bash
# examples/run-hello.sh [--cuda]: from a fresh Debian 12 machine to a running example in one
# command. Installs what is missing (meson, ninja, a C/C++ compiler; apt-get, as root or via sudo),
# configures the build directory `build` at the repository root, builds, and runs
# build/examples/hello.
#   (no flag)  CPU-only build (-Dcuda=disabled), runs hello on the CPU;
#   --cuda     CUDA build (-Dcuda=enabled, nvcc from $CUDA_HOME/bin, default /usr/local/cuda),
#              runs `hello --cuda` on GPU 0. Without a GPU this fails loudly with the status name
#              and message (exit 1): the library never falls back to the CPU silently.
set -eu
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=cpu
case "${1:-}" in
  "") ;;
  --cuda) mode=cuda ;;
  *) echo "usage: $0 [--cuda]" >&2; exit 2 ;;
esac

missing=()
command -v meson >/dev/null 2>&1 || missing+=(meson)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "$mode" = cuda ]; then
  CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
  export PATH="$CUDA_HOME/bin:$PATH"
  opts=(-Dcuda=enabled "-Dcudatoolkit_dir=$CUDA_HOME")
  args=(--cuda)
else
  opts=(-Dcuda=disabled)
  args=()
fi

if [ -f build/meson-private/coredata.dat ]; then
  meson setup --reconfigure build "${opts[@]}" >/dev/null
else
  meson setup build "${opts[@]}" >/dev/null
fi
meson compile -C build examples/hello
echo
exec build/examples/hello "${args[@]+"${args[@]}"}"
