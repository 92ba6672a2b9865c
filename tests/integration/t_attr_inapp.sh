#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_inapp.sh - issue 26, item 1: by default a query's site is the
# first frame of the user's own code, not the ORM's or the standard
# library's. A Django-like and a SQLAlchemy-like package installed in a
# virtual environment's site-packages (tests/fixtures/inapp/), each driven
# by user code in a project folder named like the package ("django",
# "sqlalchemy"), at --rate 1 with no --skip: every execution of each query
# at the user's line (views.py, manage.py, app.py), exact, nothing
# unattributed (before: Django's 300 SELECTs at `CursorWrapper._execute
# (utils.py:15)`, SQLAlchemy's 200 at `DefaultDialect.do_execute
# (default.py:3)`). JSON keeps the frame passed over as "library_site";
# `--all-frames` gives the old site. Run with /usr/bin/python3 and python3
# from PATH when that is another interpreter whose _sqlite3 links
# libsqlite3 dynamically.
. "$(dirname "$0")/lib.sh"

FIX=$(cd "$ITDIR/../fixtures/inapp" && pwd)
pys=()
for py in /usr/bin/python3 "$(command -v python3 || true)"; do
	[ -n "$py" ] && [ -x "$py" ] || continue
	py=$("$py" -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -x "$py" ] || continue
	real=$(readlink -f "$py")
	for p in "${pys[@]}"; do [ "$(readlink -f "$p")" = "$real" ] && continue 2; done
	mod=$("$py" -c 'import _sqlite3; print(_sqlite3.__file__)' 2>/dev/null) || continue
	ldd "$mod" 2>/dev/null | grep -q 'libsqlite3\.so' || continue
	"$py" -c 'import sys; sys.exit(sys.version_info < (3, 8))' || continue # frames read from 3.8
	pys+=("$py")
done
[ ${#pys[@]} -gt 0 ] || skip "no python3 >= 3.8 whose _sqlite3 links libsqlite3 dynamically"

# check REPORT.json DIR APP:MARK=KEYWORD=COUNT...: each query whose
# fingerprint contains KEYWORD has COUNT executions, all at one site in
# DIR/APP at the line marked "# site: MARK"; nothing unattributed.
# --lib FILE_SUFFIX=FUNC_SUFFIX: the SELECT's site (--all-frames) or
# library_site (default) is FUNC in a file ending in FILE_SUFFIX.
check() {
	"$PYTHON" - "$@" <<'PY'
import json, os, sys
report, d = sys.argv[1], sys.argv[2]
args = sys.argv[3:]
mode = "default"
if args[0] in ("--lib", "--all-frames"):
    mode, want_lib, args = args[0], args[1], args[2:]
doc = json.load(open(report))
bad = []
for q in doc["queries"]:
    for s in q["sites"]:
        if s.get("unattributed"):
            bad.append("%r: %d unattributed" % (q["fingerprint"], s["est_count"]))
for a in args:
    where, kw, count = a.split("=")
    app, mark = where.split(":")
    path = os.path.join(d, app)
    line = [i + 1 for i, l in enumerate(open(path)) if l.rstrip().endswith("# site: " + mark)][0]
    qs = [q for q in doc["queries"] if kw in q["fingerprint"]]
    if len(qs) != 1:
        bad.append("%s: %d queries" % (kw, len(qs)))
        continue
    q = qs[0]
    sites = q["sites"]
    desc = ["%s (%s:%s) %s" % (s["function"], s["file"], s["line"], s["est_count"]) for s in sites]
    print("  %-50.50s %4d  %s" % (q["fingerprint"], q["count"], "; ".join(desc)))
    if q["count"] != int(count):
        bad.append("%s: count %d, expected %s" % (kw, q["count"], count))
    if mode == "--all-frames":
        fs, fn = want_lib.split("=")
        if kw.startswith("SELECT") and not (len(sites) == 1 and sites[0]["file"].endswith(fs)
                                            and sites[0]["function"].endswith(fn)):
            bad.append("--all-frames: %s at %s, expected %s in %s" % (kw, desc, fn, fs))
        continue
    if len(sites) != 1 or os.path.realpath(sites[0]["file"] or "") != os.path.realpath(path) \
            or sites[0]["line"] != line or sites[0]["est_count"] != int(count) \
            or sites[0]["samples"] != int(count):
        bad.append("%s: sites %s, expected all %s at %s:%d" % (kw, desc, count, app, line))
    if mode == "--lib" and kw.startswith("SELECT"):
        fs, fn = want_lib.split("=")
        lib = sites[0].get("library_site") or {}
        if not (lib.get("file", "").endswith(fs) and lib.get("function", "").endswith(fn)):
            bad.append("%s: library_site %r, expected %s in %s" % (kw, lib, fn, fs))
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
}

rc=0
n=0
for py in "${pys[@]}"; do
	n=$((n + 1))
	V=$TMP/venv$n
	"$py" -m venv --without-pip "$V" 2>"$TMP/venv$n.err" || skip "$py -m venv: $(cat "$TMP/venv$n.err")"
	SP=$("$V/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
	case $SP in */site-packages) ;; *) fail "venv's purelib $SP is no site-packages" ;; esac
	cp -r "$FIX/site-packages/django" "$FIX/site-packages/sqlalchemy" "$SP/"
	P=$TMP/proj$n
	mkdir -p "$P" && cp -r "$FIX/project/django" "$FIX/project/sqlalchemy" "$P/"
	echo "== $py: venv $V"

	(cd "$P/django" && "$V/bin/python3" manage.py >plain.out 2>&1) || fail "manage.py: $(cat "$P/django/plain.out")"
	(cd "$P/django" && "$SQLPROF" record -q --rate 1 -o "$TMP/dj$n.db" -- "$V/bin/python3" manage.py \
		>out 2>err) || fail "record manage.py: $(cat "$P/django/err")"
	same_file "manage.py output" "$P/django/plain.out" "$P/django/out"
	report_json "$TMP/dj$n.db" "$TMP/dj$n.json"
	check "$TMP/dj$n.json" "$P/django" --lib 'site-packages/django/db/backends/utils.py=_execute' \
		'views.py:index=SELECT title FROM book=300' 'views.py:sell=UPDATE book=40' \
		'manage.py:setup=CREATE TABLE book=1' 'manage.py:setup=INSERT INTO book=100' || rc=1
	"$SQLPROF" report --format json --all-frames "$TMP/dj$n.db" >"$TMP/dja$n.json" || fail "report --all-frames"
	check "$TMP/dja$n.json" "$P/django" --all-frames 'site-packages/django/db/backends/utils.py=_execute' \
		'views.py:index=SELECT title FROM book=300' || rc=1

	(cd "$P/sqlalchemy" && "$SQLPROF" record -q --rate 1 -o "$TMP/sa$n.db" -- "$V/bin/python3" app.py \
		>out 2>err) || fail "record app.py: $(cat "$P/sqlalchemy/err")"
	grep -qx 200 "$P/sqlalchemy/out" || fail "app.py printed $(cat "$P/sqlalchemy/out")"
	report_json "$TMP/sa$n.db" "$TMP/sa$n.json"
	check "$TMP/sa$n.json" "$P/sqlalchemy" --lib 'site-packages/sqlalchemy/engine/default.py=do_execute' \
		'app.py:create=CREATE TABLE user=1' 'app.py:insert=INSERT INTO user=50' \
		'app.py:select=SELECT name FROM user=200' || rc=1
	"$SQLPROF" report --format json --all-frames "$TMP/sa$n.db" >"$TMP/saa$n.json" || fail "report --all-frames"
	check "$TMP/saa$n.json" "$P/sqlalchemy" --all-frames 'site-packages/sqlalchemy/engine/default.py=do_execute' \
		'app.py:select=SELECT name FROM user=200' || rc=1
	# the table says the same
	"$SQLPROF" report "$TMP/sa$n.db" >"$TMP/sa$n.txt" || fail "report"
	grep -q -- '-> 200 execs, .* at <module> (.*app.py:11)' "$TMP/sa$n.txt" ||
		{ echo "FAIL: table: $(grep -- '->' "$TMP/sa$n.txt")"; rc=1; }
done
exit $rc
