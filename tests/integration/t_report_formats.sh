#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_report_formats.sh - every format has everything (issue 13), on
# tests/progs/formats_app.c:
# - report --format json has "findings" (kind, fingerprint_id, sql, site,
#   evidence, suggestion: n-plus-one, reprepare, full-scan, temp-btree),
#   "failures" (code, message, stack without libsqlprof frames), the run's
#   command, duration, exit status, rate and runs, and each plan as nodes
#   {id, parent, detail} (before: none of the lists, nor command, rate, runs);
# - report --format csv --findings / --failures print them as CSV;
# - report --plans draws plans as the sqlite3 shell does (|--, `--);
# - a single-statement sqlite3_exec is one row ([exec] COMMIT, not also
#   COMMIT; before: both), its failure is listed once, with no libsqlprof
#   frame (before: twice, one stack through the shim), and errors.kind is
#   'exec' for it (before: always 'stmt').
. "$(dirname "$0")/lib.sh"
need_prog formats_app

"$SQLPROF" record -q --rate 1 -o "$TMP/p.db" -- "$PROGS/formats_app" >"$TMP/out" 2>"$TMP/err" ||
	fail "record exited $?: $(cat "$TMP/err")"
report_json "$TMP/p.db" "$TMP/r.json"
expect "$TMP/r.json" \
	-t exit_status=0 runs=1 rate=1 "command=$PROGS/formats_app" \
	-q exec 'COMMIT' count=7 errors=1 folded=True \
	-q exec 'BEGIN' count=6 folded=True \
	-a stmt 'COMMIT' -a stmt 'BEGIN'

"$PYTHON" - "$TMP/r.json" <<'PY' || fail "JSON findings/failures/plans"
import json, sys
d = json.load(open(sys.argv[1]))
bad = []
for k in ("findings", "failures", "command", "duration_ns", "exit_status", "rate", "runs"):
    if k not in d:
        bad.append("no %r" % k)
if d.get("duration_ns", -1) <= 0:
    bad.append("duration_ns %r" % d.get("duration_ns"))
kinds = {f["kind"] for f in d.get("findings", [])}
for k in ("n-plus-one", "reprepare", "full-scan", "temp-btree"):
    if k not in kinds:
        bad.append("no %s finding (have %s)" % (k, sorted(kinds)))
for f in d.get("findings", []):
    for k in ("kind", "fingerprint_id", "sql", "site", "evidence", "suggestion"):
        if not isinstance(f.get(k), str) or not f[k]:
            bad.append("finding %r: %s" % (f.get("kind"), k))
np1 = [f for f in d.get("findings", []) if f["kind"] == "n-plus-one"]
if np1 and (np1[0]["sql"] != "SELECT name FROM owner WHERE id = ?1" or "formats_app.c:82)" not in np1[0]["site"]):
    bad.append("n-plus-one finding: %r" % np1[0])
fails = d.get("failures", [])
commit = [x for x in fails if x["fingerprint"] == "COMMIT"]
if len(commit) != 1 or commit[0]["kind"] != "exec" or commit[0]["code"] != 1 \
        or "no transaction is active" not in commit[0]["message"] or commit[0]["count"] != 1:
    bad.append("COMMIT failure listed %d times: %r" % (len(commit), commit))
# the failed exec of an INSERT and the failed prepared INSERT: the same
# message, two failures (the exec's statement is not a third)
dup = sorted((x["kind"], x["code"], x["count"]) for x in fails if x["fingerprint"].startswith("INSERT INTO owner"))
if dup != [("exec", 1555, 1), ("stmt", 1555, 1)]:
    bad.append("constraint failures: %r" % dup)
for x in fails:
    if not x["stack"] or x["stack"][0]["function"] != "main":
        bad.append("failure stack %r" % x["stack"][:2])
    if any("libsqlprof" in fr["module"] for fr in x["stack"]):
        bad.append("libsqlprof frame in a failure's stack")
q = [q for q in d["queries"] if q["fingerprint"].startswith("SELECT o.name")]
if not q:
    bad.append("no join query")
else:
    nodes = q[0]["plan_nodes"]
    lines = q[0]["plan"].splitlines()
    if [(n["id"], n["parent"], n["detail"]) for n in nodes] != \
            [(int(l.split("|")[0]), int(l.split("|")[1]), l.split("|", 2)[2]) for l in lines]:
        bad.append("plan_nodes %r vs plan %r" % (nodes, lines))
    if not any(n["parent"] != 0 for n in nodes):
        bad.append("no nested plan node: %r" % nodes)
for b in bad:
    print("FAIL:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY

# the errors table: one 'exec' row for the failed exec
k=$(sqlite3 "$TMP/p.db" "SELECT group_concat(kind) FROM errors WHERE rc = 1") || fail "errors table"
case ",$k," in *,exec,*) ;; *) fail "errors.kind of the failed exec: '$k', expected an 'exec' row" ;; esac

# CSV: the findings and the failures
"$SQLPROF" report -f csv --findings "$TMP/p.db" >"$TMP/f.csv" || fail "report --findings exited $?"
"$SQLPROF" report -f csv --failures "$TMP/p.db" >"$TMP/e.csv" || fail "report --failures exited $?"
"$PYTHON" - "$TMP/f.csv" "$TMP/e.csv" <<'PY' || fail "CSV findings/failures"
import csv, sys
f = list(csv.DictReader(open(sys.argv[1])))
e = list(csv.DictReader(open(sys.argv[2])))
bad = []
if {r["kind"] for r in f} < {"n-plus-one", "full-scan", "temp-btree", "reprepare"}:
    bad.append("findings CSV kinds %r" % sorted({r["kind"] for r in f}))
if [r["fingerprint"] for r in e].count("COMMIT") != 1:
    bad.append("failures CSV: %r" % e)
if len(e) != 3 or not all(r["site"].startswith("main (") for r in e):
    bad.append("failures CSV sites %r" % [r["site"] for r in e])
for b in bad:
    print("FAIL:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY

# the table: one COMMIT row, its failure once, plans as trees
"$SQLPROF" report --plans -w 0 "$TMP/p.db" >"$TMP/t.txt" || fail "report --plans exited $?"
n=$(grep -cE '^ +[0-9]+ .*  (\[exec\] )?COMMIT$' "$TMP/t.txt")
[ "$n" = 1 ] || { cat "$TMP/t.txt" >&2; fail "$n COMMIT rows in the table, expected 1"; }
n=$(grep -c 'no transaction is active' "$TMP/t.txt")
[ "$n" = 1 ] || fail "the failed COMMIT is listed $n times, expected once"
grep -q 'libsqlprof' "$TMP/t.txt" && fail "a libsqlprof frame in the report"
for l in '|--SEARCH o USING INTEGER PRIMARY KEY (rowid=?)' '|--LIST SUBQUERY 2' '|  `--SCAN item' \
	'`--CORRELATED SCALAR SUBQUERY 1' '   `--SCAN i'; do
	grep -qF -- "$l" "$TMP/t.txt" || { grep -A8 'plan:' "$TMP/t.txt" >&2; fail "--plans: no line '$l'"; }
done
exit 0
