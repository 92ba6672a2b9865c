#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_hostile_work.sh - the work budget of reading a profile (issue 17,
# item 14). A profile given 100,000 stack_samples rows of one query costs
# diff and check more than a budget of 1,000,000 SQLite VM instructions
# (SQLPROF_READ_WORK): they stop with exit 3 and one line saying so
# (before: the variable did nothing, and they ran to the end, exit 0 and
# 1), while a real profile still reads in full under that budget (report,
# export, check). (Until issue 12 diff and check summed over the table per
# row: 3000 rows took them past 5,000,000, a 40,000-row profile minutes;
# they read it in one pass now.)
# A bad SQLPROF_READ_WORK is a usage error (exit 2, one line).
. "$(dirname "$0")/lib.sh"
need_prog counts
command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
cd "$TMP" || exit 1
"$SQLPROF" record -q --rate 1 -o base.db -- "$PROGS/counts" >/dev/null 2>&1
[ -s base.db ] || fail "cannot record counts"
cp base.db quad.db
sqlite3 quad.db "
WITH q AS (SELECT fp_id, kind FROM queries ORDER BY count DESC LIMIT 1),
 p AS (SELECT pid FROM processes LIMIT 1),
 r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 100000)
INSERT INTO stack_samples SELECT q.fp_id, q.kind, p.pid, 1000000 + n, 1, 100, 1, 1, 1, 100 FROM q, p, r;" ||
	fail "cannot make the profile"
errors=0

# run WHAT WANT CMD...: CMD must exit WANT (capped for a hang), with one line on
# stderr when WANT is not 0 or 1.
run() {
	local what=$1 want=$2 rc
	shift 2
	timeout "$HANG_S" "$@" >out 2>err </dev/null
	rc=$?
	if [ "$rc" -ne "$want" ]; then
		echo "FAIL: $what: exit $rc, want $want: $(head -c 300 err)" >&2
		errors=$((errors + 1))
	elif [ "$want" -ge 2 ] && [ "$(wc -l <err)" -ne 1 ]; then
		echo "FAIL: $what: want one line on stderr, got:" >&2
		sed 's/^/    /' err >&2
		errors=$((errors + 1))
	else
		echo "ok: $what -> $rc $(head -c 160 err)"
	fi
}

export SQLPROF_READ_WORK=1000000
run "check, quadratic profile" 3 "$SQLPROF" check --baseline base.db quad.db
grep -q "quad.db: reading it needs more than 1000000 SQLite VM instructions" err ||
	{ echo "FAIL: check did not say why it stopped" >&2; errors=$((errors + 1)); }
run "diff, quadratic profile" 3 "$SQLPROF" diff quad.db base.db
for form in "report" "report --format json" "export -f html" "export -f perfetto"; do
	# shellcheck disable=SC2086
	run "$form, real profile" 0 "$SQLPROF" $form base.db
done
run "check, real profile" 0 "$SQLPROF" check --baseline base.db base.db
SQLPROF_READ_WORK=lots run "SQLPROF_READ_WORK=lots" 2 "$SQLPROF" report base.db
SQLPROF_READ_WORK=10 run "SQLPROF_READ_WORK=10" 2 "$SQLPROF" check --baseline base.db base.db
unset SQLPROF_READ_WORK
# The default budget lets this one through.
timeout "$HANG_S" "$SQLPROF" check --baseline base.db quad.db >/dev/null 2>err
rc=$?
[ "$rc" -le 1 ] || { echo "FAIL: check with the default budget exited $rc: $(cat err)" >&2; errors=$((errors + 1)); }
[ "$errors" -eq 0 ] || fail "$errors case(s) failed"
exit 0
