#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_collect_resident.sh - issue 24 item 7, the collector's memory: an
# image's shared statistics (a memfd of up to 512 MB) are merged without
# being resident in the collector all at once. Reading each chunk's header
# mapped every chunk whole (the kernel's fault-around), so the collector's
# RssShmem grew to the statistics' full size the moment the merge began
# (511 MB at 200,000 fingerprints). tests/progs/manyfp at 20,000
# fingerprints is recorded while record's RssShmem is read every 20 ms:
# it stays under a quarter of the statistics' size (what the merge keeps
# mapped is 4 MB at a time, plus the program's ring). The totals stay
# exact: 60,000 executions.
. "$(dirname "$0")/lib.sh"
need_prog manyfp
[ -r /proc/self/status ] && grep -q '^RssShmem:' /proc/self/status ||
	skip "no RssShmem in /proc/PID/status: the collector's shared memory cannot be read"

n=20000
(
	ulimit -v 3000000
	exec "$SQLPROF" record -q -o "$TMP/p.db" -- "$PROGS/manyfp" "$n" >"$TMP/out" 2>"$TMP/err"
) &
rec=$!
max=0
while kill -0 "$rec" 2>/dev/null; do
	# the record process itself (the subshell exec'd it)
	kb=$(awk '/^RssShmem:/ { print $2 }' "/proc/$rec/status" 2>/dev/null)
	[ -n "$kb" ] && [ "$kb" -gt "$max" ] && max=$kb
	sleep 0.02
done
wait "$rec" || fail "record of $n fingerprints exited $?: $(tail -3 "$TMP/err")"
execs=$("$PYTHON" -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(
"SELECT SUM(count) FROM queries").fetchone()[0])' "$TMP/p.db")
[ "$execs" = $((3 * n)) ] || fail "$execs executions in the profile, not $((3 * n))"
# the statistics' size: 2.6 KB a text measured at 200,000 (512 MB), so at
# least 2 KB a text here
stats_kb=$((n * 2))
echo "    collector's RssShmem at most $max kB; statistics ~$stats_kb kB"
[ "$max" -gt 0 ] || not_checked "no RssShmem read while record ran"
[ "$max" -lt $((stats_kb / 4)) ] ||
	fail "the collector held $max kB of shared memory at once: the statistics (~$stats_kb kB) were resident whole"
exit 0
