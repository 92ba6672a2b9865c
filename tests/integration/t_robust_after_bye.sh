#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_after_bye.sh - queries after the profiler's goodbye (BYE) are
# not lost: the collector reads a process's rings at BYE but frees them
# only when its connection ends (tests/progs/after_bye.c).
#  - failexec: an exec that fails (its wrapper says BYE first), then 1000
#    queries: all 1000 in the profile;
#  - thread: a worker thread keeps querying while main exits and exit()
#    flushes 1 MiB of stdout into a slow reader after our destructor said
#    BYE: the profile holds exactly the queries the worker counted.
. "$(dirname "$0")/lib.sh"
need_prog after_bye

"$SQLPROF" record -q -o "$TMP/fe.db" -- "$PROGS/after_bye" failexec 1000 >"$TMP/fe.out" 2>"$TMP/fe.err" ||
	fail "failexec: sqlprof record failed: $(cat "$TMP/fe.err")"
res=$(sqlite3 "$TMP/fe.db" "SELECT
	(SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = 'SELECT ? AS before_exec'),
	(SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = 'SELECT ? AS after_exec'),
	(SELECT coalesce(sum(lost), 0) FROM processes)") || fail "cannot read the failexec profile"
IFS='|' read -r before after lost <<<"$res"
echo "failed exec: $before before, $after after it, lost $lost"
[ "$before" = 10 ] || fail "failexec: $before executions before the exec, expected 10"
[ "$after" = 1000 ] || fail "failexec: $after executions after the failed exec, expected 1000"
[ "$lost" = 0 ] || fail "failexec: $lost lost"

"$SQLPROF" record -q -o "$TMP/th.db" -- "$PROGS/after_bye" thread "$TMP/count" 2>"$TMP/th.err" |
	(sleep 0.3; cat >/dev/null)
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "thread: sqlprof record failed: $(cat "$TMP/th.err")"
ran=$(od -An -t d8 -N 8 "$TMP/count" | tr -d ' ')
res=$(sqlite3 "$TMP/th.db" "SELECT
	(SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = 'SELECT ? AS worker_q'),
	(SELECT coalesce(sum(lost), 0) FROM processes)") || fail "cannot read the thread profile"
IFS='|' read -r count lost <<<"$res"
echo "worker thread during exit: $ran finished, $count in the profile, lost $lost"
[ "$ran" -gt 0 ] || fail "the worker ran no query"
# the worker may finish one more query after it counted the last one the
# profile saw, never fewer in the profile than one less than it counted
[ "$count" -ge $((ran - 1)) ] && [ "$count" -le $((ran + 1)) ] ||
	fail "thread: $count executions in the profile, the worker finished $ran"
[ "$lost" = 0 ] || fail "thread: $lost lost"
exit 0
