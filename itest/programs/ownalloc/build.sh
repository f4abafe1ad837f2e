#!/usr/bin/env bash
# Builds the programs that bring their own allocator, for itest/tests/own_allocator.rs and
# `make demo`, into target/ownalloc/bin (OWNALLOC_DIR overrides target/ownalloc):
#
#   c_static_jemalloc          jemalloc_prog.c + Debian's static libjemalloc.a
#   c_je_prefix                jemalloc_prog.c -DJE_PREFIX + libjemalloc.a with its public
#                              symbols renamed je_* (work/libjemalloc_je.a), as Redis/Valkey
#   c_static_jemalloc_ctor     c_static_jemalloc linked with libctorblock.so
#   libctorblock.so            ctorblock.c: a constructor that mallocs two blocks before main
#   cxx_static_tcmalloc        tcmalloc_prog.cc + gperftools' static libtcmalloc_minimal.a
#   cxx_static_tcmalloc_ctor   cxx_static_tcmalloc linked with libctorblock.so
#   unpatchable                unpatchable.c: its own malloc, and a free that is one `ret`
#   c_je_defrag                defrag_hint.c + libjemalloc_je.a: Redis' je_get_defrag_hint
#   c_je_stats_prefix          stats_prog.c -DAPI_JE -DJE_PREFIX + libjemalloc_je.a: reads its
#                              jemalloc's statistics (mallctl) while it allocates, as Redis/Valkey
#   c_je_stats_static          the same on the unprefixed libjemalloc.a
#   c_je_stats_dynamic         the same linked with -ljemalloc (libjemalloc.so.2)
#   c_tc_stats_static          stats_prog.c -DAPI_TC + libtcmalloc_minimal.a (MallocExtension)
#   c_tc_stats_dynamic         the same linked with -ltcmalloc_minimal (libtcmalloc_minimal.so.4)
#   validator-rjem-stripped    a stripped copy of validator-rjem (when that exists: `make
#                              ownalloc` builds the validator variants first)
#   validator-je-stripped      the same of validator-je (its malloc family still in .dynsym)
#
# Idempotent: an output newer than its inputs (and this script) is left alone.
# Needs gcc, g++, binutils (nm, objcopy, ar, strip), libjemalloc-dev and
# libgoogle-perftools-dev (tools/test-deps.sh installs them).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
src=$root/itest/programs/ownalloc
out=${OWNALLOC_DIR:-$root/target/ownalloc}
bin=$out/bin
work=$out/work
mkdir -p "$bin" "$work"
self=$src/build.sh

CC=${CC:-cc}
CXX=${CXX:-c++}
multiarch=$($CC -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
libdir=/usr/lib/$multiarch
je_a=$libdir/libjemalloc.a
tc_a=$libdir/libtcmalloc_minimal.a

missing() {
  echo "itest/programs/ownalloc/build.sh: $1 not found: install $2 (apt-get install $2; tools/test-deps.sh does as root)" >&2
  exit 1
}
[ -f "$je_a" ] || missing "$je_a" libjemalloc-dev
[ -f "$tc_a" ] || missing "$tc_a" libgoogle-perftools-dev
for t in nm objcopy ar strip; do command -v $t >/dev/null || missing "$t" binutils; done
command -v "$CXX" >/dev/null || missing "$CXX" g++

# stale OUT INPUT...: true when OUT is missing or older than an input or this script.
stale() {
  local o=$1 f
  shift
  [ -e "$o" ] || return 0
  for f in "$@" "$self"; do
    [ "$f" -nt "$o" ] && return 0
  done
  return 1
}
say() { echo "ownalloc: $*"; }

CFLAGS=(-O2 -g -pthread -Wall -Wextra)
CXXFLAGS=(-O2 -g -pthread -std=c++17 -fsized-deallocation -Wall -Wextra)
JE_LIBS=(-pthread -ldl -lm)

# --- libctorblock.so
if stale "$bin/libctorblock.so" "$src/ctorblock.c"; then
  say libctorblock.so
  $CC -O2 -g -fPIC -shared -Wall -Wextra -o "$bin/libctorblock.so" "$src/ctorblock.c"
fi
CTOR=(-DCTORBLOCK -L"$bin" -lctorblock -Wl,-rpath,'$ORIGIN')

# --- c_static_jemalloc: the archive's malloc family lands in the executable (the C++
# operator new/delete object, jemalloc_cpp.o, is not pulled in by a C program).
if stale "$bin/c_static_jemalloc" "$src/jemalloc_prog.c" "$je_a"; then
  say c_static_jemalloc
  $CC "${CFLAGS[@]}" -o "$bin/c_static_jemalloc" "$src/jemalloc_prog.c" "$je_a" "${JE_LIBS[@]}"
fi
if stale "$bin/c_static_jemalloc_ctor" "$src/jemalloc_prog.c" "$je_a" "$bin/libctorblock.so"; then
  say c_static_jemalloc_ctor
  $CC "${CFLAGS[@]}" -o "$bin/c_static_jemalloc_ctor" "$src/jemalloc_prog.c" "${CTOR[@]}" \
    "$je_a" "${JE_LIBS[@]}"
fi

# --- c_je_prefix: jemalloc configured --with-jemalloc-prefix=je_, as Redis and Valkey build it,
# made from Debian's archive by renaming every public symbol it defines (the ones without
# jemalloc's private je_ namespace), without the C++ object.
je_pfx_a=$work/libjemalloc_je.a
if stale "$je_pfx_a" "$je_a"; then
  say "libjemalloc_je.a (public symbols renamed je_*)"
  cp "$je_a" "$work/libjemalloc_tmp.a"
  ar d "$work/libjemalloc_tmp.a" jemalloc_cpp.o
  nm -g --defined-only "$work/libjemalloc_tmp.a" 2>/dev/null |
    awk 'NF == 3 && $3 !~ /^(je_|_|DW\.)/ { print $3, "je_" $3 }' | sort -u >"$work/je_prefix.map"
  for s in malloc free calloc realloc mallocx sdallocx mallctl malloc_conf malloc_message; do
    grep -q "^$s je_$s\$" "$work/je_prefix.map" ||
      { echo "build.sh: $je_a does not define $s" >&2; exit 1; }
  done
  objcopy --redefine-syms="$work/je_prefix.map" "$work/libjemalloc_tmp.a" "$je_pfx_a.tmp"
  rm -f "$work/libjemalloc_tmp.a"
  if nm -g --defined-only "$je_pfx_a.tmp" 2>/dev/null | grep -E ' [TW] (malloc|free|calloc|realloc)$' >/dev/null; then
    echo "build.sh: $je_pfx_a.tmp still defines an unprefixed malloc" >&2
    exit 1
  fi
  mv "$je_pfx_a.tmp" "$je_pfx_a"
fi
if stale "$bin/c_je_prefix" "$src/jemalloc_prog.c" "$je_pfx_a"; then
  say c_je_prefix
  # -rdynamic as Redis/Valkey link: je_malloc, je_free, ... exported in .dynsym.
  $CC "${CFLAGS[@]}" -rdynamic -DJE_PREFIX -o "$bin/c_je_prefix" "$src/jemalloc_prog.c" "$je_pfx_a" "${JE_LIBS[@]}"
fi

# --- c_je_defrag: Redis' and Valkey's je_get_defrag_hint beside libjemalloc_je.a (defrag_hint.c).
if stale "$bin/c_je_defrag" "$src/defrag_hint.c" "$je_pfx_a"; then
  say c_je_defrag
  $CC "${CFLAGS[@]}" -rdynamic -o "$bin/c_je_defrag" "$src/defrag_hint.c" "$je_pfx_a" "${JE_LIBS[@]}"
fi

# --- the statistics readers (stats_prog.c), on each way a program links jemalloc or tcmalloc.
if stale "$bin/c_je_stats_prefix" "$src/stats_prog.c" "$je_pfx_a"; then
  say c_je_stats_prefix
  $CC "${CFLAGS[@]}" -rdynamic -DAPI_JE -DJE_PREFIX -o "$bin/c_je_stats_prefix" "$src/stats_prog.c" "$je_pfx_a" "${JE_LIBS[@]}"
fi
if stale "$bin/c_je_stats_static" "$src/stats_prog.c" "$je_a"; then
  say c_je_stats_static
  $CC "${CFLAGS[@]}" -DAPI_JE -o "$bin/c_je_stats_static" "$src/stats_prog.c" "$je_a" "${JE_LIBS[@]}"
fi
if stale "$bin/c_je_stats_dynamic" "$src/stats_prog.c"; then
  say c_je_stats_dynamic
  $CC "${CFLAGS[@]}" -DAPI_JE -o "$bin/c_je_stats_dynamic" "$src/stats_prog.c" -ljemalloc -pthread
fi
if stale "$bin/c_tc_stats_static" "$src/stats_prog.c" "$tc_a"; then
  say c_tc_stats_static
  # The C++ runtime for the archive's C++ code, linked by the C++ driver.
  $CXX -O2 -g -pthread -x c -std=gnu11 -DAPI_TC -Wall -Wextra -c -o "$work/stats_prog_tc.o" "$src/stats_prog.c"
  $CXX -O2 -g -pthread -o "$bin/c_tc_stats_static" "$work/stats_prog_tc.o" "$tc_a"
fi
if stale "$bin/c_tc_stats_dynamic" "$src/stats_prog.c"; then
  say c_tc_stats_dynamic
  $CC "${CFLAGS[@]}" -DAPI_TC -o "$bin/c_tc_stats_dynamic" "$src/stats_prog.c" -ltcmalloc_minimal -pthread
fi

# --- cxx_static_tcmalloc: malloc family, tc_* and operator new/delete in the executable.
if stale "$bin/cxx_static_tcmalloc" "$src/tcmalloc_prog.cc" "$tc_a"; then
  say cxx_static_tcmalloc
  $CXX "${CXXFLAGS[@]}" -o "$bin/cxx_static_tcmalloc" "$src/tcmalloc_prog.cc" "$tc_a"
fi
if stale "$bin/cxx_static_tcmalloc_ctor" "$src/tcmalloc_prog.cc" "$tc_a" "$bin/libctorblock.so"; then
  say cxx_static_tcmalloc_ctor
  $CXX "${CXXFLAGS[@]}" -o "$bin/cxx_static_tcmalloc_ctor" "$src/tcmalloc_prog.cc" "${CTOR[@]}" "$tc_a"
fi

# --- unpatchable: -fno-builtin, or gcc turns malloc+memset in calloc into a call of calloc.
if stale "$bin/unpatchable" "$src/unpatchable.c"; then
  say unpatchable
  $CC -O2 -g -fno-builtin -fcf-protection=none -Wall -Wextra -o "$bin/unpatchable" "$src/unpatchable.c"
fi
free_size=$(nm -S "$bin/unpatchable" | awk '$4 == "free" { print $2 }')
if [ "$free_size" != 0000000000000001 ]; then
  echo "build.sh: unpatchable's free is not a 1-byte function (size ${free_size:-?}): check the compiler flags" >&2
  exit 1
fi

# --- stripped copies of the validator variants (built by `make ownalloc`).
for v in rjem je; do
  if [ -f "$bin/validator-$v" ]; then
    if stale "$bin/validator-$v-stripped" "$bin/validator-$v"; then
      say "validator-$v-stripped"
      strip -o "$bin/validator-$v-stripped" "$bin/validator-$v"
    fi
  else
    say "validator-$v not built yet: no validator-$v-stripped (make ownalloc builds both)"
  fi
done

# --- what each program must define for the tests to mean anything (a linker that stopped
# exporting the malloc family, say, would make the own-allocator tests test nothing).
defines() { # FILE symtab|dynsym SYMBOL...
  local f=$1 table=$2 s
  local opt=()
  [ "$table" = dynsym ] && opt=(-D)
  shift 2
  for s in "$@"; do
    nm "${opt[@]}" --defined-only "$bin/$f" 2>/dev/null | awk '{ print $NF }' | grep -x "$s" >/dev/null ||
      { echo "build.sh: $f does not define $s in its .$table" >&2; exit 1; }
  done
}
defines c_static_jemalloc dynsym malloc free calloc realloc posix_memalign aligned_alloc memalign malloc_usable_size
defines c_static_jemalloc symtab mallocx rallocx sdallocx dallocx nallocx mallctl
defines c_je_prefix dynsym je_malloc je_free je_calloc je_realloc je_mallocx je_rallocx je_sdallocx je_dallocx je_mallctl
defines cxx_static_tcmalloc dynsym malloc free calloc realloc _Znwm _ZdlPv _ZdlPvm _ZnwmSt11align_val_t
defines cxx_static_tcmalloc symtab tc_malloc tc_free
defines unpatchable dynsym malloc free calloc realloc
defines c_je_defrag dynsym je_malloc je_free je_mallocx je_sdallocx je_mallctl je_get_defrag_hint
defines c_je_stats_prefix dynsym je_malloc je_free je_mallctl je_mallctlnametomib je_mallctlbymib je_malloc_stats_print
defines c_je_stats_static symtab malloc free mallctl mallctlnametomib mallctlbymib malloc_stats_print
defines c_tc_stats_static symtab tc_malloc MallocExtension_GetNumericProperty MallocExtension_GetStats MallocExtension_ReleaseFreeMemory MallocExtension_GetAllocatedSize
