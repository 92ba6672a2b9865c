#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_degrade.sh - where the debug information cannot be used, sites
# degrade honestly and record says why, once per file: tests/fixtures/inl.c
# (helper, inlined into run, steps the query at inl.c:14) with
#   1. zstd-compressed debug sections (libdw 0.188 cannot read them),
#   2. a .gnu_debuglink whose debug file is another build's,
#   3. split DWARF packed into a .dwp (libdw 0.188 cannot read it),
# at --rate 1: one warning naming the file and the cause (also kept in the
# profile's meta symbolizer_notes), and the query's first frame is never
# another function at helper's line (run (inl.c:14) was the wrong answer
# for the .dwp before). Before: no word at all.
. "$(dirname "$0")/lib.sh"
command -v gcc >/dev/null && command -v objcopy >/dev/null || skip "gcc or binutils missing"
src=$(cd "$(dirname "$0")/../fixtures" && pwd)/inl.c
cd "$TMP" || exit 1
frame0() { # profile: the query's first frame "function:line"
	sqlite3 "$1" "SELECT function || ':' || line FROM frames WHERE idx = 0 AND stack_id = (
		SELECT stack_id FROM stack_samples JOIN queries USING (fp_id, kind)
		WHERE fingerprint = 'SELECT ? + ?' LIMIT 1)"
}
run_case() { # name, binary, expected warning (a grep -E pattern)
	"$SQLPROF" record --rate 1 -o "$1.db" -- "./$2" >"$1.out" 2>"$1.err" || fail "$1: record: $(cat "$1.err")"
	[ "$(grep -cE "^sqlprof: warning: .*$2: $3" "$1.err")" = 1 ] ||
		fail "$1: expected one warning /$3/: $(cat "$1.err")"
	sqlite3 "$1.db" "SELECT value FROM meta WHERE key = 'symbolizer_notes'" | grep -qE "$3" ||
		fail "$1: the profile does not keep the note"
	f=$(frame0 "$1.db")
	case $f in
	helper:14 | ??:0 | ??:14 | run:0) ;; # run:0: the symbol holding the code, line unknown
	*) fail "$1: first frame $f: neither right (helper:14) nor honestly unknown" ;;
	esac
	echo "$1: first frame $f; $(grep warning "$1.err" | cut -c1-120)"
}

gcc -O2 -g -o zst "$src" -lsqlite3 && objcopy --compress-debug-sections=zstd zst 2>/dev/null ||
	skip "objcopy cannot compress with zstd"
run_case zstd zst "debug sections compressed with zstd"

sed 's/SELECT ?1 + 5/SELECT ?1 + 6/' "$src" >other.c
gcc -O2 -g -o dl "$src" -lsqlite3 && gcc -O2 -g -o other other.c -lsqlite3 || fail "build"
objcopy --only-keep-debug other dl.debug && strip --strip-all dl && objcopy --add-gnu-debuglink=dl.debug dl ||
	fail "debuglink"
run_case debuglink dl "its debug file .*dl.debug is another build's"
# no debug file at all (a system library without its -dbg package): no word
rm dl.debug
"$SQLPROF" record --rate 1 -o nodbg.db -- ./dl >nodbg.out 2>nodbg.err || fail "nodbg: $(cat nodbg.err)"
grep -q "warning" nodbg.err && fail "a missing debug file is not worth a warning: $(cat nodbg.err)"

if command -v dwp >/dev/null; then
	mkdir pk && (cd pk && gcc -O2 -g -gsplit-dwarf -o ../pkd "$src" -lsqlite3) || fail "split build"
	dwp -o pkd.dwp pk/*.dwo "$TMP"/*.dwo 2>/dev/null || dwp -o pkd.dwp ./*.dwo pk/*.dwo 2>/dev/null
	rm -f ./*.dwo pk/*.dwo
	run_case dwp pkd "split DWARF unit not found"
fi
exit 0
