#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_series_tiers.sh - the retention rule keeps sums exact. With the
# tiers shrunk to seconds (SQLPROF_SERIES_TIERS, a variable for tests
# only: 1 s buckets after 1 s, 2 s after 2 s, 4 s after 3 s) an agent
# writing every 0.2 s merges its intervals while a service runs 4 s:
# afterwards every interval that ended more than 3 s before the last end
# is alone in its 4 s bucket, those between 2 and 3 s in their 2 s bucket,
# the intervals still follow each other without a gap, every write is
# counted in one (snapshots), and each query's rows and histogram buckets
# sum to its totals: the service's count and forker's 400 (a parent and 3
# forked children) exactly. A malformed variable
# stops the agent (exit 2). Counts only: no wall time is asserted.
. "$(dirname "$0")/lib.sh"
agent_setup
command -v sqlite3 >/dev/null || skip "no sqlite3 shell"
need_prog forker

SQLPROF_SERIES_TIERS=2@1,1@2 "$SQLPROF" agent -o "$P" --socket "$S" >/dev/null 2>"$TMP/bad.err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "SQLPROF_SERIES_TIERS wants" "$TMP/bad.err" ||
	fail "a malformed SQLPROF_SERIES_TIERS: exit $rc, $(cat "$TMP/bad.err")"

SQLPROF_SERIES_TIERS=1@1,2@2,4@3 "$SQLPROF" agent -o "$P" --socket "$S" --interval 0.2 \
	2>>"$TMP/agent.err" &
AG=$!
for _ in $(seq 1 250); do
	grep -q listening "$TMP/agent.err" && break
	sleep 0.02
done
eval "$("$SQLPROF" env --socket "$S")" || fail "sqlprof env failed"
SQLPROF_RATE=0.1 timeout "$HANG_S" "$PROGS/service" 100 4000 "$TMP/count" &
SV=$!
sleep 1
# forked children beside it: 100 executions in the parent, 100 in each of 3
timeout "$HANG_S" "$PROGS/forker" >/dev/null || fail "forker failed"
wait "$SV" || fail "the service failed"
unset LD_PRELOAD SQLPROF_SOCK
sleep 1
kill -TERM "$AG"
wait "$AG" || fail "the agent exited $?: $(cat "$TMP/agent.err")"
AG=
n=$(($(cat "$TMP/count") + 400))
q() { sqlite3 "$P" "$1" || fail "sqlite3: $1"; }
forked=$(q "SELECT SUM(i.count) FROM interval_queries i JOIN queries q USING (fp_id, kind)
	WHERE q.fingerprint LIKE '%child%' OR q.fingerprint LIKE '%parent_q%'")
[ "$forked" = 400 ] || fail "the forked processes' intervals sum to $forked, not 400"
echo "service and forker ran $n; $(q "SELECT COUNT(*) || ' intervals for ' || SUM(snapshots) || ' writes' FROM intervals")"
[ "$(q "SELECT SUM(count) FROM interval_queries")" = "$n" ] || fail "the intervals do not sum to $n"
[ "$(q "SELECT SUM(count) FROM queries")" = "$n" ] || fail "the totals are not $n"
last=$(q "SELECT MAX(end_ns) FROM intervals")
bad=$(q "SELECT start_ns / 4000000000 b, COUNT(*) FROM intervals WHERE end_ns <= $last - 3000000000
	GROUP BY b HAVING COUNT(*) > 1")
[ -z "$bad" ] || fail "old intervals not merged into 4 s buckets: $bad"
bad=$(q "SELECT start_ns / 2000000000 b, COUNT(*) FROM intervals WHERE end_ns <= $last - 2000000000
	AND end_ns > $last - 3000000000 GROUP BY b HAVING COUNT(*) > 1")
[ -z "$bad" ] || fail "intervals not merged into 2 s buckets: $bad"
merged=$(q "SELECT COUNT(*) FROM intervals WHERE snapshots > 1")
[ "$merged" -gt 0 ] || fail "no interval was merged"
gaps=$(q "SELECT COUNT(*) FROM intervals a WHERE end_ns <= start_ns OR (SELECT MIN(start_ns)
	FROM intervals b WHERE b.start_ns > a.start_ns) <> end_ns")
[ "$gaps" = 0 ] || fail "$gaps intervals do not end where the next starts"
bad=$(q "SELECT q.fp_id FROM queries q LEFT JOIN (SELECT fp_id, kind, SUM(count) c, SUM(total_ns) t,
	SUM(rows) r FROM interval_queries GROUP BY fp_id, kind) s USING (fp_id, kind)
	WHERE COALESCE(s.c, 0) <> q.count OR COALESCE(s.t, 0) <> q.total_ns OR COALESCE(s.r, 0) <> q.rows;
	SELECT 'hist', fp_id FROM (SELECT fp_id, kind, bucket_ns, count FROM histograms
	UNION ALL SELECT q.fp_id, q.kind, json_extract(j.value, '\$[0]'), -json_extract(j.value, '\$[1]')
	FROM interval_queries q, json_each(q.buckets) j)
	GROUP BY fp_id, kind, bucket_ns HAVING SUM(count) <> 0;")
[ -z "$bad" ] || fail "merged intervals do not sum to the totals: $bad"
[ "$("$SQLPROF" report --format json --since @0 "$P" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["executions"])')" = "$n" ] ||
	fail "a window over the whole profile does not count $n"
exit 0
