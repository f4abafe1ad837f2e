#!/usr/bin/env bash
# The closing tally of `make test` / `make check`:
#   tools/tally.sh LOG SKIPLOG STATUS...
# LOG is cargo test's output, SKIPLOG the skip log the itests write (itest::skip: one line
# KIND<TAB>TEST<TAB>WHY), each STATUS the exit status of a step (cargo test, the bench smoke).
# Prints "P passed, F failed, S skipped" and each skip; exits 1 when anything failed, when a
# step failed, or when a test was skipped for a kind SHIM_TEST_EXPECTED_SKIPS (comma-separated
# kinds: cgroup, mount, root, repo) does not name. docs/testing.md says more.
set -uo pipefail
log=$1 skiplog=$2
shift 2
read -r passed failed ignored < <(awk '/^test result:/ { p += $4; f += $6; i += $8 } END { printf "%d %d %d\n", p, f, i }' "$log")
skipped=0
[ -f "$skiplog" ] && skipped=$(wc -l <"$skiplog")
# A skipped test returned early and cargo counted it passed.
passed=$((passed - skipped))
bad=0
for st in "$@"; do
  [ "$st" -eq 0 ] || bad=1
done
[ "$failed" -gt 0 ] && bad=1
IFS=',' read -ra expected <<<"${SHIM_TEST_EXPECTED_SKIPS:-}"
unexpected=()
if [ "$skipped" -gt 0 ]; then
  while IFS=$'\t' read -r kind test why; do
    ok=0
    for e in "${expected[@]}"; do [ "$e" = "$kind" ] && ok=1; done
    if [ $ok -eq 1 ]; then
      echo "skipped ($kind, expected): $test: $why"
    else
      echo "skipped ($kind, NOT expected): $test: $why"
      unexpected+=("$kind")
    fi
  done <"$skiplog"
fi
if [ "$ignored" -gt 0 ]; then
  echo "ignored: $ignored tests marked #[ignore] did not run"
  unexpected+=(ignored)
fi
echo "$passed passed, $failed failed, $((skipped + ignored)) skipped"
if [ ${#unexpected[@]} -gt 0 ]; then
  kinds=$(printf '%s\n' "${unexpected[@]}" | sort -u | paste -sd, -)
  echo "FAILED: tests skipped ($kinds) that SHIM_TEST_EXPECTED_SKIPS does not expect; where this machine cannot provide them, say so: SHIM_TEST_EXPECTED_SKIPS=$kinds make test (docs/testing.md)"
  bad=1
fi
[ $bad -eq 0 ] || { [ "$failed" -gt 0 ] || [ ${#unexpected[@]} -gt 0 ] || echo "FAILED: a step exited non-zero (see above)"; exit 1; }
