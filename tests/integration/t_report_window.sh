#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_report_window.sh - time windows on a `record` profile (one interval,
# the whole run) and their errors: a window holding the run counts what
# the whole report counts, one before it nothing (and says so); bad
# --since/--until/--last values exit 2 naming the option, and so does a
# window on a profile without intervals (one written before they were
# kept: the interval tables dropped); diff takes the same options.
. "$(dirname "$0")/lib.sh"
need_prog counts
command -v sqlite3 >/dev/null || skip "no sqlite3 shell"

"$SQLPROF" record -q -o "$TMP/p.db" -- "$PROGS/counts" >/dev/null 2>"$TMP/rec.err"
[ "$(sqlite3 "$TMP/p.db" "SELECT COUNT(*) FROM intervals")" = 1 ] ||
	fail "a record profile should have one interval: $(cat "$TMP/rec.err")"
whole=$("$SQLPROF" report --format json "$TMP/p.db" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["executions"])')
win=$("$SQLPROF" report --format json --since @1000000000 "$TMP/p.db" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["executions"])')
echo "whole $whole, --since 2001: $win"
[ "$whole" -gt 0 ] && [ "$win" = "$whole" ] || fail "--since 2001 counts $win, the whole report $whole"
"$SQLPROF" report --until 2001-09-09T01:46:40Z "$TMP/p.db" >"$TMP/before.txt" ||
	fail "report --until 2001 exited $?"
grep -q "^# window: no interval ends between the start and 2001-09-09T01:46:40.000Z" "$TMP/before.txt" ||
	fail "an empty window does not say so: $(head -5 "$TMP/before.txt")"
grep -q "^# 0 executions of 0 queries" "$TMP/before.txt" || fail "an empty window counts: $(head -3 "$TMP/before.txt")"

# bad values: exit 2, the option named
for bad in "--since yesterday" "--since 2026-13-01T00:00:00" "--since 2026-02-30" \
	"--until @abc" "--since -5x" "--until 2026-12-01T25:00" "--last 0" "--last -5m" \
	"--last 5 m" "--since 2026-12-01T14:00:00+25:00"; do
	opt=${bad%% *}
	"$SQLPROF" report "$opt" "${bad#* }" "$TMP/p.db" >/dev/null 2>"$TMP/e"
	rc=$?
	[ "$rc" -eq 2 ] || fail "report $bad exited $rc, not 2"
	grep -q "^sqlprof report: $opt wants" "$TMP/e" || fail "report $bad: $(cat "$TMP/e")"
done
"$SQLPROF" report --since -1m --last 5m "$TMP/p.db" >/dev/null 2>"$TMP/e"
[ $? -eq 2 ] && grep -q "give one" "$TMP/e" || fail "--since with --last: $(cat "$TMP/e")"
"$SQLPROF" report --since @2000000000 --until @1900000000 "$TMP/p.db" >/dev/null 2>"$TMP/e"
[ $? -eq 2 ] && grep -q "empty" "$TMP/e" || fail "--since after --until: $(cat "$TMP/e")"

# a profile written before intervals were kept
cp "$TMP/p.db" "$TMP/old.db"
sqlite3 "$TMP/old.db" "DROP TABLE intervals; DROP TABLE interval_queries;"
"$SQLPROF" report "$TMP/old.db" >/dev/null || fail "the old profile does not report without a window"
"$SQLPROF" report --last 5m "$TMP/old.db" >/dev/null 2>"$TMP/e"
rc=$?
cat "$TMP/e"
[ "$rc" -eq 2 ] || fail "a window on a profile without intervals exited $rc, not 2"
grep -q "has no intervals" "$TMP/e" || fail "no clear message: $(cat "$TMP/e")"

# diff takes the same window, for each profile
"$SQLPROF" diff --since @1000000000 "$TMP/p.db" "$TMP/p.db" >"$TMP/d.txt" 2>&1 || fail "diff --since: $(cat "$TMP/d.txt")"
grep -q "^# base window: .*1 interval" "$TMP/d.txt" && grep -q "^# new window: " "$TMP/d.txt" ||
	fail "diff does not print its windows: $(head -3 "$TMP/d.txt")"
"$SQLPROF" diff --last 5m "$TMP/p.db" "$TMP/old.db" >/dev/null 2>"$TMP/e"
rc=$?
[ "$rc" -eq 2 ] && grep -q "old.db: the profile has no intervals" "$TMP/e" ||
	fail "diff --last on a profile without intervals: exit $rc, $(cat "$TMP/e")"
"$SQLPROF" diff --until tomorrow "$TMP/p.db" "$TMP/p.db" >/dev/null 2>"$TMP/e"
[ $? -eq 2 ] && grep -q "^sqlprof diff: --until wants" "$TMP/e" || fail "diff --until tomorrow: $(cat "$TMP/e")"
# and check: an empty window on both sides has nothing to regress
"$SQLPROF" check --until @1000000000 --baseline "$TMP/p.db" "$TMP/p.db" >"$TMP/c.txt" 2>&1 ||
	fail "check --until 2001 exited $?: $(cat "$TMP/c.txt")"
grep -q "^# candidate 1 window: no interval ends" "$TMP/c.txt" || fail "check's windows: $(head -3 "$TMP/c.txt")"
"$SQLPROF" check --last 1h --baseline "$TMP/old.db" "$TMP/p.db" >/dev/null 2>"$TMP/e"
[ $? -eq 2 ] && grep -q "has no intervals" "$TMP/e" || fail "check --last on an old baseline: $(cat "$TMP/e")"
exit 0
