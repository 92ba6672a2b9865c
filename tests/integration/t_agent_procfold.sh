#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_procfold.sh - the agent's processes budget keeps where the
# folded processes' queries ran (issue 24, item 5: the budget is small
# enough to fill in the first minute of a service starting 3 processes a
# second, so what it folds must not lose attribution). 16 short Python
# processes (sqlite3 module: Python frames, code objects numbered by
# each process) and 16 C ones (tests/progs/service) under one agent with
# --max-processes 10: most are folded into the row of pid 0, whose
# stacks are translated into a module map of its own (proc-fold.c).
# The profile: every execution counted, the folded processes counted in
# the header, each query's executions all at their own source lines
# (Python: the two functions' lines; C: service.c), none unattributed,
# and pid 0's module map holding each file once (not once a process).
. "$(dirname "$0")/lib.sh"
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || skip "no python3"
command -v sqlite3 >/dev/null || skip "no sqlite3 shell for the profile's tables"
agent_setup
agent_start --max-processes 10

cat >"$TMP/two.py" <<'EOF'
import sqlite3

db = sqlite3.connect(":memory:")


def load_user(i):
    return db.execute("SELECT ? * 2", (i,)).fetchone()


def load_post(i):
    return db.execute("SELECT ? * 2", (i,)).fetchone()


for i in range(2000):
    if i % 10 < 7:
        load_user(i)
    else:
        load_post(i)
print("ok")
EOF
eval "$("$SQLPROF" env --socket "$S")"
PRE=$LD_PRELOAD SOCK=$SQLPROF_SOCK
unset LD_PRELOAD SQLPROF_SOCK
for i in $(seq 1 16); do
	out=$(LD_PRELOAD=$PRE SQLPROF_SOCK=$SOCK SQLPROF_RATE=0.2 "$py" "$TMP/two.py") ||
		fail "python run $i exited $?"
	[ "$out" = ok ] || fail "python run $i printed '$out'"
	LD_PRELOAD=$PRE SQLPROF_SOCK=$SOCK SQLPROF_RATE=0.2 "$PROGS/service" 500 20 "$TMP/c.$i" ||
		fail "service run $i exited $?"
done
nsvc=0
for i in $(seq 1 16); do nsvc=$((nsvc + $(cat "$TMP/c.$i"))); done
# the agent folds at its next snapshot: wait for a profile with the
# folded row, then stop it (its last write holds everything)
folded() { [ -f "$P" ] && [ "$(sqlite3 "$P" "SELECT value FROM meta WHERE key = 'agent_processes_folded'" 2>/dev/null)" -gt 0 ] 2>/dev/null; }
wait_until 60 folded || fail "no process folded after 60 s"
kill -TERM "$AG"
wait "$AG" || fail "the agent exited $?"
AG=
"$SQLPROF" report --format json "$P" >"$TMP/r.json" || fail "report --format json"
"$SQLPROF" report "$P" | head -1 | grep -q " in 32 processes" ||
	fail "report's header: $("$SQLPROF" report "$P" | head -1)"
"$PYTHON" - "$TMP/r.json" "$nsvc" <<'EOF' || fail "the folded processes' attribution"
import json, sys
d = json.load(open(sys.argv[1]))
qs = {q["sql"]: q for q in d["queries"]}
py, svc = qs["SELECT ? * 2"], qs["SELECT ?1 + 1"]
assert py["count"] == 16 * 2000, py["count"]
assert svc["count"] == int(sys.argv[2]), (svc["count"], sys.argv[2])
lines = {}
for s in py["sites"]:
    assert (s["file"] or "").endswith("two.py"), py["sites"]
    lines[s["line"]] = lines.get(s["line"], 0) + s["est_count"]
assert sorted(lines) == [7, 11], py["sites"]
assert abs(sum(lines.values()) - py["count"]) < 1, lines
# 70 % from load_user: far from 50 % whatever the draw at 6,400 samples
assert 0.6 < lines[7] / py["count"] < 0.8, lines
on = sum(s["est_count"] for s in svc["sites"] if (s["file"] or "").endswith("service.c"))
assert abs(on - svc["count"]) < 1, svc["sites"]
assert d["unattributed"] == 0, d["unattributed"]
print("python: %s; service: %d of %d at service.c" % (lines, on, svc["count"]))
EOF
rows=$(sqlite3 "$P" "SELECT count(*) FROM processes")
mods=$(sqlite3 "$P" "SELECT count(*) - count(DISTINCT path) FROM modules WHERE pid = 0")
echo "profile: $rows process rows; pid 0's module map: $mods files twice"
[ "$rows" -le 22 ] || fail "$rows process rows (--max-processes 10)"
[ "$mods" = 0 ] || fail "pid 0's module map has $mods files more than once"
exit 0
