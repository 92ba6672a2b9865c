#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_record_timeline.sh - record's timeline writer (report/record/timeline.c)
# puts the sampled executions into the profile's events table while the
# command runs. longrun at --rate 1 pauses after 1000 executions until the
# writer's file in the private directory holds events, then runs 20,000
# more: meta.events_prewritten (absent before the writer) is at least the
# ~680 events of the spill file's first write, and the events table is
# what writing them all at the end made: one row per sampled execution,
# each with its statement's fingerprint id, in each thread's order, under
# both indexes; the private directory is left empty. Through a rename
# (TMPDIR on the output's file system) and a copy (TMPDIR on another one,
# /dev/shm). While longrun waits, record has its file open: the
# symbolizer opened the stacks' modules then; and with 4 threads of 10 statements (exact_threads, 4 x
# 100,000 executions at --rate 0.1), where the writer may or may not get
# to the events before the end.
. "$(dirname "$0")/lib.sh"
need_prog longrun
need_prog exact_threads
command -v sqlite3 >/dev/null || skip "the sqlite3 shell is not installed"
# capped, but not an ASan build (its shadow reservation would fail)
ldd "$SQLPROF" 2>/dev/null | grep -q libasan || ulimit -v 4000000

q() { sqlite3 "$1" "$2" || fail "cannot query $1: $2"; }

# check PROFILE WHAT MIN: the events table as the profile writer makes
# it, at least MIN of its rows written while the command ran
check() {
	local p=$1 what=$2 min=$3 pre n want bad
	pre=$(q "$p" "SELECT value FROM meta WHERE key = 'events_prewritten'")
	[ "${pre:-0}" -ge "$min" ] ||
		fail "$what: meta.events_prewritten is '${pre}', expected at least $min"
	pre=${pre:-0}
	n=$(q "$p" "SELECT count(*) FROM events")
	want=$(q "$p" "SELECT sum(samples) FROM queries")
	[ "$(q "$p" "SELECT value FROM meta WHERE key = 'lost'")" = 0 ] ||
		skip "$what: records were lost on this loaded machine"
	[ "$(q "$p" "SELECT value FROM meta WHERE key = 'events_dropped'")" = 0 ] ||
		fail "$what: events dropped"
	[ "$n" = "$want" ] || fail "$what: $n events, $want sampled executions"
	[ "$pre" -le "$n" ] || fail "$what: $pre prewritten of $n events"
	bad=$(q "$p" "SELECT count(*) FROM events e LEFT JOIN statements s USING (sql_id)
		WHERE s.fp_id IS NOT e.fp_id OR e.fp_id = 0")
	[ "$bad" = 0 ] || fail "$what: $bad events without their statement's fingerprint id"
	bad=$(q "$p" "SELECT count(*) FROM events a JOIN events b ON b.rowid = a.rowid + 1
		AND b.pid = a.pid AND b.tid = a.tid WHERE b.seq <= a.seq")
	[ "$bad" = 0 ] || fail "$what: $bad events out of their thread's order"
	[ "$(q "$p" "SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_schema
		WHERE tbl_name = 'events' AND type = 'index' ORDER BY name)")" = "events_start events_thread" ] ||
		fail "$what: the events indexes are not both there"
	[ "$(q "$p" "PRAGMA integrity_check")" = ok ] || fail "$what: integrity_check failed"
	echo "$what: $n events, $pre written while the command ran"
}

# paused WHAT TMPDIR: longrun under record, told to go on once the
# writer's file holds events (waited for up to 300 s: a loaded machine is
# slow, and the wait ends as soon as they are there); record's output into
# $TMP/out
paused() {
	local what=$1 td=$2 pid i got= rec exe warm=0
	rm -rf "$td" && mkdir -p "$td" || fail "cannot make $td"
	rm -f "$TMP/p.db" "$TMP/started" "$TMP/go"
	# an empty symbolization cache: a warm one answers longrun's frames
	# without opening it (t_symcache)
	rm -rf "$XDG_CACHE_HOME"
	TMPDIR=$td timeout "$HANG_S" "$SQLPROF" record -q --rate 1 -o "$TMP/p.db" -- \
		"$PROGS/longrun" 21000 "$TMP/started" "$TMP/go" >"$TMP/out" 2>"$TMP/err" &
	pid=$!
	wait_started "$TMP/started" "$pid" || fail "$what: longrun did not start: $(cat "$TMP/err")"
	for i in $(seq 1 3000); do
		got=$(sqlite3 "file:$(echo "$td"/sqlprof.*/timeline)?immutable=1" \
			"SELECT count(*) FROM events" 2>/dev/null) && [ "${got:-0}" -gt 0 ] && break
		sleep 0.1
	done
	# the symbolizer opens the modules of the stacks while it runs too:
	# longrun's own file, which record opens for nothing else
	rec=$(pgrep -P "$pid" -x sqlprof | head -1) exe=$(readlink -f "$PROGS/longrun")
	for i in $(seq 1 3000); do
		[ -n "$rec" ] && ls -l "/proc/$rec/fd" 2>/dev/null | grep -qF " -> $exe" &&
			{ warm=1; break; }
		sleep 0.1
	done
	touch "$TMP/go"
	wait "$pid"
	[ $? -eq 5 ] || fail "$what: record did not exit 5 as longrun: $(cat "$TMP/err")"
	[ "${got:-0}" -gt 0 ] || fail "$what: no event in the writer's file within 300 s"
	[ "$warm" = 1 ] || fail "$what: record had not opened $PROGS/longrun to symbolize within 300 s"
	[ -z "$(ls -A "$td")" ] || fail "$what: left in the private directory: $(ls -AR "$td")"
	grep -q "^n=21000 " "$TMP/out" || fail "$what: longrun's output: $(cat "$TMP/out")"
}

run() { # run WHAT TMPDIR ARGS... : record into $TMP/p.db
	local what=$1 td=$2
	shift 2
	rm -rf "$td" && mkdir -p "$td" || fail "cannot make $td"
	rm -f "$TMP/p.db"
	TMPDIR=$td timeout "$HANG_S" "$SQLPROF" record -q -o "$TMP/p.db" "$@" >"$TMP/out" 2>"$TMP/err" ||
		fail "$what: record exited $?: $(cat "$TMP/err")"
	[ -z "$(ls -A "$td")" ] || fail "$what: left in the private directory: $(ls -AR "$td")"
}

paused "rename" "$TMP/td"
check "$TMP/p.db" "longrun, rename" 600

run "threads" "$TMP/td" --rate 0.1 -- "$PROGS/exact_threads" 4 100000 10
check "$TMP/p.db" "exact_threads, rename" 0
[ "$(q "$TMP/p.db" "SELECT count(DISTINCT tid) || ' ' || count(DISTINCT fp_id) FROM events")" = "4 40" ] ||
	fail "exact_threads: events of $(q "$TMP/p.db" "SELECT count(DISTINCT tid) || ' threads, ' ||
		count(DISTINCT fp_id) FROM events") statements, not 4 and 40"

if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(stat -c %d /dev/shm)" != "$(stat -c %d "$TMP")" ]; then
	shm=$(mktemp -d /dev/shm/sqlprof-test.XXXXXX) || fail "mktemp in /dev/shm"
	trap 'rm -rf "$shm"' EXIT
	paused "copy" "$shm/td"
	check "$TMP/p.db" "longrun, copy from another file system" 600
	rm -rf "$shm"
else
	echo "no /dev/shm on another file system: the copy is not tried"
fi
exit 0
