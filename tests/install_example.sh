#!/usr/bin/env bash
# Installs hoop from a build tree into a temporary prefix, builds examples/ against it both
# ways a consumer would: the CMake package (find_package(hoop)) and pkg-config (hoop.pc), and
# runs each build of the example on 3 ranks (and the data-parallel example, hoop::hoop_dp).
set -euo pipefail
build_dir=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir/examples" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/prefix/bin/hoop-run" -n 3 -- "$work/build/allreduce_example"
"$work/prefix/bin/hoop-run" -n 3 -- "$work/build/dp_example"

pc=$(find "$work/prefix" -name hoop.pc)
[ -n "$pc" ] || { echo "hoop.pc is not installed" >&2; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir hoop)
c++ -std=c++20 "$source_dir/examples/allreduce_example.cc" -o "$work/allreduce_example_pc" \
  $(pkg-config --cflags --libs hoop) -Wl,-rpath,"$libdir"
"$work/prefix/bin/hoop-run" -n 3 -- "$work/allreduce_example_pc"
c++ -std=c++20 "$source_dir/examples/dp_example.cc" -o "$work/dp_example_pc" \
  $(pkg-config --cflags --libs hoop_dp) -Wl,-rpath,"$libdir"
"$work/prefix/bin/hoop-run" -n 3 -- "$work/dp_example_pc"
