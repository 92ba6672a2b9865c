#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_long_in.sh - SQL texts longer than the 16 KiB the preload sends
# (issue 17, item 18). The sqlite3 shell runs, 5 times each with other
# values, a SELECT with an IN list of 4000 numbers (~25 KiB) followed by
# an ORDER BY, and a 1000-row INSERT ... VALUES (~20 KiB): each must be one
# query of 5 executions, fingerprinted "IN (...)" and "VALUES (?, ?), ...",
# as short texts are (before: 10 fingerprints, the cut lists spelled out
# as "?, ?, ..."), with 10 statements rows of the full lengths. Two
# recordings with other values pass sqlprof check (before: new-query
# regressions, exit 1).
. "$(dirname "$0")/lib.sh"
command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
cd "$TMP" || exit 1

# script SEED: the workload, its values drawn from SEED
script() {
	"$PYTHON" - "$1" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
print("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);")
for k in range(5):
    ids = ", ".join(str(r.randrange(10 ** r.randint(1, 9))) for _ in range(4000))
    print(f"SELECT count(*) FROM t WHERE id IN ({ids}) ORDER BY id;")
    rows = ", ".join(f"({k * 1000 + i}, 'v{r.randrange(10 ** r.randint(1, 9))}')" for i in range(1000))
    print(f"INSERT INTO t(id, v) VALUES {rows};")
PY
}
for run in 1 2; do
	script $run >w$run.sql
	"$SQLPROF" record -q -o p$run.db -- sqlite3 :memory: <w$run.sql >/dev/null 2>w$run.err ||
		fail "record $run: $(cat w$run.err)"
done
report_json p1.db r1.json
"$PYTHON" - <<'PY' || fail "long texts are not one query each"
import json
r = json.load(open("r1.json"))
q = [x for x in r["queries"] if x["kind"] == "stmt" and (" IN (" in x["fingerprint"] or "VALUES" in x["fingerprint"])
     and not x["fingerprint"].startswith("CREATE")]
for x in q:
    print(x["count"], x["fingerprint"][:100])
want = {"SELECT count(*) FROM t WHERE id IN (...) ORDER BY id": 5,
        "INSERT INTO t(id, v) VALUES (?, ?), ...": 5}
got = {x["fingerprint"]: x["count"] for x in q}
assert got == want, f"{len(got)} fingerprints, not 2: {[(k[:70] + '...', v) for k, v in got.items()]}"
PY
n=$(sqlite3 p1.db "SELECT count(*) FROM statements WHERE truncated = 1 AND full_len > 16384 AND length(sql) <= 16384")
[ "$n" = 10 ] || fail "want 10 long statements kept shortened with their full length, got $n"
sqlite3 p1.db "SELECT substr(sql, 1, 60), length(sql), full_len FROM statements WHERE truncated = 1 LIMIT 2"
"$SQLPROF" check --baseline p1.db p2.db >check.out 2>&1 || { cat check.out; fail "check of an unchanged program failed (exit $?)"; }
head -1 check.out
exit 0
