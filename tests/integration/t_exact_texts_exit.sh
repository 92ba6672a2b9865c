#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_exact_texts_exit.sh - issue 24, item 3: the SQL texts a program makes
# just before it exits reach the profile even when the collector cannot
# read them in time. tests/progs/texts_exit.c makes 20,000 distinct texts
# ("SELECT <i> + 1"; 9 times what the ring holds: 20,000 of them are as
# good as the 50,000 this test made before, at 40 % of the time) and exits
# normally:
#  1. under `sqlprof record` stopped (SIGSTOP) from just before the texts
#     until the program has exited: the ring fills, the texts wait in the
#     process, which exits while the collector still sleeps;
#  2. under `sqlprof agent`, stopped the same way, then sent SIGTERM;
#  3. under `sqlprof record`, not stopped.
# Each time: all 20,001 executions under their query (the warm-up and
# "SELECT ? + ?"), none under "<sql text lost>", and the program's output
# unchanged. Counts only: no wall time is asserted (the collector stays
# stopped until the program's exit status is written, up to 300 s).
. "$(dirname "$0")/lib.sh"
need_prog texts_exit
N=20000
"$PROGS/texts_exit" "$N" >"$TMP/plain.out" || fail "texts_exit alone failed"

# check PROFILE WHAT: every execution under its text
check() {
	report_json "$1" "$TMP/r.json"
	"$PYTHON" - "$TMP/r.json" "$N" "$2" <<'EOF_PY' || exit 1
import json, sys
doc = json.load(open(sys.argv[1]))
n, what = int(sys.argv[2]), sys.argv[3]
by = {}
for q in doc["queries"]:
    by[q["fingerprint"]] = by.get(q["fingerprint"], 0) + q["count"]
lost = sum(c for f, c in by.items() if f.startswith("<sql text lost"))
got = by.get("SELECT ? + ?", 0)
print("%s: %d of %d executions under their text, %d under <sql text lost>, %d events lost"
      % (what, got, n, lost, doc["lost"]))
bad = []
if lost:
    bad.append("%d executions under <sql text lost>" % lost)
if got != n:
    bad.append("SELECT ? + ? counted %d times, the program ran it %d times" % (got, n))
if doc["executions"] != n + 1:
    bad.append("the report says %d executions, the program ran %d" % (doc["executions"], n + 1))
for b in bad:
    print("FAIL: %s: %s" % (what, b), file=sys.stderr)
sys.exit(1 if bad else 0)
EOF_PY
}

# 1. record, stopped 3 s while the program makes its texts and exits
cat >"$TMP/run.sh" <<EOS
"$PROGS/texts_exit" $N "$TMP/started" "$TMP/go" >"$TMP/prog.out" 2>"$TMP/prog.err"
echo \$? >"$TMP/rc.tmp" && mv "$TMP/rc.tmp" "$TMP/rc"
EOS
TMPDIR=$TMP "$SQLPROF" record -q -o "$TMP/p.db" -- sh "$TMP/run.sh" >"$TMP/coll.out" 2>"$TMP/coll.err" &
coll=$!
if ! wait_started "$TMP/started" "$coll"; then
	touch "$TMP/go"
	fail "texts_exit never started under sqlprof record: $(cat "$TMP/coll.err" "$TMP/prog.err" 2>/dev/null)"
fi
kill -STOP "$coll" || fail "cannot stop the collector"
touch "$TMP/go"
wait_file "$TMP/rc" 300 || { kill -CONT "$coll"; fail "texts_exit did not exit in 300 s under a stopped collector"; }
kill -CONT "$coll"
wait "$coll" || fail "sqlprof record exited $?: $(cat "$TMP/coll.err")"
[ "$(cat "$TMP/rc")" = 0 ] || fail "texts_exit exited $(cat "$TMP/rc"): $(cat "$TMP/prog.err")"
same_file "the program's output under a stopped collector" "$TMP/plain.out" "$TMP/prog.out"
check "$TMP/p.db" "record stopped until the program exited"

# 2. the agent, stopped 3 s the same way
agent_setup
agent_start
rm -f "$TMP/started" "$TMP/go"
eval "$("$SQLPROF" env --socket "$S")" || fail "sqlprof env failed"
"$PROGS/texts_exit" $N "$TMP/started" "$TMP/go" >"$TMP/prog2.out" 2>"$TMP/prog2.err" &
pr=$!
unset LD_PRELOAD SQLPROF_SOCK
if ! wait_started "$TMP/started" "$pr"; then
	touch "$TMP/go"
	fail "texts_exit never started under the agent: $(cat "$TMP/prog2.err")"
fi
kill -STOP "$AG" || fail "cannot stop the agent"
touch "$TMP/go"
wait "$pr" || fail "texts_exit exited $? under a stopped agent: $(cat "$TMP/prog2.err")"
kill -CONT "$AG"
same_file "the program's output under a stopped agent" "$TMP/plain.out" "$TMP/prog2.out"
kill -TERM "$AG"
wait "$AG" || fail "the agent exited $? on SIGTERM: $(cat "$TMP/agent.err")"
AG=
check "$P" "agent stopped while the program ran"

# 3. record, not stopped
"$SQLPROF" record -q -o "$TMP/p3.db" -- "$PROGS/texts_exit" $N >"$TMP/prog3.out" 2>"$TMP/coll3.err" ||
	fail "sqlprof record failed: $(cat "$TMP/coll3.err")"
same_file "the program's output" "$TMP/plain.out" "$TMP/prog3.out"
check "$TMP/p3.db" "record"
exit 0
