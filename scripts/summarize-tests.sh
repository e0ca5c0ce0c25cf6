#!/usr/bin/env bash
# Prints "N passed, N failed, N skipped" for XCTest logs (the per-bundle totals), and fails when any failed.
set -euo pipefail
awk '
  /^Test Case .* passed \(/  { passed++ }
  /^Test Case .* failed \(/  { failed++ }
  /^Test Case .* skipped \(/ { skipped++ }
  END {
    printf "tests: %d passed, %d failed, %d skipped\n", passed, failed, skipped
    exit (failed > 0 || passed == 0) ? 1 : 0
  }' "$@"
