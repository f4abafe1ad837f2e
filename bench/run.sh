#!/usr/bin/env bash
# make bench: measure what the shim costs against the bare allocators and heaptrack.
#
#   bash bench/run.sh           full run (about 15 minutes on 2 cores, replay fidelity
#                               included): prints the table, rewrites BENCHMARKS.md and
#                               bench/results.json
#   bash bench/run.sh --smoke   runs each bench program once, briefly, bare and under the
#                               shim, and checks they still work and their logs decode;
#                               writes nothing outside bench/out/
#
# Needs target/release/libshim.so and target/release/shimlog (`make build`). Installs the
# Debian packages it compares against (libjemalloc2, libmimalloc2.0, heaptrack) when they
# are missing and it can; a configuration whose package is still missing is marked skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=full
case "${1:-}" in
  "") ;;
  --smoke) mode=smoke ;;
  *) echo "bench/run.sh: unknown argument '$1' (accepted: --smoke, or nothing)" >&2; exit 2 ;;
esac

for f in target/release/libshim.so target/release/shimlog; do
  [ -e "$f" ] || { echo "bench/run.sh: $f is missing: run 'make build' first" >&2; exit 1; }
done

# The allocators and the peer tool the full run compares against.
if [ "$mode" = full ]; then
  missing=()
  [ -e /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] || missing+=(libjemalloc2)
  ls /usr/lib/x86_64-linux-gnu/libmimalloc.so.2* >/dev/null 2>&1 || missing+=(libmimalloc2.0)
  command -v heaptrack >/dev/null 2>&1 || missing+=(heaptrack)
  command -v sqlite3 >/dev/null 2>&1 || missing+=(sqlite3)  # a real program for replay fidelity
  if [ ${#missing[@]} -gt 0 ]; then
    echo "bench: installing ${missing[*]}" >&2
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
      export DEBIAN_FRONTEND=noninteractive
      timeout 180 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
        { timeout 180 apt-get update -qq >/dev/null 2>&1 &&
          timeout 180 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; } ||
        echo "bench: could not install ${missing[*]}; those configurations are skipped" >&2
    else
      echo "bench: cannot install ${missing[*]} (needs root and apt-get); those configurations are skipped" >&2
    fi
  fi
fi

# The log generator the shimlog stats measurement reads, and the reader's stages timed on
# their own (cargo examples, not part of make build; rebuilt when their source changed, as
# cargo decides, so that they take the arguments the measurement passes).
# genlog in both modes: the smoke runs of bench/scale.py and bench/compare.py read its logs.
cargo build --release -q -p shimlog --example genlog
if [ "$mode" = full ]; then
  cargo build --release -q -p recorder --example zstdspeed --example readspeed
fi
# The columnar frames' bytes and recorder work, timed on logs (bench/columns.py, both modes).
cargo build --release -q -p recorder --example colbytes --example colspeed

# The workloads, built the same way as the demo.
bin=bench/out/bin
mkdir -p "$bin"
# The replay fidelity programs (bench/fidelity.py) are built the same way. A workload
# that includes bench/workloads/rand.h is rebuilt when the header is newer, too.
for src in bench/workloads/*.c bench/workloads/fidelity/*.c workloads/demo.c; do
  exe="$bin/$(basename "$src" .c)"
  dep="$src"
  if grep -q '^#include "rand.h"' "$src" && [ bench/workloads/rand.h -nt "$src" ]; then dep=bench/workloads/rand.h; fi
  if [ ! -x "$exe" ] || [ "$dep" -nt "$exe" ]; then
    cc -O2 -pthread -o "$exe" "$src"
  fi
done

# The driver: stdlib-only Python 3; the system's own interpreter when there is one.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
exec "$py" bench/bench.py "--$mode"
