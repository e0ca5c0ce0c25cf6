#!/usr/bin/env bash
# Writes scripts/symbol-order.txt: the functions the shipped programs run, in the order valgrind first saw them,
# for lld to lay out side by side (scripts/build-release.sh says why). Run it again when the engine's code
# changes much; a function missing from the list still works, it only lies elsewhere.
# Needs valgrind (apt install valgrind). Takes a few minutes: every run is under callgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "make-symbol-order: needs valgrind (apt install valgrind)" >&2; exit 1; }
bash scripts/build-release.sh gcapture
bash scripts/build-release.sh gcapture-bench

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# valgrind cannot read the debug information lld writes; the symbol table is all it needs.
for program in gcapture gcapture-bench; do
  strip --strip-debug -o "$work/$program" ".build/release/$program"
done

profile() {  # NAME PROGRAM ARGS...: one callgrind profile of the program's run
  local name=$1; shift
  timeout 900 valgrind --tool=callgrind --demangle=no --dump-instr=no --callgrind-out-file="$work/$name.out" \
    "$@" >"$work/$name.log" 2>&1 || { echo "make-symbol-order: $name failed:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
}
# The test camera at 1080p30 everywhere: frames read by the app, a recording with audio, photos, the CLI's runs.
profile frames "$work/gcapture-bench" child engine-frames --seconds 1
profile record "$work/gcapture-bench" child record --seconds 1.5 --file "$work/bench.mp4" --with-outputs
profile cli-record "$work/gcapture" record --camera test --microphone test-microphone --preset hd1920x1080 \
  --duration 1.5 --output "$work/cli.mp4"
# A smaller photo: under callgrind a 1080p capture can wait past its 2 s for a frame.
profile cli-photo "$work/gcapture" photo --camera test --preset vga640x480 --output "$work/cli.jpg"
profile cli-frames "$work/gcapture" frames --camera test --preset hd1920x1080 --duration 1

nm --defined-only "$work/gcapture" "$work/gcapture-bench" 2>/dev/null | awk '$2 ~ /^[tTwW]$/ {print $3}' | sort -u >"$work/defined"
python3 - "$work" >scripts/symbol-order.txt <<'PY'
import glob, re, sys
work = sys.argv[1]
defined = set(open(f"{work}/defined").read().split())
seen, order = set(), []
for name in ("frames", "record", "cli-record", "cli-photo", "cli-frames"):
    for line in open(f"{work}/{name}.out", errors="replace"):
        match = re.match(r"^c?fn=\(\d+\) (.+)$", line.rstrip("\n"))
        if not match:
            continue
        symbol = match.group(1).split("'")[0]  # callgrind marks recursion levels as 'N
        if symbol in defined and symbol not in seen:
            seen.add(symbol)
            order.append(symbol)
print("# The functions gcapture and gcapture-bench run, for lld's --symbol-ordering-file.")
print("# Made by scripts/make-symbol-order.sh; do not edit by hand.")
print("\n".join(order))
PY
echo "make-symbol-order: $(grep -vc '^#' scripts/symbol-order.txt) functions in scripts/symbol-order.txt" >&2
