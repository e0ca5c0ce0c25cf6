#!/usr/bin/env bash
# Fuzzes the description reader (Sources/GCaptureDescription/Reader) with libFuzzer for SECONDS (default
# 60), seeded with pipelines/*.yaml and the malformed test files. The reader is built here with Yams'
# sources outside SwiftPM (a SwiftPM target cannot be a libFuzzer binary), instrumented for coverage and
# AddressSanitizer. Crashes are written to .build/fuzz/crashes/; the corpus grows in .build/fuzz/corpus/.
#   bash scripts/fuzz-descriptions.sh 600
set -euo pipefail
seconds="${1:-60}"
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "usage: $0 [SECONDS]" >&2; exit 64; }
cd "$(dirname "$0")/.."
root="$PWD"
work="$root/.build/fuzz"
yams="$root/.build/checkouts/Yams"
[ -d "$yams" ] || swift package resolve >/dev/null
mkdir -p "$work/obj" "$work/corpus" "$work/crashes"

# CYaml (C) and Yams (Swift), instrumented so the fuzzer sees coverage inside the YAML parser too.
for source in "$yams"/Sources/CYaml/src/*.c; do
    clang -c -O1 -g -fsanitize=fuzzer-no-link,address -DYAML_DECLARE_STATIC -I "$yams/Sources/CYaml/include" \
        "$source" -o "$work/obj/$(basename "$source" .c).o"
done
swiftc -emit-module -emit-object -whole-module-optimization -parse-as-library -module-name Yams -D SWIFT_PACKAGE \
    -Xcc -DYAML_DECLARE_STATIC -I "$yams/Sources/CYaml/include" -sanitize=fuzzer,address -O -g \
    -emit-module-path "$work/obj/Yams.swiftmodule" -o "$work/obj/Yams.o" "$yams"/Sources/Yams/*.swift
swiftc -parse-as-library -module-name DescriptionFuzz -sanitize=fuzzer,address -O -g \
    -I "$work/obj" -Xcc -I"$yams/Sources/CYaml/include" \
    Sources/GCaptureDescription/Reader/*.swift Fuzz/DescriptionReaderFuzz.swift \
    "$work"/obj/*.o -o "$work/description-fuzzer"

seeds="$work/seeds"
rm -rf "$seeds" && mkdir -p "$seeds"
cp pipelines/*.yaml Tests/GCaptureTests/Descriptions/malformed/*.yaml "$seeds/"

# ASan's leak check off: Yams keeps caches for the process's life, which are not leaks of the reader.
# Swift's own backtracer off: it reads memory ASan guards, turning a clean trap into a confusing report.
set +e
SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 "$work/description-fuzzer" "$work/corpus" "$seeds" \
    -dict=Fuzz/description.dict -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$work/crashes/" >"$work/last-run.log" 2>&1
status=$?
set -e
grep -E "INITED|DONE|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|ERROR|SUMMARY|Test unit written|^artifact" \
    "$work/last-run.log" || true
echo "corpus: $(ls "$work/corpus" | wc -l) files in $work/corpus; full log: $work/last-run.log"
[ "$status" -eq 0 ] || echo "the fuzzer found a problem (exit $status): see the log and $work/crashes/" >&2
exit "$status"
