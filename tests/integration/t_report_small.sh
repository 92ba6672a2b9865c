#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The small list of issue 27, item 9, on tests/progs/shop and an agent:
# - --sort vm, errors and self show their column (VM_STEPS, ERRORS, SELF;
#   before: sorted by a column the table never showed), in order, and the
#   --sort key's column is kept when columns are left out to fit;
# - an unknown sort key lists the valid keys (report and top), before the
#   profile is read;
# - -w N never cuts fewer bytes than its "(M more bytes)" note takes
#   (before: "... (1 more bytes)"); what is cut plus what is kept is the
#   text;
# - fitted to COLUMNS 60..250: the columns keep the table's order and a
#   narrower table shows a subset of a wider one's; at 80, MEAN stays
#   (before: it went before P99 and MAX);
# - HTML: headers never break inside a word (th nowrap), plan blocks show
#   no sql_id / schema_id;
# - top: a key-hint line, sort keys and a drill-down (a pseudo terminal:
#   top_keys.py); --sort and --query in --once; no TIME% of totals under
#   an interval of "0 ns db time" (before: shares of the totals);
# - an agent's profile says "# agent snapshot covering N s", not "# run:
#   exit status 0" (nothing exited); JSON agent_snapshot true and
#   exit_status null.
. "$(dirname "$0")/lib.sh"
need_prog shop
"$SQLPROF" record -q -o "$TMP/s.db" -- "$PROGS/shop" indexed >/dev/null 2>"$TMP/rec.err" ||
	fail "record shop: $(cat "$TMP/rec.err")"
report_json "$TMP/s.db" "$TMP/s.json"

# --sort: the column shown, in order
for k in vm:VM_STEPS:vm_steps errors:ERRORS:errors self:SELF:self_ns; do
	key=${k%%:*} rest=${k#*:}
	col=${rest%%:*} field=${rest#*:}
	"$SQLPROF" report --no-doctor -s "$key" "$TMP/s.db" >"$TMP/sort.txt" || fail "report -s $key"
	grep -q "^ *COUNT .* ROWS  *$col  SQL$" "$TMP/sort.txt" || fail "-s $key: no $col column: $(grep COUNT "$TMP/sort.txt")"
	"$PYTHON" - "$TMP/sort.txt" "$TMP/s.json" "$field" "$key" <<'PY' || fail "-s $key: see above"
import json, sys
lines = open(sys.argv[1]).read().split("\n")
qs = json.load(open(sys.argv[2]))["queries"]
field, key = sys.argv[3], sys.argv[4]
head = [l for l in lines if l.lstrip().startswith("COUNT ")][0]
end = head.index("  SQL")
rows = [l for l in lines[lines.index(head) + 1:] if l.strip() and not l.lstrip().startswith(("->", "#"))]
prog = [q for q in qs if not q["sqlite_internal"]]
prog.sort(key=lambda q: -q[field])
assert len(rows) == len(qs), (len(rows), len(qs))
for q, l in zip(prog, rows):
    v = l[:end].split()[-1]
    if key != "self":
        assert int(v) == q[field], (l, q[field])
vals = [q[field] for q in prog]
assert vals == sorted(vals, reverse=True), vals
PY
	COLUMNS=60 "$SQLPROF" report --no-doctor -s "$key" "$TMP/s.db" | grep -q "^ *COUNT .* $col  SQL$" ||
		fail "-s $key at 60 columns: $col left out"
done
COLUMNS=60 "$SQLPROF" report --no-doctor -s p50 "$TMP/s.db" | grep -q '^ *COUNT .* P50 .*SQL$' ||
	fail "-s p50 at 60 columns: P50 left out"

# an unknown key lists the keys, before any profile is read
"$SQLPROF" report --sort foo "$TMP/none.db" >/dev/null 2>"$TMP/e.txt"; rc=$?
[ "$rc" -eq 2 ] || fail "report --sort foo exited $rc"
for k in total count mean p50 p95 p99 max rows self errors vm prepare; do
	grep -q "unknown sort key 'foo' (.*\b$k\b" "$TMP/e.txt" || fail "report --sort foo does not list $k: $(cat "$TMP/e.txt")"
done
"$SQLPROF" top --once --sort foo "$TMP/s.db" >/dev/null 2>"$TMP/e.txt"; rc=$?
[ "$rc" -eq 2 ] || fail "top --sort foo exited $rc"
grep -q "unknown sort key 'foo' (time, count, rate, mean, p95, rows, errors)" "$TMP/e.txt" ||
	fail "top --sort foo: $(cat "$TMP/e.txt")"

# -w: never a note longer than what it stands for
for w in $(seq 20 3 140); do
	"$SQLPROF" report --no-doctor -w "$w" "$TMP/s.db" >"$TMP/w.txt" || fail "report -w $w"
	"$PYTHON" - "$TMP/w.txt" "$TMP/s.json" "$w" <<'PY' || fail "-w $w: see above"
import json, re, sys
txt, w = open(sys.argv[1]).read(), int(sys.argv[3])
fps = [q["fingerprint"] for q in json.load(open(sys.argv[2]))["queries"]]
lines = txt.split("\n")
start = [l for l in lines if l.lstrip().startswith("COUNT ")][0].index("  SQL") + 2
for l in lines:
    if l.startswith("#") or l.lstrip().startswith("->"):
        continue
    l = l[start:]
    l = l[7:] if l.startswith("[exec] ") else l
    m = re.match(r"(.*)\.\.\. \((\d+) more bytes\)$", l)
    if not m:
        continue
    kept, cut = m.group(1), int(m.group(2))
    assert cut > len("... (%d more bytes)" % cut), ("cut %d bytes to say so" % cut, l)
    assert any(f.startswith(kept) and len(f) == len(kept) + cut for f in fps), l
    assert len(kept) <= w, l
assert not re.search(r"\(1 more byte", txt)
PY
done

# fitted: the table's order, subsets as it narrows, MEAN at 80
prev=""
for c in 250 160 120 100 80 70 60; do
	COLUMNS=$c "$SQLPROF" report --no-doctor "$TMP/s.db" | grep '^ *COUNT ' >"$TMP/h$c.txt"
	"$PYTHON" - "$TMP/h$c.txt" "$prev" <<'PY' || fail "COLUMNS=$c: see above"
import sys
order = "COUNT TOTAL PREPARE MEAN P50 P95 P99 MAX ROWS".split()
cols = open(sys.argv[1]).read().split()[:-1]
idx = [order.index(c) for c in cols]
assert idx == sorted(idx), cols
if sys.argv[2]:
    wider = open(sys.argv[2]).read().split()[:-1]
    assert set(cols) <= set(wider), (cols, wider)
PY
	prev=$TMP/h$c.txt
done
grep -q ' MEAN ' "$TMP/h80.txt" || fail "at 80 columns MEAN is left out: $(cat "$TMP/h80.txt")"

# HTML
"$SQLPROF" export -f html -o "$TMP/s.html" "$TMP/s.db" || fail "export html"
grep -q 'th{[^}]*white-space:nowrap' "$TMP/s.html" || fail "HTML headers may break inside a word"
grep -q '<h4>Plan</h4>' "$TMP/s.html" || fail "HTML: no plan block"
! grep -q 'sql_id\|schema_id' "$TMP/s.html" || fail "HTML plan blocks show internal ids: $(grep -m1 -o '.\{40\}sql_id.\{40\}' "$TMP/s.html")"

# top: --sort and --query in --once, keys on a pseudo terminal
"$SQLPROF" top --once --sort count "$TMP/s.db" >"$TMP/top.txt" || fail "top --once --sort count"
grep -q 'sorted by count' "$TMP/top.txt" || fail "top --sort count: $(head -3 "$TMP/top.txt")"
"$PYTHON" - "$TMP/top.txt" <<'PY' || fail "top --sort count: not by count"
import sys
lines = open(sys.argv[1]).read().split("\n")
i = [k for k, l in enumerate(lines) if l.lstrip().startswith("EXEC/S")][0]
counts = [int(l.split()[2]) for l in lines[i + 1:] if l.strip()]
assert counts and counts == sorted(counts, reverse=True), counts
PY
id=$("$PYTHON" -c 'import json,sys; print([q for q in json.load(open(sys.argv[1]))["queries"] if q["fingerprint"].startswith("SELECT sum(amount)")][0]["fingerprint_id"])' "$TMP/s.json")
"$SQLPROF" top --once --query "${id:0:6}" "$TMP/s.db" >"$TMP/q.txt" || fail "top --query"
grep -q "^query $id (stmt)$" "$TMP/q.txt" || fail "top --query: $(cat "$TMP/q.txt")"
grep -q '^  SELECT sum(amount) FROM orders WHERE customer_id = ?$' "$TMP/q.txt" || fail "top --query: no text"
grep -q '^site: run (shop.c:55)$' "$TMP/q.txt" || fail "top --query: no site: $(cat "$TMP/q.txt")"
grep -q '^executions 60, rows 60, errors 0$' "$TMP/q.txt" || fail "top --query: $(cat "$TMP/q.txt")"
"$SQLPROF" top --once --query zz "$TMP/s.db" >/dev/null 2>&1 && fail "top --query zz accepted"
"$PYTHON" "$ITDIR/top_keys.py" "$SQLPROF" "$TMP/s.db" || fail "top's keys"

# an agent: its profile is a snapshot; top's interval of 0 ns has no TIME%
agent_setup
agent_start --interval 0.5
eval "$("$SQLPROF" env --socket "$S")"
"$PROGS/shop" indexed >/dev/null || fail "shop under the agent"
unset LD_PRELOAD SQLPROF_SOCK
idle() { # a frame whose interval ran nothing, with the shop's queries
	"$SQLPROF" top --once --delay 0.2 --socket "$S" >"$TMP/idle.txt" 2>&1 &&
		grep -q '0 executions, 0 ns db time' "$TMP/idle.txt" &&
		grep -q 'SELECT sum(amount)' "$TMP/idle.txt"
}
wait_until 60 idle || fail "after 60 s no idle frame with the shop's queries: $(cat "$TMP/idle.txt")"
"$PYTHON" - "$TMP/idle.txt" <<'PY' || fail "TIME% under 0 ns db time: $(cat "$TMP/idle.txt")"
import sys
lines = open(sys.argv[1]).read().split("\n")
i = [k for k, l in enumerate(lines) if l.lstrip().startswith("EXEC/S")][0]
rows = [l.split() for l in lines[i + 1:] if l.strip()]
assert rows and all(r[1] == "-" for r in rows), rows
PY
in_profile() { [ -e "$P" ] && "$SQLPROF" report --no-doctor "$P" 2>/dev/null | grep -q 'SELECT sum(amount)'; }
wait_until 60 in_profile || fail "after 60 s the agent's profile has not the shop's queries"
"$SQLPROF" report --no-doctor "$P" >"$TMP/ag.txt" || fail "report of the agent's profile"
grep -q '^# agent snapshot covering [0-9.]* s (sqlprof agent; its programs were still running)$' "$TMP/ag.txt" ||
	fail "agent profile: $(head -5 "$TMP/ag.txt")"
! grep -q '^# run: exit status' "$TMP/ag.txt" || fail "agent profile says it exited"
report_json "$P" "$TMP/ag.json"
"$PYTHON" -c 'import json,sys; r = json.load(open(sys.argv[1])); assert r["agent_snapshot"] is True and r["exit_status"] is None, r["exit_status"]' \
	"$TMP/ag.json" || fail "agent profile JSON"
"$SQLPROF" report "$TMP/s.db" | grep -q '^# run: exit status 0, ' || fail "a recorded run lost its exit status"
echo "ok: sort columns, sort keys listed, -w notes, column order, HTML, top keys/sort/drill-down/TIME%, agent snapshot"
