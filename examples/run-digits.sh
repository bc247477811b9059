#!/usr/bin/env bash
# examples/run-digits.sh [--cuda] [--python | --cnn]: from a fresh Debian 12 machine to a trained
# model in one command. Installs what is missing (meson, ninja, a C/C++ compiler via apt-get;
# scikit-learn via pip, or Debian's python3-sklearn), configures the build directory `build` at the
# repository root, builds the library and examples/digits_mlp and digits_cnn, exports
# scikit-learn's handwritten digits from the installed package to build/digits.bin, and trains the
# MLP: one line per epoch, then the final test accuracy (exit status 1 below 95%).
#   (no flag)  CPU-only build (-Dcuda=disabled), trains on the CPU;
#   --cuda     CUDA build (-Dcuda=enabled, nvcc from $CUDA_HOME/bin, default /usr/local/cuda),
#              trains on GPU 0. Without a GPU this fails loudly with the status name and message
#              (exit 1): the library never falls back to the CPU silently.
#   --python   runs examples/digits_mlp.py (the same program through the Python bindings) instead;
#   --cnn      trains the convolutional network of examples/digits_cnn.c instead (same data and
#              split; convolution, pooling and a linear layer on the tape; exit 1 below 97%).
set -eu
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=cpu
lang=c
for a in "$@"; do
  case "$a" in
    --cuda) mode=cuda ;;
    --python) lang=python ;;
    --cnn) lang=cnn ;;
    *) echo "usage: $0 [--cuda] [--python | --cnn]" >&2; exit 2 ;;
  esac
done

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
missing=()
command -v meson >/dev/null 2>&1 || missing+=(meson)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

PY=python3
if ! $PY -c "import sklearn" 2>/dev/null; then
  echo "installing scikit-learn"
  if ! $PY -m pip install --quiet scikit-learn 2>/dev/null; then
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-sklearn
    PY=/usr/bin/python3
  fi
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
meson compile -C build examples/digits_mlp examples/digits_cnn
$PY examples/export_digits.py build/digits.bin
echo
if [ "$lang" = python ]; then
  TORCHLEAN_RT_LIB="$PWD/build/libtorchlean_rt.so" exec $PY examples/digits_mlp.py "${args[@]+"${args[@]}"}" build/digits.bin
fi
[ "$lang" = cnn ] && exec build/examples/digits_cnn "${args[@]+"${args[@]}"}" build/digits.bin
exec build/examples/digits_mlp "${args[@]+"${args[@]}"}" build/digits.bin
