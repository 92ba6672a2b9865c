#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_report_header.sh - the report header and record's summary count the
# processes that used SQLite: a shell that runs env, readlink and basename
# before counts (as pyenv's shims do before Python) is "1 process (and 4
# that ran no SQLite)", not "5 process(es)"; JSON keeps all of them
# ("processes") next to "sqlite_processes", and so does the profile. A
# pyenv Python program is 1 process. The header gives the run count of
# --repeat and the sampled executions --max-events left out of the
# timeline; no "process(es)", "1 queries" or "1 samples".
. "$(dirname "$0")/lib.sh"
need_prog counts
need_prog longrun

"$SQLPROF" record -o "$TMP/p.db" -- bash -c \
	'/usr/bin/env true; readlink -f / >/dev/null; basename /x >/dev/null; /usr/bin/env "$1" >/dev/null; exit 0' \
	sh "$PROGS/counts" 2>"$TMP/rec.err"
rc=$?
[ "$rc" = 0 ] || fail "record exited $rc: $(cat "$TMP/rec.err")"
"$SQLPROF" report "$TMP/p.db" >"$TMP/r.txt" || fail "report failed"
head -4 "$TMP/r.txt" | sed 's/^/    /'
tail -1 "$TMP/rec.err" | sed 's/^/    /'
all=$(sqlite3 "$TMP/p.db" "SELECT count(*) FROM processes")
[ "$all" -ge 4 ] || fail "$all processes in the profile, expected the shell's helpers too"
others=$((all - 1))
grep -q "^# 1046 executions of 9 queries in 1 process (and $others that ran no SQLite); db time" "$TMP/r.txt" ||
	fail "header: $(head -1 "$TMP/r.txt")"
grep -q "^sqlprof: 1046 executions from 1 process (and $others that ran no SQLite), 0 events lost" "$TMP/rec.err" ||
	fail "summary: $(tail -1 "$TMP/rec.err")"
report_json "$TMP/p.db" "$TMP/r.json"
expect "$TMP/r.json" -t processes="$all" sqlite_processes=1
! grep -q 'process(es)\| 1 queries\| 1 samples\| 1 execs' "$TMP/r.txt" "$TMP/rec.err" || fail "a plural for one"

if [ -x "$HOME/.pyenv/shims/python3" ]; then
	"$SQLPROF" record -o "$TMP/py.db" -- "$HOME/.pyenv/shims/python3" -c \
		'import sqlite3; c = sqlite3.connect(":memory:"); [c.execute("SELECT 1") for i in range(3)]' \
		2>"$TMP/py.err" || fail "pyenv python: $(cat "$TMP/py.err")"
	"$SQLPROF" report "$TMP/py.db" | head -1 | tee "$TMP/py.h" | sed 's/^/    pyenv: /'
	grep -q '^# 3 executions of 1 query in 1 process ' "$TMP/py.h" || fail "pyenv python: $(cat "$TMP/py.h")"
else
	not_checked "no pyenv shims here: the pyenv case"
fi

# --repeat 3: the run count
"$SQLPROF" record -q --repeat 3 -o "$TMP/rep.db" -- bash -c '"$1" 10 >/dev/null; exit 0' sh "$PROGS/longrun" >/dev/null 2>&1
"$SQLPROF" report "$TMP/rep.db" | grep '^# run:' | tee "$TMP/rep.h" | sed 's/^/    /'
grep -q '^# run: 3 runs (--repeat), the last: exit status ' "$TMP/rep.h" || fail "--repeat 3: $(cat "$TMP/rep.h")"

# --max-events: the dropped sampled executions, in the header and at record
"$SQLPROF" record --rate 1 --max-events 100 -o "$TMP/me.db" -- "$PROGS/counts" >/dev/null 2>"$TMP/me.err"
dropped=$(sqlite3 "$TMP/me.db" "SELECT value FROM meta WHERE key = 'events_dropped'")
[ "$dropped" -gt 0 ] || fail "--max-events 100: nothing dropped"
"$SQLPROF" report "$TMP/me.db" | sed -n 2p | tee "$TMP/me.h" | sed 's/^/    /'
grep -q "; $dropped sampled executions left out of the timeline (--max-events)" "$TMP/me.h" ||
	fail "--max-events: $(cat "$TMP/me.h")"
grep -q "^sqlprof: warning: $dropped sampled executions beyond --max-events 100 left out of the timeline" "$TMP/me.err" ||
	fail "--max-events: record said $(cat "$TMP/me.err")"
exit 0
