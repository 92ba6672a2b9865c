#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_report_unknown_site.sh - a site without symbols says where it is: a
# stripped copy of tests/progs/counts at --rate 1 gives one --by site row
# per call site, "?? (counts_s+0xOFF)" (before: one "?? (??:0)" row for
# every module), each offset the return address that addr2line places on
# counts.c's query lines in the unstripped build; JSON sites carry
# "offset". Source paths are shown relative to the sites' common directory
# ("# paths relative to ..."), whole with --full-paths.
. "$(dirname "$0")/lib.sh"
need_prog counts
command -v strip >/dev/null && command -v addr2line >/dev/null || skip "binutils (strip, addr2line) not installed"

strip -o "$TMP/counts_s" "$PROGS/counts" || fail "strip failed"
"$SQLPROF" record -q --rate 1 -o "$TMP/s.db" -- "$TMP/counts_s" >/dev/null
"$SQLPROF" report --by site "$TMP/s.db" >"$TMP/s.txt" || fail "report --by site failed"
sed 's/^/    /' "$TMP/s.txt"
! grep -q '?? (??:0)' "$TMP/s.txt" || fail "a site without module: ?? (??:0)"
n=$(grep -c ' ?? (counts_s+0x[0-9a-f]*)$' "$TMP/s.txt")
[ "$n" = 4 ] || fail "$n '?? (counts_s+0x...)' rows, expected 4 (counts.c lines 29, 40, 50, 58)"
for off in $(grep -o 'counts_s+0x[0-9a-f]*' "$TMP/s.txt" | sed 's/counts_s+//'); do
	where=$(addr2line -e "$PROGS/counts" "$(printf '0x%x' $((off - 1)))")
	echo "    $off: $where"
	case "$where" in
	*counts.c:29* | *counts.c:40* | *counts.c:50* | *counts.c:58*) ;;
	*) fail "offset $off is $where, not a query line of counts.c" ;;
	esac
done
report_json "$TMP/s.db" "$TMP/s.json"
"$PYTHON" - "$TMP/s.json" <<'PY' || fail "JSON sites lack their offsets"
import json, sys
doc = json.load(open(sys.argv[1]))
offs = {s.get("offset") for q in doc["queries"] for s in q["sites"]}
sys.exit(0 if None not in offs and len(offs) == 4 else 1)
PY

"$SQLPROF" record -q --rate 1 -o "$TMP/p.db" -- "$PROGS/counts" >/dev/null
"$SQLPROF" report "$TMP/p.db" >"$TMP/r.txt" || fail "report failed"
grep -q "^# paths relative to .*/tests/progs/ (--full-paths)$" "$TMP/r.txt" || fail "no '# paths relative to' line"
grep -q -- '-> 1000 execs, .* at main (counts.c:40) \[1000 samples\]$' "$TMP/r.txt" ||
	fail "site not relative: $(grep -m1 -- '->' "$TMP/r.txt")"
"$SQLPROF" report --full-paths "$TMP/p.db" >"$TMP/f.txt" || fail "report --full-paths failed"
grep -q -- '-> 1000 execs, .* at main (/.*/tests/progs/counts.c:40)' "$TMP/f.txt" || fail "--full-paths: not whole"
! grep -q '^# paths relative' "$TMP/f.txt" || fail "--full-paths: still says relative"
exit 0
