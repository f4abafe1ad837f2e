#!/usr/bin/env bash
# What `make test` and `make check` need beyond cargo, and installs it where it can.
#
#   tools/test-deps.sh           as root: installs what is missing (Debian packages with
#                                apt-get, Python packages with pip); otherwise, when anything is
#                                missing, prints one line naming it and how to get it, exits 1
#   tools/test-deps.sh --check   only checks (the one line, exit 1), never installs
#
# Each need is one line of DEBS or PIPS: "TEST|PACKAGE|WHY". TEST is a shell condition that
# holds when the need is met (no "|" in it: "||" would split the line; a need whose test is
# cut short names an empty package, which the check below refuses). Extend the arrays to add
# a need; nothing else changes.
set -euo pipefail
cd "$(dirname "$0")/.."

multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)

DEBS=(
  "command -v gcc|gcc|C workloads and the shim's C tests"
  "command -v g++|g++|itest/programs/ownalloc: programs that bring their own allocator"
  "command -v make|make|the build"
  "command -v git|git|itest crash.rs: git under the shim"
  "command -v python3|python3|bench, the export and fleet tests"
  "command -v objcopy|binutils|itest/programs/ownalloc: nm, objcopy, ar, strip"
  "command -v flock|util-linux|one cargo build at a time in target/ownalloc"
  "test -f /usr/lib/$multiarch/libjemalloc.a|libjemalloc-dev|itest/programs/ownalloc: static jemalloc; itest jemalloc_namespace.rs: -ljemalloc"
  "test -f /usr/lib/$multiarch/libtcmalloc_minimal.a|libgoogle-perftools-dev|itest/programs/ownalloc: static tcmalloc"
  "test -f /usr/include/mimalloc.h|libmimalloc-dev|itest mimalloc_api.rs: -lmimalloc (Debian's mimalloc, the oracle)"
  "command -v redis-server|redis-server|itest redis.rs: Debian's redis-server under the shim"
  "test -f /usr/lib/$multiarch/libc.a|libc6-dev|itest attach.rs: a static executable to refuse"
  "test -f /usr/lib/$multiarch/libz.so.1|zlib1g|itest attach.rs: a library to load into a running program"
  "command -v redis-benchmark|redis-tools|itest redis.rs: the load"
  "test -n \"\$(command -v chromium chromium-browser)\"|chromium|shimlog tests report.rs: the page in a real browser"
  "command -v go|golang-go|itest stacks.rs: go tool pprof reads shimlog pprof's files"
  "python3 -m pip --version|python3-pip|the Python packages below"
  "command -v java|default-jre-headless|itest fleets.rs: Apache Spark's runtime"
  "command -v heaptrack|heaptrack|the bench smoke (make test) runs heaptrack once"
  "command -v valgrind|valgrind|itest budget.rs: the instruction budgets count with callgrind"
  "command -v firefox-esr|firefox-esr|itest firefox.rs: Firefox ESR (mozjemalloc in a stripped executable) under the shim"
)

PIPS=(
  "python3 -c 'import duckdb'|duckdb|shimlog tests export.rs and itest fleets.rs query the Parquet files"
  "python3 -c 'import pyspark'|pyspark|itest fleets.rs: the same queries in Apache Spark (local mode)"
)

check_only=0
[ "${1:-}" = "--check" ] && check_only=1

missing() { # ARRAY_NAME: the packages of its unmet needs
  local -n arr=$1
  local line test pkg
  for line in "${arr[@]}"; do
    IFS='|' read -r test pkg _ <<<"$line"
    bash -c "$test" >/dev/null 2>&1 || echo "$pkg"
  done
}

for line in "${DEBS[@]}" "${PIPS[@]}"; do
  IFS='|' read -r _ pkg _ <<<"$line"
  [ -n "$pkg" ] || { echo "tools/test-deps.sh: a need names no package (a '|' in its test?): $line" >&2; exit 2; }
done
mapfile -t debs < <(missing DEBS)
mapfile -t pips < <(missing PIPS)
command -v cargo >/dev/null 2>&1 || {
  echo "make test: cargo not found: install a Rust toolchain (https://rustup.rs)" >&2
  exit 1
}
if [ ${#debs[@]} -eq 0 ] && [ ${#pips[@]} -eq 0 ]; then
  exit 0
fi

say_missing() {
  local how=()
  [ ${#debs[@]} -gt 0 ] && how+=("apt-get install ${debs[*]}")
  [ ${#pips[@]} -gt 0 ] && how+=("pip install --break-system-packages ${pips[*]}")
  local all=("${debs[@]}" "${pips[@]}")
  echo "make test: missing ${all[*]}: run tools/test-deps.sh as root, or: ${how[0]}${how[1]:+; ${how[1]}}" >&2
}

if [ $check_only -eq 1 ] || [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  say_missing
  exit 1
fi

if [ ${#debs[@]} -gt 0 ]; then
  echo "tools/test-deps.sh: installing ${debs[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${debs[@]}" >&2
fi
if [ ${#pips[@]} -gt 0 ]; then
  echo "tools/test-deps.sh: installing ${pips[*]} (pip)" >&2
  # Debian 12's pip refuses system-wide installs without --break-system-packages; older pips
  # do not know the flag.
  python3 -m pip install -q --break-system-packages "${pips[@]}" >&2 || python3 -m pip install -q "${pips[@]}" >&2
fi
mapfile -t debs < <(missing DEBS)
mapfile -t pips < <(missing PIPS)
if [ ${#debs[@]} -gt 0 ] || [ ${#pips[@]} -gt 0 ]; then
  say_missing
  exit 1
fi
