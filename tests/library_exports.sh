#!/usr/bin/env bash
# The shared libraries' boundaries: libhoop.so exports the public API (include/hoop) and
# nothing of the layers under it, and needs neither OpenBLAS nor zlib (only libhoop_dp.so,
# the model and data-parallel library, does); libhoop_dp.so exports its API (hoop::dp) and
# reaches the communicator through libhoop.so.
set -euo pipefail
lib=$1
dp=$2
fail=0
# Demangled names of the defined dynamic symbols; "typeinfo for X", "vtable for X" become X.
exports() { nm -D --defined-only -C "$1" | cut -d' ' -f3- | sed -E 's/^(typeinfo name|typeinfo|vtable|VTT|guard variable) for //'; }
internal='^hoop::((detail|dp::detail|core|kernels|bootstrap|transport|schedule|engine|tuner|direct|model|env|log)::|[A-Za-z_]+::Impl::)'

check_lib() {  # library, a symbol it must export
  local syms
  syms=$(exports "$1")
  if ! grep -q "^$2" <<<"$syms"; then
    echo "$(basename "$1") does not export $2" >&2; fail=1
  fi
  if grep -E "$internal" <<<"$syms" >&2; then
    echo "$(basename "$1") exports the internal symbols above" >&2; fail=1
  fi
}
check_lib "$lib" 'hoop::Communicator::allreduce('
check_lib "$dp" 'hoop::dp::DataParallel::step('

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
if needed "$lib" | grep -E 'openblas|libz\.'; then
  echo "libhoop.so links the libraries above: only libhoop_dp.so should" >&2; fail=1
fi
if ! needed "$dp" | grep -q '^libhoop\.so'; then
  echo "libhoop_dp.so does not link libhoop.so" >&2; fail=1
fi
exit $fail
