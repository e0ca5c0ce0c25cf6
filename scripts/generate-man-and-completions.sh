#!/usr/bin/env bash
# The man page and the shell completions of gcapture, generated from its argument parser (so they list
# exactly the commands and options the program takes), and checked: the man page renders without a warning
# and names every subcommand; each completion script parses in its shell and the bash one completes.
#   bash scripts/generate-man-and-completions.sh [OUTDIR]      (default .build/share)
# Writes OUTDIR/man/man1/gcapture.1 and OUTDIR/completions/{gcapture.bash,_gcapture,gcapture.fish}.
# Install: man page to /usr/local/share/man/man1; gcapture.bash to /usr/share/bash-completion/completions/gcapture,
# _gcapture to a folder on zsh's $fpath, gcapture.fish to ~/.config/fish/completions/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.build/share}
mkdir -p "$out/man/man1" "$out/completions"

# swift-argument-parser's generate-manual plugin builds the package (debug: the build CI already has) and
# writes mdoc from the program's --experimental-dump-help.
swift package plugin generate-manual --configuration debug >/dev/null
generated=.build/plugins/GenerateManual/outputs/GCaptureCLI/gcapture.1
# Its output puts the discussions' blank lines and indented examples into the page as they are: mdoc warns
# "Empty input line" for each blank line and refills the examples into one paragraph. Blank lines become
# paragraph breaks (.Pp) and indented lines literal blocks (.Bd -literal), which keep their columns.
python3 - "$generated" "$out/man/man1/gcapture.1" <<'PY'
import sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
out, literal = [], False
for line in lines:
    indented = line.startswith("  ") and not line.startswith(".")
    if indented and not literal:
        out.append(".Bd -literal")
        literal = True
    elif not indented and literal:
        out.append(".Ed")
        literal = False
    if indented:
        out.append(line[2:].replace("\\", "\\e"))
    elif line == "":
        out.append(".Pp")
    else:
        out.append(line)
if literal:
    out.append(".Ed")
# The file's end is an empty "line" after the last newline: no paragraph break for it.
while out and out[-1] == ".Pp":
    out.pop()
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(out) + "\n")
PY

gcapture=.build/debug/gcapture
"$gcapture" --generate-completion-script bash > "$out/completions/gcapture.bash"
"$gcapture" --generate-completion-script zsh > "$out/completions/_gcapture"
"$gcapture" --generate-completion-script fish > "$out/completions/gcapture.fish"

fail() { echo "generate-man-and-completions: $*" >&2; exit 1; }

# The man page: rendered by man (groff) with every warning on, none may come; every subcommand has its section.
page="$out/man/man1/gcapture.1"
warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 MANROFFOPT=-ww man -l "$page" 2>&1 >/dev/null || true)
[ -z "$warnings" ] || fail "the man page renders with warnings: $warnings"
rendered=$(LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$page" 2>/dev/null | col -bx)
for command in devices frames photo preview record run inspect library; do
  grep -qE "^ +$command( |\$)" <<<"$rendered" || fail "the man page has no section for $command"
done

# The completions: each parses in its shell; the bash one completes a subcommand.
bash -n "$out/completions/gcapture.bash" || fail "the bash completion does not parse"
completed=$(bash -c "source '$out/completions/gcapture.bash'; COMP_WORDS=(gcapture rec); COMP_CWORD=1; COMP_LINE='gcapture rec'; COMP_POINT=12; _gcapture gcapture rec gcapture; printf '%s\n' \"\${COMPREPLY[@]}\"")
[ "$completed" = record ] || fail "the bash completion completed 'gcapture rec' to '$completed'"
if command -v zsh >/dev/null; then zsh -n "$out/completions/_gcapture" || fail "the zsh completion does not parse"
else echo "generate-man-and-completions: zsh is not installed: its completion is not checked" >&2; fi
if command -v fish >/dev/null; then fish --no-execute "$out/completions/gcapture.fish" || fail "the fish completion does not parse"
else echo "generate-man-and-completions: fish is not installed: its completion is not checked" >&2; fi

echo "man page: $page ($(wc -l <<<"$rendered") lines at 80 columns); completions: $out/completions"
