#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_env_invalid.sh - an invalid SQLPROF_RATE in the environment of
# `sqlprof record` gives exactly one warning line naming it on stderr (from
# the one profiled process), falls back to the default, and the counts stay
# exact; the program's stdout and exit code are unchanged.
. "$(dirname "$0")/lib.sh"
need_prog counts

"$PROGS/counts" >"$TMP/plain.out" 2>/dev/null
SQLPROF_RATE=abc "$SQLPROF" record -q -o "$TMP/p.db" -- "$PROGS/counts" >"$TMP/rec.out" 2>"$TMP/rec.err"
rc=$?
[ "$rc" -eq 3 ] || fail "sqlprof record exited $rc, expected 3; stderr: $(cat "$TMP/rec.err")"
same_file "counts stdout" "$TMP/plain.out" "$TMP/rec.out"
n=$(grep -c 'SQLPROF_RATE' "$TMP/rec.err")
lines=$(wc -l <"$TMP/rec.err")
if [ "$n" -ne 1 ] || [ "$lines" -ne 1 ]; then
	sed 's/^/    stderr: /' "$TMP/rec.err" >&2
	fail "expected exactly one stderr line, mentioning SQLPROF_RATE; got $lines lines, $n mentioning it"
fi

report_json "$TMP/p.db" "$TMP/r.json"
expect "$TMP/r.json" -t lost=0 \
	-q stmt 'SELECT a FROM t WHERE a = ?' count=1000 rows=1000 \
	-q stmt 'SELECT count(*) FROM t WHERE b <> ?' count=37 \
	-q stmt 'INSERT INTO t(a, b) VALUES (?, ?)' count=1 errors=1 \
	-q stmt 'INSERT INTO t(b) VALUES (?)' count=2
# The default rate (0.01) was used, not 0 or 1.
rate=$(sqlite3 "$TMP/p.db" "SELECT value FROM meta WHERE key = 'rate'")
echo "meta rate: $rate"
exit 0
