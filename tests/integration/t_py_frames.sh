#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_py_frames.sh - Python programs' queries carry their Python frames:
# py_frames_app.py (a method, a nested function, a generator, a lambda, a
# multi-line call) at --rate 1 under every CPython here (pyenv's 3.8 to
# 3.13, Debian's /usr/bin/python3.11):
#   - output as without sqlprof;
#   - each query's Python frames in the profile (names, files, lines)
#     are those CPython's own traceback gives for it (recorded by the
#     app from inside the query), innermost first;
#   - its site in `report --format json` is its innermost Python frame
#     (before: stmt_step (cursor.c:523), or pysqlite_step (util.c:37));
#   - --skip on a Python function moves the site to its caller;
# and the bad cases harm nothing: a version without a layout (3.7, 3.6)
# says so once and keeps native frames; a wrong layout forced with
# SQLPROF_PY_LAYOUT cuts stacks short, output unchanged.
. "$(dirname "$0")/lib.sh"
app=$(cd "$(dirname "$0")" && pwd)/py_frames_app.py
root=$(pyenv root 2>/dev/null || true)
pys=()
for v in 3.8 3.9 3.10 3.11 3.12 3.13; do
	for p in "$root"/versions/$v.*/bin/python$v; do
		[ -x "$p" ] && "$p" -c 'import sqlite3' 2>/dev/null && pys+=("$p")
	done
done
[ -x /usr/bin/python3.11 ] && pys+=(/usr/bin/python3.11)
[ ${#pys[@]} -gt 0 ] || skip "no CPython 3.8-3.13 with sqlite3 here"
cd "$TMP" || exit 1

check() { # python profile expected.json: frames and sites
	"$PYTHON" - "$1" "$2" "$3" "$4" <<'PY'
import json, sqlite3, subprocess, sys
py, prof, exp_path, sqlprof = sys.argv[1:5]
exp = json.load(open(exp_path))
db = sqlite3.connect(prof)
bad = []
rep = json.loads(subprocess.run([sqlprof, "report", "--format", "json", prof],
                                capture_output=True, check=True).stdout)
for sql, want in exp.items():
    fp = sql.replace("7", "?") if sql.startswith("SELECT 7") else sql
    rows = db.execute(
        "SELECT s.stack_id, s.samples FROM stack_samples s JOIN queries q USING (fp_id, kind)"
        " WHERE q.sql = ? OR q.fingerprint = ? OR rtrim(q.sql, ';') = ?", (sql, fp, sql)).fetchall()
    if not rows:
        bad.append(f"{sql}: no stack")
        continue
    for sid, n in rows:
        got = db.execute("SELECT function, file, line FROM frames WHERE stack_id = ? AND pc < 0"
                         " ORDER BY idx", (sid,)).fetchall()
        got = [[f.rsplit(".", 1)[-1] if f != "<module>" else f, fi, ln] for f, fi, ln in got]
        w = [[n_, f_, l_] for n_, f_, l_ in want]
        if got != w:
            bad.append(f"{sql}: frames {got} != CPython's {w}")
    q = [q for q in rep["queries"] if q["sql"] in (sql, sql + ";") or q["fingerprint"] == fp]
    sites = [(s["function"].rsplit(".", 1)[-1], s["line"]) for s in q[0]["sites"]] if q else []
    if sites != [(want[0][0], want[0][2])]:
        bad.append(f"{sql}: sites {sites}, expected {(want[0][0], want[0][2])}")
if bad:
    print(f"{py}:", *bad, sep="\n  ")
    sys.exit(1)
print(f"{py}: {len(exp)} queries, frames as CPython's traceback, sites right")
PY
}

for py in "${pys[@]}"; do
	n=$(basename "$py")_$(echo "$py" | md5sum | cut -c1-6)
	"$py" "$app" "$n.plain.json" >"$n.plain" 2>&1 || fail "$py without sqlprof: $(cat "$n.plain")"
	"$SQLPROF" record -q --rate 1 -o "$n.db" -- "$py" "$app" "$n.json" >"$n.out" 2>"$n.err" ||
		fail "$py under sqlprof: $(cat "$n.out" "$n.err")"
	same_file "$py: output" "$n.plain" "$n.out"
	check "$py" "$n.db" "$n.json" "$SQLPROF" || fail "$py: Python frames wrong"
done

# --skip a Python function: the site moves to its caller
py=${pys[-1]}
n=$(basename "$py")_$(echo "$py" | md5sum | cut -c1-6)
"$SQLPROF" report --format json --skip '*user_name' "$n.db" >skip.json || fail "report --skip"
"$PYTHON" - skip.json <<'PY' || fail "--skip on a Python function did not move the site"
import json, sys
q = [q for q in json.load(open(sys.argv[1]))["queries"] if q["sql"].startswith("SELECT name")][0]
s = q["sites"][0]
assert s["function"] == "main" and s["line"] > 0, s
print("--skip '*user_name':", s["function"], s["line"])
PY

# a wrong layout, forced: output unchanged, nothing crashes
SQLPROF_PY_LAYOUT=3.9 "$SQLPROF" record -q --rate 1 -o wrong.db -- "$py" "$app" wrong.json >wrong.out 2>&1 ||
	fail "$py with a wrong layout: $(cat wrong.out)"
same_file "$py with a wrong layout: output" "$n.plain" wrong.out
echo "wrong layout: $(sqlite3 wrong.db 'SELECT count(*) FROM frames WHERE pc < 0') Python frames, output unchanged"

# a version without a layout: one warning, native frames
for v in 3.7 3.6; do
	for p in "$root"/versions/$v.*/bin/python$v; do
		[ -x "$p" ] && "$p" -c 'import sqlite3' 2>/dev/null || continue
		"$p" "$app" old.plain.json >old.plain 2>&1 || continue
		"$SQLPROF" record --rate 1 -o old.db -- "$p" "$app" old.json >old.out 2>old.err ||
			fail "$p under sqlprof: $(cat old.err)"
		same_file "$p: output" old.plain old.out
		[ "$(grep -c "CPython whose frames sqlprof cannot read" old.err)" = 1 ] ||
			fail "$p: expected one warning: $(cat old.err)"
		[ "$(sqlite3 old.db 'SELECT count(*) FROM frames WHERE pc < 0')" = 0 ] ||
			fail "$p: Python frames from a version without a layout"
		echo "$p: one warning, native frames only"
		break 2
	done
done
exit 0
