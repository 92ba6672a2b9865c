#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_bad_input.sh - bad profiles and bad command lines: documented exit codes
# (2 usage, 3 bad input, 127 command not found), a one-line error on
# stderr, never a crash.
. "$(dirname "$0")/lib.sh"
need_prog counts
errors=0

# check WHAT WANT_RC ONE_LINE CMD...: run CMD, expect exit WANT_RC and, when
# ONE_LINE is 1, exactly one line on stderr and nothing on stdout.
check() {
	local what=$1 want=$2 one=$3 rc lines
	shift 3
	"$@" >"$TMP/out" 2>"$TMP/err" </dev/null
	rc=$?
	lines=$(wc -l <"$TMP/err")
	if [ "$rc" -ge 128 ]; then
		echo "FAIL: $what: crashed (exit $rc)" >&2
		errors=$((errors + 1))
	elif [ "$rc" -ne "$want" ]; then
		echo "FAIL: $what: exit $rc, expected $want; stderr: $(head -3 "$TMP/err")" >&2
		errors=$((errors + 1))
	elif [ "$one" = 1 ] && { [ "$lines" -ne 1 ] || [ -s "$TMP/out" ]; }; then
		echo "FAIL: $what: expected one line on stderr and no stdout, got $lines lines:" >&2
		sed 's/^/    /' "$TMP/err" "$TMP/out" >&2
		errors=$((errors + 1))
	elif [ ! -s "$TMP/err" ]; then
		echo "FAIL: $what: no message on stderr" >&2
		errors=$((errors + 1))
	else
		echo "ok: $what -> $rc: $(head -1 "$TMP/err")"
	fi
}

: >"$TMP/empty.db"
head -c 65536 /dev/urandom >"$TMP/random.db"
printf 'this is not a profile\nline two\n' >"$TMP/text.db"
printf 'SQLite format 3\000' >"$TMP/header-only.db"
sqlite3 "$TMP/other.sqlite" "CREATE TABLE x(a); INSERT INTO x VALUES(1);"

for fmt in table json csv; do
	check "report $fmt missing file" 3 1 "$SQLPROF" report --format $fmt "$TMP/nonexistent.db"
	check "report $fmt empty file" 3 1 "$SQLPROF" report --format $fmt "$TMP/empty.db"
	check "report $fmt random bytes" 3 1 "$SQLPROF" report --format $fmt "$TMP/random.db"
	check "report $fmt text file" 3 1 "$SQLPROF" report --format $fmt "$TMP/text.db"
	check "report $fmt truncated sqlite header" 3 1 "$SQLPROF" report --format $fmt "$TMP/header-only.db"
	check "report $fmt a sqlite db that is no profile" 3 1 "$SQLPROF" report --format $fmt "$TMP/other.sqlite"
done
check "report a directory" 3 1 "$SQLPROF" report "$TMP"
# Reading must not create or change anything.
[ ! -e "$TMP/nonexistent.db" ] || { echo "FAIL: report created the missing profile" >&2; errors=$((errors + 1)); }
[ ! -s "$TMP/empty.db" ] || { echo "FAIL: report wrote into the empty file" >&2; errors=$((errors + 1)); }

# Damaged real profiles: truncated, or with a table missing -> exit 3.
"$SQLPROF" record -q -o "$TMP/good.db" -- "$PROGS/counts" >/dev/null 2>&1
"$SQLPROF" report --format json "$TMP/good.db" >/dev/null || fail "report on a good profile failed"
head -c 8192 "$TMP/good.db" >"$TMP/truncated.db"
check "report a truncated profile" 3 1 "$SQLPROF" report --format json "$TMP/truncated.db"
for t in queries histograms; do
	cp "$TMP/good.db" "$TMP/no-$t.db" && sqlite3 "$TMP/no-$t.db" "DROP TABLE $t"
	check "report a profile without table $t" 3 1 "$SQLPROF" report --format json "$TMP/no-$t.db"
done
# Hostile values in a well-formed profile: either a clean error (3) or a
# report that is still valid JSON; never a crash.
i=0
for sql in "UPDATE queries SET kind=NULL, fingerprint=NULL, sql=NULL" \
	"UPDATE queries SET count=-5, total_ns='abc', rows=NULL" \
	"UPDATE queries SET fingerprint=char(1,34,92,10,127,233,0x2028)" \
	"UPDATE histograms SET bucket_ns=-1, count=1e18" \
	"UPDATE meta SET value=NULL"; do
	i=$((i + 1))
	cp "$TMP/good.db" "$TMP/h$i.db" && sqlite3 "$TMP/h$i.db" "$sql" || fail "cannot make h$i.db"
	for fmt in json table csv; do
		timeout "$HANG_S" "$SQLPROF" report --format $fmt "$TMP/h$i.db" >"$TMP/h.out" 2>"$TMP/h.err"
		rc=$?
		if [ $rc -ne 0 ] && [ $rc -ne 3 ]; then
			echo "FAIL: report $fmt after [$sql]: exit $rc: $(head -2 "$TMP/h.err")" >&2
			errors=$((errors + 1))
		elif [ $rc -eq 0 ] && [ $fmt = json ] && ! "$PYTHON" -c 'import json,sys; json.load(sys.stdin)' <"$TMP/h.out"; then
			echo "FAIL: report json after [$sql]: invalid JSON" >&2
			errors=$((errors + 1))
		else
			echo "ok: report $fmt after [$sql] -> $rc"
		fi
	done
done

check "report --format xml" 2 0 "$SQLPROF" report --format xml "$TMP/empty.db"
check "record without a command" 2 0 "$SQLPROF" record -o "$TMP/r.db"
check "record -- (nothing after)" 2 0 "$SQLPROF" record -o "$TMP/r.db" --
check "record --rate 2" 2 0 "$SQLPROF" record -o "$TMP/r.db" --rate 2 -- "$PROGS/counts"
check "record --rate -0.5" 2 0 "$SQLPROF" record -o "$TMP/r.db" --rate -0.5 -- "$PROGS/counts"
check "record --rate abc" 2 0 "$SQLPROF" record -o "$TMP/r.db" --rate abc -- "$PROGS/counts"
check "record --bogus" 2 0 "$SQLPROF" record -o "$TMP/r.db" --bogus -- "$PROGS/counts"
[ ! -e "$TMP/r.db" ] || { echo "FAIL: a rejected record command wrote a profile" >&2; errors=$((errors + 1)); }
check "record -- /nonexistent/cmd" 127 0 "$SQLPROF" record -q -o "$TMP/r2.db" -- /nonexistent/cmd
grep -q '/nonexistent/cmd' "$TMP/err" || { echo "FAIL: the 127 error does not name the command" >&2; errors=$((errors + 1)); }

[ "$errors" -eq 0 ] || fail "$errors case(s) failed"
exit 0
