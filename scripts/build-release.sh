#!/usr/bin/env bash
# Builds a product (gcapture by default, or gcapture-bench) as it ships: optimized, into .build/release, with the
# Swift runtime, Foundation and the C++ runtime linked in, and the code it runs laid out together.
# Usage: bash scripts/build-release.sh [PRODUCT]
#
# Why statically, measured with `gcapture-bench --only record` (10 s of 1080p30 + AAC, peak RSS, 3 rounds):
# linked against the toolchain's shared libraries, the engine's process holds ~20 MiB more than gst-launch-1.0
# recording the same graph, nearly all of it pages of libswiftCore, libFoundation, libFoundationEssentials and
# ICU that were read once (their heap and frames are at par). Linked in, only what the program uses is
# there: 90.7 -> 84.9 MiB. lld's packed relative relocations (DT_RELR) shrink the 1.8 MiB relocation
# table the loader reads at every start to 15 KiB: 84.9 -> ~83 MiB. The binary also runs on a machine without
# the Swift toolchain (glibc 2.36 or newer, for DT_RELR: Debian 12, Ubuntu 22.04 and later).
#
# What the process still held beyond the same graph in plain GStreamer was code: the program's own pages, read
# in 64 KiB at a time (the kernel's fault-around) wherever a function it called happened to lie, one call in the
# session's start here, one in Foundation there. scripts/symbol-order.txt lists the functions the engine runs
# (frames, photos, a recording with audio, the CLI; made by scripts/make-symbol-order.sh) and lld puts them
# side by side: `gcapture-bench child engine-frames` peaks at ~30.0 MiB instead of 32.5. libstdc++ linked in
# (from an archive-only search folder, because the toolchain's link line asks for -lstdc++, which would
# otherwise find the shared one) brings only the parts the Swift runtime uses, not all 1.4 MiB it maps.
set -euo pipefail
cd "$(dirname "$0")/.."
product=${1:-gcapture}
cxx_archive=$(clang -print-file-name=libstdc++.a 2>/dev/null || true)
[ -f "$cxx_archive" ] || { echo "build-release: libstdc++.a not found (apt install libstdc++-12-dev)" >&2; exit 1; }
static_cxx=.build/static-libstdc++
mkdir -p "$static_cxx"
ln -sfn "$cxx_archive" "$static_cxx/libstdc++.a"
# Named by its content: a new list changes the link's flags, so the program is linked again.
order=.build/symbol-order-$(sha256sum scripts/symbol-order.txt | cut -c1-16).txt
[ -f "$order" ] || cp scripts/symbol-order.txt "$order"
swift build -c release --product "$product" --static-swift-stdlib \
  -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs \
  -Xlinker -L"$PWD/$static_cxx" \
  -Xlinker --symbol-ordering-file="$PWD/$order" -Xlinker --no-warn-symbol-ordering
