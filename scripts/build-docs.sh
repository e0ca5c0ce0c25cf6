#!/usr/bin/env bash
# Builds GCapture's DocC catalog (Sources/GCapture/GCapture.docc) with swift-docc-plugin, as a static site for
# any web server, and fails on any DocC warning (a broken symbol link, an article no topic reaches).
#   bash scripts/build-docs.sh [OUTDIR]     (default .build/docs; open OUTDIR/documentation/gcapture/index.html
#                                            through a web server, e.g. python3 -m http.server -d OUTDIR)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.build/docs}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# --disable-indexing: no IDE index is wanted; --transform-for-static-hosting: plain files, no server rules.
if ! swift package --allow-writing-to-directory "$out" generate-documentation --target GCapture \
     --disable-indexing --transform-for-static-hosting --output-path "$out" --warnings-as-errors >"$log" 2>&1; then
  grep -vE "prohibited flag" "$log" >&2
  echo "build-docs: the documentation did not build (above)" >&2
  exit 1
fi
for page in gcapture gcapture/gettingstarted gcapture/portingfromavfoundation gcapture/takingphotos \
            gcapture/recordingmovies gcapture/handlinginterruptions gcapture/streaminglive gcapture/descriptionfiles gcapture/capturesession; do
  [ -f "$out/documentation/$page/index.html" ] || [ -f "$out/data/documentation/$page.json" ] \
    || { echo "build-docs: $page is missing from $out" >&2; exit 1; }
done
echo "documentation: $out/documentation/gcapture/index.html"
