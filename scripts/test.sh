#!/usr/bin/env bash
# Every test: installs what is missing, builds everything (tests, CLI, benchmark, examples, the shipped CLI), runs the suite.
# Device tests skip on machines without /dev/video0; .ci/run also runs them inside the v4l2 test VM.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
swift build --build-tests
# The CLI as it ships (ShippedBuildTests run it): optimized, the Swift runtime linked in.
bash scripts/build-release.sh gcapture
mkdir -p .build
# The suite takes ~15 min on an idle 2-core machine (the tests' own time summed: 894 s on 2026-11-27, a minute
# of it the motion detector watching a minute of noise); a test that hangs must not hold CI forever. The limit
# leaves room for a loaded machine; GCAPTURE_TEST_TIMEOUT (seconds) overrides it. Line-buffered, so the log of a
# stopped run shows where it stopped.
limit=${GCAPTURE_TEST_TIMEOUT:-1800}
set +e
timeout --kill-after=20 "$limit" stdbuf -oL -eL swift test --skip-build --disable-swift-testing "$@" 2>&1 | tee .build/test.log
status=${PIPESTATUS[0]}
set -e
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  last=$(grep -E "^Test Case '.*' started" .build/test.log | tail -1 || true)
  echo "Error: the test suite did not finish within $limit s and was stopped (GCAPTURE_TEST_TIMEOUT); the last test started: ${last:-none}" >&2
  exit 1
fi
bash scripts/summarize-tests.sh .build/test.log
# A crash of the test process (a signal, a Swift runtime trap) ends the log early without a failed test.
if [ "$status" -ne 0 ]; then
  echo "Error: swift test exited with status $status (a crash or an error outside a test case; see .build/test.log)" >&2
  exit 1
fi
