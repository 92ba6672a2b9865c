#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_memo_sites.sh - a drawn execution's stack is its own, not the last one
# the thread walked: tests/progs/memo_sites steps one statement from one
# place (query) through four call paths that put its frame at one address
# (top_1/top_2 x mid_a/mid_b, one frame layout, from one call site in
# main), in runs of 1 to 4, 4000 executions. At --rate 1 every execution is
# drawn, and most are taken by checking the memo of the thread's last walk
# (preload/unwind.c): each path's count in `export -f folded --weight
# count` is exactly the program's own, 1030/1007/964/999 (with the memo
# trusted past its first word, paths get their predecessors' runs:
# 991/890/1003/1116). The timeline has one event per execution with its
# rows and its VM steps (7 each; before, every event's and site's VM
# steps were whatever the ring held there, the pid among others: 0 to
# 4182458841).
. "$(dirname "$0")/lib.sh"
need_prog memo_sites
cd "$TMP" || exit 1
"$PROGS/memo_sites" >bare.out || fail "memo_sites failed on its own"
grep -qx 'frames same' bare.out ||
	fail "memo_sites: query's frame moved between paths (a compiler change?): the test would not test the memo"
"$SQLPROF" record -q --rate 1 --seed 1 -o p.db -- "$PROGS/memo_sites" >rec.out 2>err ||
	fail "record failed: $(cat err)"
same_file "memo_sites' output under record" bare.out rec.out
"$SQLPROF" export -f folded --weight count -o p.folded p.db || fail "export -f folded failed"
"$SQLPROF" export -f chrome -o p.json p.db || fail "export -f chrome failed"
report_json p.db r.json
"$PYTHON" - bare.out p.folded p.json r.json <<'PY' || fail "stacks, events or counters wrong"
import json, re, sys
want = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 3:
        want[(f[0], f[1])] = int(f[2])
got = {}
for line in open(sys.argv[2]):
    stack, weight = line.rstrip("\n").rsplit(" ", 1)
    if not stack.endswith("SELECT ? + ?"):
        continue
    tops = [t for t in ("top_1", "top_2") if t + " (" in stack]
    mids = [m for m in ("mid_a", "mid_b") if m + " (" in stack]
    key = (tops[0], mids[0]) if len(tops) == 1 and len(mids) == 1 else ("?", stack)
    got[key] = got.get(key, 0) + int(weight)
print("paths: program", sorted(want.items()))
print("paths: profile", sorted(got.items()))
ok = got == want
q = [q for q in json.load(open(sys.argv[4]))["queries"] if q["fingerprint"] == "SELECT ? + ?"][0]
n = sum(want.values())
ev = [e for e in json.load(open(sys.argv[3]))["traceEvents"]
      if e.get("ph") == "X" and e.get("name") == "SELECT ? + ?"]
vm = sorted({e["args"]["vm_steps"] for e in ev})
print("count %d samples %d rows %d vm_steps %d; events %d, rows %d, vm_steps per event %s"
      % (q["count"], q["samples"], q["rows"], q["vm_steps"], len(ev),
         sum(e["args"]["rows"] for e in ev), vm))
ok &= q["count"] == n and q["samples"] == n and len(ev) == n
ok &= sum(e["args"]["rows"] for e in ev) == q["rows"] == n
ok &= q["vm_steps"] % n == 0 and vm == [q["vm_steps"] // n]
sys.exit(0 if ok else 1)
PY
exit 0
