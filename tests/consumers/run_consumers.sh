#!/usr/bin/env bash
# Installs the build (meson install --destdir, nothing rebuilt) into a scratch folder and builds
# consumer.c against it the three ways a user would: pkg-config with the shared library,
# pkg-config --static with libtorchlean_rt.a (when the build has it: -Ddefault_library=both or
# static, CPU builds), and CMake's find_package(torchlean_rt). Each program must run and print
# the right sum. Exit 77 (skip) under the valgrind setup (the compilers would run under it) or
# when cmake or a C compiler is missing.
#   run_consumers.sh BUILD_DIR SOURCE_DIR PREFIX LIBDIR
set -eu
build=$1 src=$2 prefix=$3 libdir=$4
[ -n "${TLRT_UNDER_VALGRIND:-}" ] && { echo "skipped under valgrind"; exit 77; }
cc=${CC:-cc}
command -v "$cc" >/dev/null || { echo "no C compiler ($cc)"; exit 77; }
command -v cmake >/dev/null || { echo "cmake is not installed"; exit 77; }
command -v pkg-config >/dev/null || { echo "pkg-config is not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
meson install -C "$build" --no-rebuild --quiet --destdir "$work/dest" >/dev/null
root="$work/dest$prefix"
case "$libdir" in /*) lib="$work/dest$libdir" ;; *) lib="$root/$libdir" ;; esac

# pkg-config: the .pc names $prefix; the sysroot variable maps it into the scratch install.
export PKG_CONFIG_PATH="$lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$work/dest"
"$cc" -o "$work/consumer_pc" "$src/consumer.c" $(pkg-config --cflags --libs torchlean_rt)
LD_LIBRARY_PATH="$lib" "$work/consumer_pc"
if [ -f "$lib/libtorchlean_rt.a" ] && ! grep -q "cuda" "$lib/pkgconfig/torchlean_rt.pc"; then
  "$cc" -o "$work/consumer_static" "$src/consumer.c" \
      $(pkg-config --cflags torchlean_rt) "$lib/libtorchlean_rt.a" \
      $(pkg-config --libs-only-l --static torchlean_rt | sed 's/-ltorchlean_rt//')
  "$work/consumer_static"
  if ldd "$work/consumer_static" | grep -q torchlean_rt; then
    echo "consumer_static is linked against the shared library"; exit 1
  fi
fi
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR

# CMake: find_package through CMAKE_PREFIX_PATH; the package file finds its own prefix.
cmake -S "$src" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$root" -DCMAKE_C_COMPILER="$cc" \
    >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
LD_LIBRARY_PATH="$lib" "$work/cmake/consumer"
echo "consumers: pkg-config, cmake ok"
