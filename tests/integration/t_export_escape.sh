#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_export_escape.sh - hostile text (tests/golden/export/hostile.sql: SQL,
# fingerprints, function and file names, an error message and an
# executable name carrying <script>, ]]>, quotes, a newline, ';' and
# =cmd|) stays inert in every format: the SVG is well-formed XML with no
# element or attribute from the profile; the HTML has no script, img or
# event-handler attribute but its own; Chrome and speedscope JSON parse and
# give the texts back unchanged; the CSV has 22 fields per row, the texts
# back (a leading = guarded by '); folded has one well-formed line per stack.
. "$(dirname "$0")/lib.sh"

command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
GOLD=$ITDIR/../golden/export
SQLPROF=$SQLPROF "$GOLD/mkfixture.sh" "$TMP/h.db" "$GOLD/hostile.sql" || fail "mkfixture.sh failed"
cd "$TMP" || exit 1
for f in svg html chrome csv folded speedscope perfetto; do
	"$SQLPROF" export -f "$f" -o "h.$f" h.db 2>err || fail "export -f $f: $(cat err)"
done
sqlite3 h.db "SELECT fingerprint FROM queries WHERE fp_id = 1002" >fp.txt
sqlite3 h.db "SELECT sql FROM statements WHERE sql_id = 502" >sql.txt
"$PYTHON" - <<'PY' || fail "hostile text escaped wrongly"
import csv, json, re, sys, xml.dom.minidom
from html.parser import HTMLParser

fp = open("fp.txt", encoding="utf-8").read()[:-1]
sql = open("sql.txt", encoding="utf-8").read()[:-1]
bad = []

# SVG: well-formed; only sqlprof's own elements and attributes
doc = xml.dom.minidom.parse("h.svg")
tags = {e.tagName for e in doc.getElementsByTagName("*")}
if not tags <= {"svg", "style", "rect", "text", "g", "title", "script"}:
    bad.append("svg elements %s" % tags)
scripts = doc.getElementsByTagName("script")
if len(scripts) != 1 or "pwned" in scripts[0].toxml():
    bad.append("svg scripts")
for e in doc.getElementsByTagName("*"):
    for a in e.attributes.keys():
        if a.startswith("on"):
            bad.append("svg attribute " + a)
if fp.split("\n")[0] not in "".join(t.firstChild.data for t in doc.getElementsByTagName("title") if t.firstChild):
    bad.append("svg lost the fingerprint text")

# HTML: no element or attribute from the profile
class P(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.script, self.inscript, self.attrs = set(), "", False, set()
    def handle_starttag(self, t, a):
        self.tags.add(t)
        self.attrs |= {k for k, _ in a}
        self.inscript = t == "script"
    def handle_endtag(self, t):
        self.inscript = False
    def handle_data(self, d):
        if self.inscript:
            self.script += d
p = P()
p.feed(open("h.html", encoding="utf-8").read())
if {"img"} & p.tags or "pwned" in p.script:
    bad.append("html tags %s / script" % p.tags)
if [a for a in p.attrs if a.startswith("on")]:
    bad.append("html event attributes %s" % p.attrs)

# Chrome: the statement text comes back unchanged
ch = json.load(open("h.chrome", encoding="utf-8"))
if sql not in [e.get("args", {}).get("sql") for e in ch["traceEvents"]]:
    bad.append("chrome lost the sql text")
ss = json.load(open("h.speedscope", encoding="utf-8"))
if fp.replace("\n", " ") not in [f["name"] for f in ss["shared"]["frames"]]:
    bad.append("speedscope lost the fingerprint")

# CSV: 22 fields everywhere (the last, offset, issue 26), texts back, formula guarded
rows = list(csv.reader(open("h.csv", encoding="utf-8", newline="")))
if any(len(r) != 22 for r in rows):
    bad.append("csv field counts %s" % [len(r) for r in rows])
fps = [r[2] for r in rows[1:]]
if fp not in fps or "'=cmd|' /C calc'!A0" not in fps:
    bad.append("csv fingerprints %r" % fps)

# folded: one well-formed line per stack
for l in open("h.folded", encoding="utf-8").read().split("\n")[:-1]:
    if not re.fullmatch(r"[^;]+(;[^;]+)* [1-9][0-9]*", l):
        bad.append("folded line %r" % l)
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
exit 0
