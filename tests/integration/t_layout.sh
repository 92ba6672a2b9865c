#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_layout.sh - report/ keeps the layout docs/design.md describes ("Layout
# of report/"): util.[ch] and hash.h at the top and every other file in
# one folder (record/, profile/, analysis/, output/, and cmds/: main.c,
# cmds.h and the cmd-*.c commands); no two headers share a file name
# (every folder is on the include path) nor a system header's
# (<check.h>); and each file includes only headers of the folders its own
# may use, with no exception by file name: profile/ and analysis/ (the
# profile writer included: it reads the model of a recording,
# profile/recording.h) and output/ never the collector's (record/), analysis/ never a printer's
# (output/); cmds/ puts the modules together and may include any, and
# nothing includes cmds/ but cmds/.
# And no function in report/ is over 120 lines but those scripts/funclen
# lists (its KNOWN: they may shrink, not grow).
. "$(dirname "$0")/lib.sh"
root=$ITDIR/../..
"$PYTHON" - "$root/report" <<'PY' || fail "report/ layout: see above"
import os, re, sys
top = sys.argv[1]
allowed = {
    "top": {"top"},
    "profile": {"top", "profile"},
    "record": {"top", "profile", "record"},
    "analysis": {"top", "profile", "analysis"},
    "output": {"top", "profile", "analysis", "output"},
    "cmds": {"top", "profile", "record", "analysis", "output", "cmds"},
}
top_files = {"util.c", "util.h", "hash.h"}
where, bad = {}, []
for d, _, files in os.walk(top):
    rel = os.path.relpath(d, top)
    for f in files:
        if not f.endswith((".c", ".h")):
            continue
        mod = "top" if rel == "." else rel
        if mod not in allowed:
            bad.append(f"report/{rel}/{f}: in no module folder")
            continue
        if mod == "top" and f not in top_files:
            bad.append(f"report/{f}: at the top of report/; move it into its module's folder")
        if f.endswith(".h"):
            if f in where:
                bad.append(f"report/{rel}/{f}: a header of the same name is in {where[f]}")
            where.setdefault(f, mod)
for d, _, files in os.walk(top):
    rel = os.path.relpath(d, top)
    mod = "top" if rel == "." else rel
    for f in files:
        if not f.endswith((".c", ".h")) or mod not in allowed:
            continue
        name = f if mod == "top" else f"{rel}/{f}"
        ok = allowed[mod]
        for inc in re.findall(r'^#include "([^"]+)"', open(os.path.join(d, f)).read(), re.M):
            m = where.get(inc)
            if m is not None and m not in ok:
                bad.append(f"report/{name} includes {inc} ({m}/): {mod}/ may include {', '.join(sorted(ok))}")
# a header named like a system header (<check.h>, the unit tests'
# framework) would be found first for #include <...> too
root = os.path.dirname(os.path.realpath(top))
system = set()
for d, dirs, files in os.walk(root):
    dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
    for f in files:
        if f.endswith((".c", ".h")):
            try:
                system.update(re.findall(r'^#include <([^>]+)>', open(os.path.join(d, f), errors="replace").read(), re.M))
            except OSError:
                pass
for h in sorted(set(where) & system):
    bad.append(f"report/{where[h] + '/' if where[h] != 'top' else ''}{h}: shadows the system header <{h}> (every report/ folder is on the include path)")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PY
echo "report/: every file in its module, includes within the rules"
# no function of report/ over 120 lines but those listed in scripts/funclen
# (issue 28: the list shrinks as they are split), none of those grown
"$PYTHON" "$root/scripts/funclen" "$root/report" || fail "report/: a function over 120 lines (scripts/funclen, above)"

# sp_api.h is the one list of interposers: libsqlprof.so exports exactly
# the version script's symbols (made from it), each defined: a shim listed
# but not written, or written but not listed, fails here
lib=$BUILD/lib/libsqlprof.so map=$BUILD/obj/preload/libsqlprof.map
if [ -f "$lib" ] && [ -f "$map" ]; then
	want=$(sed -n 's/^ *global: *//; /local:/d; /[{}]/d; s/;/\n/gp' "$map" | tr -d ' \t' | grep -v '^$' | sort -u)
	have=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWi]$/ {print $3}' | sed 's/@.*//' | sort -u)
	[ -n "$want" ] || fail "no symbol in $map"
	[ "$want" = "$have" ] || fail "libsqlprof.so's exports differ from sp_api.h's list: $(diff <(echo "$want") <(echo "$have") | grep '^[<>]' | tr '\n' ' ')"
else
	fail "$lib or $map missing (make all first)"
fi

# the C sources as .clang-format has them (tests/progs and tests/fixtures,
# whose line numbers the tests check, excepted: their own .clang-format)
if ! command -v clang-format >/dev/null; then
	not_checked "clang-format not installed: the format of the sources"
else
	files=$(cd "$root" && git ls-files '*.c' '*.h' 2>/dev/null | grep -v -E '^tests/(progs|fixtures|integration)/')
	[ -n "$files" ] || files=$(cd "$root" && ls preload/*.[ch] report/*.[ch] report/*/*.[ch] symbolizer/*.[ch])
	bad=$(cd "$root" && clang-format --dry-run $files 2>&1 | grep -c 'warning: code should be clang-formatted')
	[ "$bad" = 0 ] || fail "$bad places not as .clang-format has them: clang-format -i FILE (see docs/testing.md)"
fi
exit 0
