#!/usr/bin/env bash
# Builds a product (gcapture by default, or gcapture-bench) as it ships: optimized, into .build/release, with the
# Swift runtime and Foundation linked in. Usage: bash scripts/build-release.sh [PRODUCT]
#
# Why statically, measured with `gcapture-bench --only record` (10 s of 1080p30 + AAC, peak RSS, 3 rounds):
# linked against the toolchain's shared libraries, the engine's process holds ~20 MiB more than gst-launch-1.0
# recording the same graph, nearly all of it pages of libswiftCore, libFoundation, libFoundationEssentials and
# ICU that were read once (their heap and frames are at par). Linked in, only what the program uses is
# there: 90.7 -> 84.9 MiB. lld's packed relative relocations (DT_RELR) shrink the 1.8 MiB relocation
# table the loader reads at every start to 15 KiB: 84.9 -> ~83 MiB. The binary also runs on a machine without
# the Swift toolchain (glibc 2.36 or newer, for DT_RELR: Debian 12, Ubuntu 22.04 and later).
set -euo pipefail
cd "$(dirname "$0")/.."
product=${1:-gcapture}
swift build -c release --product "$product" --static-swift-stdlib \
  -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs
