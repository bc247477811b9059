#!/usr/bin/env bash
# examples/run-digits.sh [--cuda] [--python | --cnn]: from a fresh Debian 12 machine to a trained
# model in one command. Installs what is missing, saying what and where: meson, ninja, a C/C++
# compiler and python3 via apt-get; scikit-learn and numpy by pip into the project's own virtual
# environment `.venv-examples` (never the user's interpreter). Builds the library and
# examples/digits_mlp and digits_cnn, exports scikit-learn's handwritten digits from the installed
# package to <build>/digits.bin, and trains the MLP: one line per epoch, then the final test
# accuracy (exit status 1 below 95%).
#   (no flag)  CPU-only build (-Dcuda=disabled) in `build`, trains on the CPU;
#   --cuda     CUDA build for the architecture of the GPU present (nvcc from $CUDA_HOME/bin,
#              default /usr/local/cuda) in `build-cuda-examples`, trains on GPU 0. Without a GPU
#              it stops at once, before compiling anything (exit 1).
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

. examples/common.sh
need_tools meson:meson ninja:ninja-build gcc:gcc g++:g++ python3:python3
# scikit-learn ships the digits; numpy for the Python bindings (--python).
project_python sklearn:scikit-learn numpy:numpy
pick_build "$mode"
configure_build
meson compile -C "$BUILD" examples/digits_mlp examples/digits_cnn
args=()
[ "$mode" = cuda ] && args=(--cuda)
"$PY" examples/export_digits.py "$BUILD/digits.bin"
echo
if [ "$lang" = python ]; then
  TORCHLEAN_RT_LIB="$PWD/$BUILD/libtorchlean_rt.so" exec "$PY" examples/digits_mlp.py "${args[@]+"${args[@]}"}" "$BUILD/digits.bin"
fi
[ "$lang" = cnn ] && exec "$BUILD/examples/digits_cnn" "${args[@]+"${args[@]}"}" "$BUILD/digits.bin"
exec "$BUILD/examples/digits_mlp" "${args[@]+"${args[@]}"}" "$BUILD/digits.bin"
