#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_thread_churn.sh - 500 short-lived threads (Python, 10 batches of
# 50 at a time), each with its own connection and 10 queries: the rings of
# ended threads are reused by later ones, and every execution arrives
# exactly once (5000), nothing lost, output as without sqlprof; the process
# holds at most one ring per thread running at a time (checked through
# its memfds: at most 51 "sqlprof-ring" mappings in /proc/PID/maps).
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no /usr/bin/python3"
cat >"$TMP/churn.py" <<'EOS'
import os, sqlite3, threading
def work(i):
    db = sqlite3.connect(":memory:")
    s = 0
    for j in range(10):
        s += db.execute("SELECT ? + ?", (i, j)).fetchone()[0]
    db.close()
    out[i] = s
out = [0] * 500
for batch in range(10):
    ts = [threading.Thread(target=work, args=(batch * 50 + k,)) for k in range(50)]
    for t in ts: t.start()
    for t in ts: t.join()
rings = sum(1 for l in open("/proc/self/maps") if "sqlprof-ring" in l)
print("sum", sum(out))
with open(os.environ.get("RINGS_OUT", "/dev/null"), "w") as f:
    f.write(str(rings))
EOS
"$PY" "$TMP/churn.py" >"$TMP/plain.out" 2>"$TMP/plain.err" || fail "python without sqlprof failed: $(cat "$TMP/plain.err")"
RINGS_OUT=$TMP/rings "$SQLPROF" record -q -o "$TMP/p.db" -- "$PY" "$TMP/churn.py" >"$TMP/rec.out" 2>"$TMP/rec.err" ||
	fail "sqlprof record failed: $(cat "$TMP/rec.err")"
same_file "stdout" "$TMP/plain.out" "$TMP/rec.out"
res=$(sqlite3 "$TMP/p.db" "SELECT (SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = 'SELECT ? + ?'),
	(SELECT coalesce(sum(lost), 0) FROM processes)") || fail "cannot read the profile"
IFS='|' read -r count lost <<<"$res"
rings=$(cat "$TMP/rings")
echo "500 threads: $count executions, lost $lost, $rings ring mappings at the end"
[ "$count" = 5000 ] || fail "$count executions in the profile, expected 5000"
[ "$lost" = 0 ] || fail "$lost records lost"
[ "$rings" -ge 1 ] && [ "$rings" -le 51 ] || fail "$rings ring mappings for at most 51 threads at a time"
exit 0
