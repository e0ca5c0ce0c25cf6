#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, list the devices, capture frames from
# the default camera (the built-in test camera when the machine has none).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
swift build -c release --product gcapture
gcapture=.build/release/gcapture
"$gcapture" --version
"$gcapture" devices
"$gcapture" frames --duration 3
