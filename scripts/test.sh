#!/usr/bin/env bash
# Every test: installs what is missing, builds everything (tests, CLI, benchmark, examples), runs the suite.
# Device tests skip on machines without /dev/video0; .ci/run also runs them inside the v4l2 test VM.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
swift build --build-tests
mkdir -p .build
swift test --skip-build --disable-swift-testing "$@" 2>&1 | tee .build/test.log
bash scripts/summarize-tests.sh .build/test.log
