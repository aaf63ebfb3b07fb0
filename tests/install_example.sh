#!/usr/bin/env bash
# Installs hoop from a build tree into a temporary prefix, builds examples/ against the
# installed CMake package (find_package(hoop)) and runs the example on 3 ranks.
set -euo pipefail
build_dir=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir/examples" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/prefix/bin/hoop-run" -n 3 -- "$work/build/allreduce_example"
