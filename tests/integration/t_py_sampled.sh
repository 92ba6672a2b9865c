#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_py_sampled.sh - Python sites at the default rate (0.01), and CPython's
# own test suite under sqlprof:
#   1. one query from two Python functions, 14,000 and 6,000 executions
#      (py_two_sites.py): both sites found, at their lines, each estimate
#      within 20 % of the truth;
#   2. `python -m test test_sqlite3` on 3.11 and 3.13 (pyenv's, when there)
#      passes under `record --rate 1` as without it, with Python sites.
. "$(dirname "$0")/lib.sh"
dir=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || skip "no python3"
cd "$TMP" || exit 1

"$SQLPROF" record -q --seed 7 -o two.db -- "$py" "$dir/py_two_sites.py" >two.out 2>two.err ||
	fail "record: $(cat two.err)"
grep -qx ok two.out || fail "py_two_sites.py printed $(cat two.out)"
report_json two.db two.json
"$PYTHON" - two.json <<'PY' || fail "sites at the default rate"
import json, sys
q = [q for q in json.load(open(sys.argv[1]))["queries"] if q["fingerprint"] == "SELECT ? * ?"][0]
assert q["count"] == 20000, q["count"]
sites = {(s["function"], s["line"]): s["est_count"] for s in q["sites"]}
print("sites:", sites, "samples", sum(s["samples"] for s in q["sites"]))
for (fn, line), truth in ((("load_user", 10), 14000), (("load_post", 14), 6000)):
    est = sites.get((fn, line))
    assert est is not None, f"{fn} (line {line}) not found"
    assert abs(est - truth) <= 0.2 * truth, f"{fn}: estimate {est}, truth {truth}"
PY

root=$(pyenv root 2>/dev/null || true)
ran=0
for v in 3.11 3.13; do
	for p in "$root"/versions/$v.*/bin/python$v; do
		[ -x "$p" ] && "$p" -c 'import test.test_sqlite3' 2>/dev/null || continue
		"$p" -m test test_sqlite3 >plain$v.out 2>&1
		want=$?
		"$SQLPROF" record -q --rate 1 -o ts$v.db -- "$p" -m test test_sqlite3 >rec$v.out 2>rec$v.err
		got=$?
		[ "$got" = "$want" ] || fail "test_sqlite3 on $v exited $got under sqlprof, $want without: $(tail -5 rec$v.out rec$v.err)"
		grep -q "^Result: SUCCESS" rec$v.out || fail "test_sqlite3 on $v under sqlprof: $(tail -5 rec$v.out)"
		n=$(sqlite3 ts$v.db "SELECT count(*) FROM frames WHERE pc < 0 AND file LIKE '%test_sqlite3%'")
		[ "$n" -gt 0 ] || fail "test_sqlite3 on $v: no Python frames of the tests"
		echo "test_sqlite3 on $v: $(grep '^Total tests' rec$v.out), exit $got as without sqlprof; $n frames in test files"
		ran=$((ran + 1))
		break
	done
done
[ "$ran" -gt 0 ] || not_checked "no pyenv 3.11/3.13 with its test package: test_sqlite3"
exit 0
