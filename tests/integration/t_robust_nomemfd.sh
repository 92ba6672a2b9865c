#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_nomemfd.sh - a program run where memfd_create fails (a seccomp
# filter, tests/progs/nomemfd.c): no thread gets a ring and the statistics
# cannot be shared, so every event record is lost - and counted - while
# the totals, kept in private memory, are sent as a copy at exit: the
# profile holds exactly the 3000 executions. The program's stdout, stderr
# and exit code are as without sqlprof, the process is in the profile with
# a clean exit, and the report mentions the lost records.
. "$(dirname "$0")/lib.sh"
need_prog nomemfd
need_prog longrun
N=3000

"$PROGS/nomemfd" "$PROGS/longrun" $N >"$TMP/plain.out" 2>"$TMP/plain.err"
prc=$?
[ "$prc" -eq 5 ] || fail "longrun under nomemfd without sqlprof exited $prc, expected 5: $(cat "$TMP/plain.err")"
"$SQLPROF" record -q -o "$TMP/p.db" -- "$PROGS/nomemfd" "$PROGS/longrun" $N \
	>"$TMP/rec.out" 2>"$TMP/rec.err"
rc=$?
[ "$rc" -eq 5 ] || fail "sqlprof record exited $rc, expected 5: $(cat "$TMP/rec.err")"
same_file "stdout" "$TMP/plain.out" "$TMP/rec.out"
same_file "stderr" "$TMP/plain.err" "$TMP/rec.err"
res=$(sqlite3 "$TMP/p.db" "SELECT (SELECT count(*) FROM processes),
	(SELECT coalesce(sum(clean_exit), 0) FROM processes), (SELECT coalesce(sum(lost), 0) FROM processes),
	(SELECT coalesce(sum(count), 0) FROM queries)") || fail "cannot read the profile"
IFS='|' read -r nproc clean lost count <<<"$res"
echo "memfd_create forbidden: $count executions in the profile, $lost records reported lost, clean_exit $clean"
[ "$nproc" = 1 ] || fail "$nproc processes, expected 1"
[ "$clean" = 1 ] || fail "the process has no clean exit"
[ "$count" = $N ] || fail "$count executions in the profile, expected exactly $N (the totals' copy at exit)"
[ "$lost" -ge 1 ] || fail "no record reported lost, although no ring could be made"
"$SQLPROF" report "$TMP/p.db" >"$TMP/report.txt" 2>&1 || fail "report failed: $(cat "$TMP/report.txt")"
grep -q "lost" "$TMP/report.txt" || fail "the report does not mention the loss: $(cat "$TMP/report.txt")"
exit 0
