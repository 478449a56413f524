#!/usr/bin/env bash
# .ci/fuzz.sh: run every fuzz target of the module for a short, bounded time.
#
# Called by .ci/run before `go test`. It discovers the targets itself
# (`go test -list '^Fuzz' ./...`), so a new Fuzz function in any package is
# fuzzed without editing this file, then runs each one alone
# (`go test -run '^$' -fuzz '^Name$' -fuzztime Ns PKG`) and prints, per
# target, the executions and new corpus entries from go's own output.
#
# Time: the whole run aims to end within FUZZ_BUDGET_SECONDS (default 170).
# Before each target the time left is shared among the targets left, less
# FUZZ_OVERHEAD_SECONDS (default 3) each for building the instrumented test
# binary and replaying the seed corpus, and clamped to FUZZ_SECONDS_MIN (3)
# .. FUZZ_SECONDS_MAX (10) seconds of fuzzing. Every target runs even when
# one fails; the script fails at the end if any did. go writes a failing
# input to <pkg>/testdata/fuzz/<Name>/: commit it as a regression seed once
# the bug is fixed.
set -euo pipefail
cd "$(dirname "$0")/.."

budget=${FUZZ_BUDGET_SECONDS:-170}
overhead=${FUZZ_OVERHEAD_SECONDS:-3}
seconds_min=${FUZZ_SECONDS_MIN:-3}
seconds_max=${FUZZ_SECONDS_MAX:-10}
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
echo "$count fuzz targets within about ${budget}s"

failed=()
left=$count
for target in "${targets[@]}"; do
  read -r pkg name <<<"$target"
  start=$(date +%s)
  seconds=$(( (budget - (start - began)) / left - overhead ))
  (( seconds < seconds_min )) && seconds=$seconds_min
  (( seconds > seconds_max )) && seconds=$seconds_max
  left=$(( left - 1 ))
  if output=$(go test -run '^$' -fuzz "^${name}\$" -fuzztime "${seconds}s" "$pkg" 2>&1); then
    status=ok
  else
    status=FAIL
    failed+=("$pkg $name")
  fi
  # go prints "fuzz: elapsed: 5s, execs: 123456 (24691/sec), new interesting: 2 (total: 30)".
  last=$(grep -E '^fuzz: elapsed: .*execs: [0-9]+' <<<"$output" | tail -n 1 || true)
  # A target that passed without executions did not get past replaying its
  # corpus in its time (a busy machine, a slow TestMain).
  none="0 execs (too little time)"
  [ "$status" = FAIL ] && none="no executions"
  # The rate in that line is the last interval's; print the run's average.
  execs=$(sed -nE 's/.*execs: ([0-9]+) .*/\1/p' <<<"$last")
  [ -n "$execs" ] && execs="$execs execs ($(( execs / seconds ))/sec)"
  interesting=$(sed -nE 's/.*new interesting: ([0-9]+) \(total: ([0-9]+)\).*/\1 new, corpus \2/p' <<<"$last")
  printf '%-4s %-42s %-26s %-22s fuzzed %ss, took %ss\n' "$status" "${pkg#github.com/ledgerworks/ledger/}.$name" \
    "${execs:-$none}" "${interesting:-}" "$seconds" "$(( $(date +%s) - start ))"
  if [ "$status" = FAIL ]; then
    echo "$output" | tail -n 40
  fi
done

echo "fuzzing took $(( $(date +%s) - began ))s"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzzing failed for: ${failed[*]}"
  exit 1
fi
