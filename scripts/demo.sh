#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, list the devices, record a short clip with
# audio and take a photo with zero shutter lag from the default camera and microphone (the built-in test
# devices when the machine has none), then show what ffprobe and exiftool read in them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build-release.sh gcapture
gcapture=.build/release/gcapture
"$gcapture" --version
"$gcapture" devices
mkdir -p out
"$gcapture" photo --quality balanced --overwrite --output out/photo.jpg
exiftool -s -ImageSize -Make -Model -DateTimeOriginal -Orientation -Software out/photo.jpg
"$gcapture" record --duration 3 --overwrite --output out/clip.mp4
ffprobe -v error -show_entries format=duration:stream=codec_type,codec_name,width,height,avg_frame_rate -of compact out/clip.mp4
