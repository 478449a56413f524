#!/usr/bin/env bash
# .ci/fuzz.sh: run every fuzz target of the module for a bounded number of
# executions.
#
# Called by .ci/run before `go test`. It discovers the targets itself
# (`go test -list '^Fuzz' ./...`), so a new Fuzz function in any package is
# fuzzed without editing this file, then runs each one alone
# (`go test -run '^$' -fuzz '^Name$' -fuzztime Nx PKG`) and prints, per
# target, the executions, new corpus entries and the time taken.
#
# Why a count and not a duration: with a duration (`-fuzztime 5s`) Go 1.26's
# fuzzing coordinator can report "context deadline exceeded" as a failure
# when the deadline fires while a worker is mid-execution (golang/go#75804,
# fixed in Go 1.27). A count has no deadline to race, so a failure here is
# always a real finding: a failing input written to testdata/fuzz/.
#
# Size: FUZZ_EXECS (default 12000) executions per target, about 2-6 s each
# on a 2-core machine, plus a few seconds to build the instrumented binary
# and replay the seed corpus. FUZZ_TIMEOUT (default 3m) bounds each target
# so a hang fails with go's own "test timed out" report. Every target runs
# even when one fails; the script fails at the end if any did. Commit a
# failing input as a regression seed once the bug is fixed.
set -euo pipefail
cd "$(dirname "$0")/.."

execs_per_target=${FUZZ_EXECS:-12000}
timeout=${FUZZ_TIMEOUT:-3m}
began=$(date +%s)

# `go test -list` prints a package's matching names, then "ok <pkg> <time>".
listing=$(go test -list '^Fuzz' ./...)
targets=()
pending=()
while IFS= read -r line; do
  case "$line" in
    Fuzz*) pending+=("$line") ;;
    ok*)
      pkg=$(awk '{print $2}' <<<"$line")
      for name in "${pending[@]}"; do targets+=("$pkg $name"); done
      pending=()
      ;;
  esac
done <<<"$listing"

count=${#targets[@]}
if [ "$count" -eq 0 ]; then
  echo "no fuzz targets found"; exit 1
fi
echo "$count fuzz targets, ${execs_per_target} executions each"

failed=()
for target in "${targets[@]}"; do
  read -r pkg name <<<"$target"
  start=$(date +%s)
  if output=$(go test -run '^$' -fuzz "^${name}\$" -fuzztime "${execs_per_target}x" -timeout "$timeout" "$pkg" 2>&1); then
    status=ok
  else
    status=FAIL
    failed+=("$pkg $name")
  fi
  # go prints "fuzz: elapsed: 5s, execs: 123456 (24691/sec), new interesting: 2 (total: 30)".
  last=$(grep -E '^fuzz: elapsed: .*execs: [0-9]+' <<<"$output" | tail -n 1 || true)
  execs=$(sed -nE 's/.*execs: ([0-9]+) .*/\1/p' <<<"$last")
  fuzzed=$(sed -nE 's/^fuzz: elapsed: ([0-9]+)s.*/\1/p' <<<"$last")
  # The rate in that line is the last interval's; print the run's average.
  rate=""
  [ -n "$execs" ] && [ "${fuzzed:-0}" -gt 0 ] && rate=" ($(( execs / fuzzed ))/sec)"
  interesting=$(sed -nE 's/.*new interesting: ([0-9]+) \(total: ([0-9]+)\).*/\1 new, corpus \2/p' <<<"$last")
  printf '%-4s %-42s %-26s %-22s fuzzed %ss, took %ss\n' "$status" "${pkg#github.com/ledgerworks/ledger/}.$name" \
    "${execs:-no} execs${rate}" "${interesting:-}" "${fuzzed:-0}" "$(( $(date +%s) - start ))"
  if [ "$status" = FAIL ]; then
    echo "$output" | tail -n 40
  fi
done

echo "fuzzing took $(( $(date +%s) - began ))s"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzzing failed for: ${failed[*]}"
  exit 1
fi
