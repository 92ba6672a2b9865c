#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_env_invalid.sh - an invalid SQLPROF_* value in the environment of
# `sqlprof record` gives one warning line per run, from record (never from
# the preload, which must not write to the program's stderr), none with -q;
# the default is used, the counts stay exact, the program's stdout, stderr
# and exit code are unchanged. Before: one line per process (a shell running
# counts three times printed it 4 times), even with -q.
. "$(dirname "$0")/lib.sh"
need_prog counts

"$PROGS/counts" >"$TMP/plain.out" 2>"$TMP/plain.err"
SQLPROF_RATE=abc "$SQLPROF" record -q -o "$TMP/p.db" -- "$PROGS/counts" >"$TMP/rec.out" 2>"$TMP/rec.err"
rc=$?
[ "$rc" -eq 3 ] || fail "sqlprof record exited $rc, expected 3; stderr: $(cat "$TMP/rec.err")"
same_file "counts stdout" "$TMP/plain.out" "$TMP/rec.out"
same_file "counts stderr under -q" "$TMP/plain.err" "$TMP/rec.err"

# three profiled processes and a shell, without -q: one line for the run
SQLPROF_RATE=abc SQLPROF_CLOCK=bogus "$SQLPROF" record -o "$TMP/m.db" -- bash -c \
	'"$1"; "$1"; "$1"; true' sh "$PROGS/counts" >"$TMP/m.out" 2>"$TMP/m.err"
rc=$?
[ "$rc" -eq 0 ] || fail "record of three counts exited $rc: $(cat "$TMP/m.err")"
sed 's/^/    stderr: /' "$TMP/m.err"
n=$(grep -c 'SQLPROF_RATE' "$TMP/m.err")
[ "$n" -eq 1 ] || fail "SQLPROF_RATE named in $n stderr lines, expected 1"
grep -q '^sqlprof: warning: ignoring SQLPROF_RATE=abc (expected a number from 0 to 1)' "$TMP/m.err" ||
	fail "no warning naming SQLPROF_RATE=abc and its range"
n=$(grep -c 'SQLPROF_CLOCK=bogus' "$TMP/m.err")
[ "$n" -eq 1 ] || fail "SQLPROF_CLOCK named in $n stderr lines, expected 1"
# --rate replaces the variable: nothing to warn about
SQLPROF_RATE=abc "$SQLPROF" record --rate 1 -o "$TMP/r1.db" -- "$PROGS/counts" >/dev/null 2>"$TMP/r1.err"
! grep -q SQLPROF_RATE "$TMP/r1.err" || fail "warned about SQLPROF_RATE although --rate 1 replaced it"

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
