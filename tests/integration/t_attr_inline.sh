#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_inline.sh - inline chains in the builds where libdw 0.188's
# dwarf_getscopes finds none: tests/fixtures/inl.c (helper inlined into
# run) built with gcc -flto, with -gsplit-dwarf (DWARF 5 and 4, the .dwo
# next to the binary), and with clang -gsplit-dwarf, at --rate 1: the
# query's frames are helper (inl.c:14, inlined), run (inl.c:25), main
# (inl.c:38), as in the plain build (before: run.constprop.0 or run at
# inl.c:14, no helper), and --skip helper moves the site to run
# (inl.c:25) (before: no effect). A .dwp is not read by libdw 0.188
# (elfutils 0.191 reads them): not tested.
. "$(dirname "$0")/lib.sh"
src=$(cd "$(dirname "$0")/../fixtures" && pwd)/inl.c
cd "$TMP" || exit 1
variants=("plain:gcc -O2 -g" "lto:gcc -O2 -g -flto" "split5:gcc -O2 -g -gsplit-dwarf"
	"split4:gcc -O2 -g -gdwarf-4 -gsplit-dwarf")
command -v clang >/dev/null && variants+=("clang-split:clang -O2 -g -gsplit-dwarf")
for v in "${variants[@]}"; do
	name=${v%%:*} cc=${v#*:}
	mkdir "$name" && (cd "$name" && $cc -o inl "$src" -lsqlite3) || fail "$name: $cc failed"
	"$SQLPROF" record -q --rate 1 -o "$name.db" -- "$name/inl" >"$name.out" 2>&1 ||
		fail "$name: record: $(cat "$name.out")"
	got=$(sqlite3 "$name.db" "SELECT group_concat(function || ':' || line || ':' || inlined, ' ')
		FROM (SELECT function, line, inlined FROM frames WHERE stack_id = (
		SELECT stack_id FROM stack_samples JOIN queries USING (fp_id, kind)
		WHERE fingerprint = 'SELECT ? + ?' LIMIT 1) ORDER BY idx LIMIT 3)")
	[ "$got" = "helper:14:1 run:25:0 main:38:0" ] ||
		fail "$name: frames '$got', expected 'helper:14:1 run:25:0 main:38:0'"
	site=$("$SQLPROF" report --format json --skip helper "$name.db" | "$PYTHON" -c '
import json, sys
q = [q for q in json.load(sys.stdin)["queries"] if q["fingerprint"] == "SELECT ? + ?"][0]
print("%s:%d" % (q["sites"][0]["function"], q["sites"][0]["line"]))')
	[ "$site" = "run:25" ] || fail "$name: --skip helper gives the site $site, not run:25"
	echo "$name ($cc): $got; --skip helper: $site"
done
exit 0
