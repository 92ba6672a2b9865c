#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_export_html_findings.sh - the HTML report has everything (issue 13),
# checked in headless Chromium at a 1400 px wide window, on a recording of
# tests/progs/formats_app.c and on the export fixture: the doctor's
# findings (<div id="findings">: n-plus-one, full-scan, temp-btree,
# reprepare), the failed executions (<div id="failures">: the failed
# single-statement exec once, the constraint failure; no libsqlprof
# frame), plans drawn as trees as the sqlite3 shell does (|--, `--), and
# no horizontal scroll: the page script sets <body data-overflow="N">,
# scrollWidth - clientWidth, which must be 0 (before: no findings, no
# failures section, plans as id|parent|detail rows, N = 358 on the
# formats_app recording).
. "$(dirname "$0")/lib.sh"
need_prog formats_app
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$CHROMIUM" ] || skip "chromium not installed (apt-get install chromium)"
command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
GOLD=$ITDIR/../golden/export
cd "$TMP" || exit 1
"$SQLPROF" record -q --rate 1 -o a.db -- "$PROGS/formats_app" >/dev/null 2>err || fail "record: $(cat err)"
SQLPROF=$SQLPROF "$GOLD/mkfixture.sh" f.db || fail "mkfixture.sh failed"
for p in a f; do
	"$SQLPROF" export -f html -o "$p.html" "$p.db" || fail "export html $p"
	chrome --window-size=1400,1000 --virtual-time-budget=3000 --dump-dom "file://$TMP/$p.html" \
		>"$p.dom" || fail "chromium --dump-dom $p.html failed: $(tail -n 3 chrome.log)"
	grep -q 'data-error=' "$p.dom" && fail "$p: JavaScript error: $(grep -o 'data-error="[^"]*"' "$p.dom")"
	o=$(grep -o '<body[^>]*data-overflow="[^"]*"' "$p.dom" | sed 's/.*data-overflow="//; s/"//')
	[ "$o" = 0 ] || fail "$p: the page scrolls horizontally at 1400 px by '$o' px"
	echo "$p: no horizontal scroll at 1400 px"
done
for k in n-plus-one full-scan temp-btree reprepare; do
	grep -q "<dl class=\"finding\" data-kind=\"$k\"" a.dom || fail "no $k finding in the HTML"
done
grep -q '<div id="failures" data-n="3">' a.dom || fail "failures: $(grep -o '<div id="failures"[^>]*>' a.dom)"
# once in the failures section, once in its query's details
[ "$(grep -c 'no transaction is active' a.dom)" = 2 ] || fail "the failed COMMIT is not listed exactly twice"
grep -q 'libsqlprof' a.dom && fail "a libsqlprof frame in the HTML"
"$PYTHON" - a.dom <<'PY' || fail "plans are not drawn as trees"
import html, re, sys
d = html.unescape(open(sys.argv[1]).read())
want = ["QUERY PLAN", "|--SEARCH o USING INTEGER PRIMARY KEY (rowid=?)", "|--LIST SUBQUERY 2",
        "|  `--SCAN item", "`--CORRELATED SCALAR SUBQUERY 1", "   `--SCAN i"]
lines = d.splitlines()
missing = [w for w in want if w not in lines]
if missing:
    print("missing plan lines:", missing, file=sys.stderr)
    sys.exit(1)
PY
exit 0
