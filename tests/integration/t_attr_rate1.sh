#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_rate1.sh - at --rate 1 every execution of the attribution fixture
# (tests/fixtures/attr) is attributed to the function and line that issued
# it: per query, exactly the expected sites, each with samples == est_count
# == its execution count, nothing unattributed.  Covers distinct functions,
# a static function GCC inlined and an always_inline helper (the site is
# the inlined function's line, and --stacks shows its caller chain), a
# shared library, a dlopen'd module, C++ overloads, a second thread, a
# forked child, the statements SQLite runs inside sqlite3_exec (attributed
# to the exec call), and a wrapper db_query: its line without --skip, its
# two callers' lines with --skip db_query; --skip on the inlined functions
# moves their queries to their callers' call lines.  Every fixture pc in the
# profile's stacks is also compared with eu-addr2line -f -i -C (when
# installed).  Prints the attribution table.
. "$(dirname "$0")/lib.sh"
. "$ITDIR/../fixtures/attr/fixture.sh"

attr_record_whole "$TMP/p.db" --rate 1 --seed 1 -- "$FIX/attr_main"
report_json "$TMP/p.db" "$TMP/r.json"
"$SQLPROF" report --format json --skip db_query "$TMP/p.db" >"$TMP/skip.json" ||
	fail "sqlprof report --skip db_query failed"
"$SQLPROF" report --format json --skip inl_static --skip ai_query "$TMP/p.db" >"$TMP/inl.json" ||
	fail "sqlprof report --skip inl_static --skip ai_query failed"
"$SQLPROF" report --stacks "$TMP/p.db" >"$TMP/stacks.txt" || fail "sqlprof report --stacks failed"

rc=0
expect "$TMP/r.json" -t processes=2 untracked=0
[ "${ATTR_LOST[$TMP/p.db]:-0}" = 0 ] || attr_verdict "$TMP/p.db"
echo "== sqlprof report --format json (rate 1): per-query sites"
"${CHECK[@]}" sites exact "$TMP/r.json" "$FIX/markers.txt" "$FIXSRC/expected.tsv" \
	--others main_exec:main --table || attr_verdict "$TMP/p.db"
echo "== sqlprof report --format json --skip db_query: the wrapper's callers"
"${CHECK[@]}" sites exact "$TMP/skip.json" "$FIX/markers.txt" "$FIXSRC/expected.tsv" \
	--variant wrap --table || attr_verdict "$TMP/p.db"
echo "== sqlprof report --format json --skip inl_static --skip ai_query: inline frames are frames"
"${CHECK[@]}" sites exact "$TMP/inl.json" "$FIX/markers.txt" "$FIXSRC/expected.tsv" \
	--variant inl --table >"$TMP/inl.out" 2>&1 || attr_verdict "$TMP/p.db"
grep -E '^KIND|static_inl|always_inl|FAIL' "$TMP/inl.out"
echo "== sqlprof report --stacks: inline frames and their callers"
"${CHECK[@]}" stacks "$TMP/stacks.txt" "$FIX/markers.txt" 'SELECT ? AS static_inl' \
	inlined:inl_static@inl_static run_static@run_static_call main@ || attr_verdict "$TMP/p.db"
"${CHECK[@]}" stacks "$TMP/stacks.txt" "$FIX/markers.txt" 'SELECT ? AS always_inl' \
	inlined:ai_query@ai_query run_ai@run_ai_call main@ || attr_verdict "$TMP/p.db"
"${CHECK[@]}" stacks "$TMP/stacks.txt" "$FIX/markers.txt" 'SELECT ? AS wrapped' \
	db_query@db_query || attr_verdict "$TMP/p.db"
"${CHECK[@]}" stacks "$TMP/stacks.txt" "$FIX/markers.txt" 'SELECT ? AS shlib' \
	lib_query@lib_query main@ || attr_verdict "$TMP/p.db"
"${CHECK[@]}" stacks "$TMP/stacks.txt" "$FIX/markers.txt" 'SELECT ? AS f_str' \
	'f(char const*)@f_str' cxx_queries@ main@ || attr_verdict "$TMP/p.db"
echo "== every fixture pc in the profile against eu-addr2line -f -i -C (the oracle)"
"${CHECK[@]}" oracle "$TMP/p.db" "$FIX"
case $? in 0) ;; 77) echo "(oracle skipped)" ;; *) rc=1 ;; esac
exit $rc
