#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_variants.sh - the attribution fixture's stripped copies (built by
# tests/fixtures/attr/build.sh), at --rate 1:
#  - debuglink/: stripped (strip --strip-all) with the debug info in a
#    separate file found through .gnu_debuglink: the same attribution as the
#    unstripped build (every expected site, exact counts), and every pc
#    symbolized as eu-addr2line -f -i -C does;
#  - stripall/: stripped, no debug file anywhere: a query's site may lose
#    its name and line ("??", or the name from .dynsym for exported
#    functions; line 0) or be unattributed, but never be another function
#    or file:line; every fixture frame is ?? or an exported name, at ??:0.
. "$(dirname "$0")/lib.sh"
. "$ITDIR/../fixtures/attr/fixture.sh"
rc=0

# rec OUT BINARY: record at --rate 1, again while records were lost
rec() { attr_record_whole "$1" --rate 1 --seed 1 -- "$2"; }

echo "== debuglink/ (separate debug files)"
rec "$TMP/dl.db" "$FIX/debuglink/attr_main"
report_json "$TMP/dl.db" "$TMP/dl.json"
"${CHECK[@]}" sites exact "$TMP/dl.json" "$FIX/markers.txt" "$FIXSRC/expected.tsv" \
	--others main_exec:main --table || attr_verdict "$TMP/dl.db"
"${CHECK[@]}" oracle "$TMP/dl.db" "$FIX/debuglink"
case $? in 0) ;; 77) echo "(oracle skipped)" ;; *) rc=1 ;; esac

echo "== stripall/ (no debug info)"
args=()
for m in attr_main libattr_lib.so attr_mod.so; do
	nm -D --defined-only "$FIX/stripall/$m" | awk 'NF >= 3 { print $3 }' >"$TMP/$m.dynsym" ||
		fail "nm -D $FIX/stripall/$m failed"
	args+=(--dynsym "$m=$TMP/$m.dynsym")
done
rec "$TMP/sa.db" "$FIX/stripall/attr_main"
report_json "$TMP/sa.db" "$TMP/sa.json"
"${CHECK[@]}" sites stripped "$TMP/sa.json" "$FIX/markers.txt" "$FIXSRC/expected.tsv" \
	"${args[@]}" --table || attr_verdict "$TMP/sa.db"
fargs=()
for m in attr_main libattr_lib.so attr_mod.so; do fargs+=("$m=$TMP/$m.dynsym"); done
"${CHECK[@]}" frames "$TMP/sa.db" "$FIX/stripall" "${fargs[@]}" || rc=1
exit $rc
