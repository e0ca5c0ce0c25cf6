#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, list the devices, take a photo with zero
# shutter lag from the default camera (the built-in test camera when the machine has none) and show what
# exiftool reads in it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
swift build -c release --product gcapture
gcapture=.build/release/gcapture
"$gcapture" --version
"$gcapture" devices
mkdir -p out
"$gcapture" photo --quality balanced --output out/photo.jpg
exiftool -s -ImageSize -Make -Model -DateTimeOriginal -Orientation -Software out/photo.jpg
