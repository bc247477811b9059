# examples/common.sh: what run-hello.sh and run-digits.sh share (sourced, not run). Each install
# says what it installs and where; nothing is installed into the user's own Python.
#   need_tools CMD:PACKAGE...   apt-get installs the Debian packages of the missing commands
#   pick_build cpu|cuda         sets BUILD (the build directory) and OPTS (its meson options);
#                               cuda: the architecture of the GPU present, in build-cuda-examples,
#                               or a clear failure before anything is compiled when there is none
#   configure_build             meson setup (or reconfigure) of $BUILD with $OPTS
#   project_python MODULE:PKG...  sets PY to the project's virtual environment (.venv-examples at
#                               the repository root, made on first use) with the packages installed

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

apt_install() {
  echo "installing Debian packages into the system (apt-get${SUDO:+ via sudo}): $*"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

need_tools() {
  local missing=() t
  for t in "$@"; do
    command -v "${t%%:*}" >/dev/null 2>&1 || missing+=("${t##*:}")
  done
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
}

pick_build() {
  if [ "$1" = cuda ]; then
    local cc
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
    if [ -z "$cc" ]; then
      echo "--cuda: no NVIDIA GPU is visible here (nvidia-smi found none), so nothing was built;" >&2
      echo "run without --cuda for the CPU backend" >&2
      exit 1
    fi
    CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
    export PATH="$CUDA_HOME/bin:$PATH"
    BUILD=build-cuda-examples
    OPTS=(-Dcuda=enabled "-Dcudatoolkit_dir=$CUDA_HOME" "-Dgpu_arch=$cc")
    echo "CUDA build for this GPU (sm_$cc) in $BUILD/"
  else
    BUILD=build
    OPTS=(-Dcuda=disabled)
  fi
}

configure_build() {
  if [ -f "$BUILD/meson-private/coredata.dat" ]; then
    meson setup --reconfigure "$BUILD" "${OPTS[@]}" >/dev/null
  else
    meson setup "$BUILD" "${OPTS[@]}" >/dev/null
  fi
}

project_python() {
  local venv=.venv-examples m missing=()
  if [ ! -x "$venv/bin/python" ]; then
    need_tools python3:python3
    python3 -c "import ensurepip" 2>/dev/null || apt_install python3-venv
    echo "creating the project's Python environment in $PWD/$venv (python3 -m venv)"
    python3 -m venv "$venv"
  fi
  PY="$PWD/$venv/bin/python"
  for m in "$@"; do
    "$PY" -c "import ${m%%:*}" 2>/dev/null || missing+=("${m##*:}")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing into $PWD/$venv (pip, from the package index): ${missing[*]}"
  "$PY" -m pip install --quiet "${missing[@]}"
}
