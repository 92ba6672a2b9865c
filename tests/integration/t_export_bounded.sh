#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_export_bounded.sh - issue 24, item 7: the timeline exports (chrome,
# perfetto) are bounded. A recording of 20,000 executions at --rate 1
# (20,000 sampled executions): --max-events 1000 writes the first 1,000 in
# time and says what was cut on stderr and in the file (chrome's
# otherData.events_cut, a Perfetto track named so); --since/--until keep
# the executions starting in that window after the first one; without the
# options every one of them is written (under the default cap of
# 300,000) and nothing is said cut; bad values are exit 2. Before: no
# option and no bound (a 5 M-event profile was a 1.43 GB JSON).
. "$(dirname "$0")/lib.sh"
need_prog trivial
cd "$TMP" || exit 1
"$SQLPROF" record -q --rate 1 -o p.db -- "$PROGS/trivial" 20000 >/dev/null 2>err || fail "record: $(cat err)"
n=$("$PYTHON" -c 'import sqlite3; print(sqlite3.connect("p.db").execute("select count(*) from events").fetchone()[0])')
lost=$("$PYTHON" -c 'import sqlite3; r = sqlite3.connect("p.db").execute("select value from meta where key = '"'lost'"'").fetchone(); print(r[0] if r else 0)')
# on a loaded machine the collector may fall behind: sampled executions
# are then lost, counted (the totals stay exact); what reached the profile
# is what the exports are checked against
[ $((n + lost)) -ge 20000 ] || fail "the profile has $n events and $lost lost, expected 20,000 or more"
[ "$lost" = 0 ] || echo "note: $lost records lost on this loaded machine, counted; $n events in the profile"
[ "$n" -gt 2000 ] || skip "only $n of 20,000 sampled executions reached the profile on this loaded machine ($lost lost, counted): too few to check a cut at 1,000"

"$SQLPROF" export -f chrome --max-events 1000 -o cut.json p.db 2>err || fail "export: $(cat err)"
grep -q "1000 of $n sampled executions exported" err || fail "nothing said on stderr: $(cat err)"
"$PYTHON" - cut.json "$n" <<'PY' || fail "chrome --max-events 1000"
import json, sys
d = json.load(open(sys.argv[1]))
ev = [e for e in d["traceEvents"] if e["ph"] == "X"]
o = d["otherData"]
print("chrome: %d events, otherData %s" % (len(ev), o))
assert 0 < len(ev) <= 1000, len(ev)
assert o["events_total"] == int(sys.argv[2]) and o["events_exported"] == len(ev), o
assert "events_cut" in o and "--max-events 1000" in o["events_cut"], o
PY
"$PYTHON" - p.db cut.json <<'PY' || fail "not the first in time"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
starts = sorted(r[0] for r in db.execute("select start_ns from events"))
ev = [e for e in json.load(open(sys.argv[2]))["traceEvents"] if e["ph"] == "X"]
last = max(float(e["ts"]) for e in ev) * 1000
# every exported one starts before every one left out
assert last <= starts[len(ev)] + 1, (last, starts[len(ev)])
PY

"$SQLPROF" export -f chrome -o all.json p.db 2>err || fail "export: $(cat err)"
[ ! -s err ] || fail "stderr without a cut: $(cat err)"
"$PYTHON" - all.json "$n" <<'PY' || fail "chrome without options"
import json, sys
d = json.load(open(sys.argv[1]))
ev = [e for e in d["traceEvents"] if e["ph"] == "X"]
assert len(ev) == int(sys.argv[2]), len(ev)
assert "events_cut" not in d["otherData"], d["otherData"]
PY

# a window: the executions starting in [first + 10 ms, first + 30 ms)
"$SQLPROF" export -f chrome --since 10ms --until 30ms -o win.json p.db 2>err || fail "export: $(cat err)"
"$PYTHON" - p.db win.json <<'PY' || fail "chrome --since/--until"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
first = db.execute("select min(start_ns) from events").fetchone()[0]
want = db.execute("select count(*) from events where start_ns >= ? and start_ns < ?",
                  (first + 10000000, first + 30000000)).fetchone()[0]
ev = [e for e in json.load(open(sys.argv[2]))["traceEvents"] if e["ph"] == "X"]
print("window: %d events, %d in the profile's window" % (len(ev), want))
assert len(ev) == want, (len(ev), want)
PY

"$SQLPROF" export -f perfetto --max-events 1000 -o cut.pftrace p.db 2>err || fail "perfetto: $(cat err)"
grep -q "1000 of $n" err || fail "perfetto: nothing said on stderr: $(cat err)"
if command -v protoc >/dev/null; then
	protoc --decode_raw <cut.pftrace >dec.txt || fail "protoc cannot decode the trace"
	grep -q "1000 of $n sampled executions exported" dec.txt || fail "no track says what was cut"
	begins=$(grep -c "^ *9: 1$" dec.txt)
	echo "perfetto: $begins slice begins"
	[ "$begins" -le 1000 ] && [ "$begins" -gt 0 ] || fail "perfetto: $begins slice begins"
fi

for bad in "--max-events x" "--max-events -1" "--since 5x" "--last 1m"; do
	# shellcheck disable=SC2086
	"$SQLPROF" export -f chrome $bad -o bad.json p.db 2>/dev/null
	[ $? = 2 ] || fail "export $bad: not exit 2"
done
exit 0
