#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_export_deep.sh - no recursion bounded by input (issue 17, item 17): a
# recording of counts given a 50,000-frame stack (frames of distinct
# functions added under its costliest stack with the sqlite3 shell). With
# the stack limited to 1 MiB, every export format, report (table with
# --stacks, JSON, --by site), diff and check exit 0; the SVG (and the
# HTML's) flamegraph is well-formed and draws all 50,000 frames as nested
# towers. Before, export -f svg and -f html died of a stack overflow in
# the recursive draw() (exit 139) even with the default 8 MiB.
. "$(dirname "$0")/lib.sh"
need_prog counts
command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
cd "$TMP" || exit 1
"$SQLPROF" record -q --rate 1 -o base.db -- "$PROGS/counts" >/dev/null 2>&1
[ -s base.db ] || fail "cannot record counts"
cp base.db deep.db
sqlite3 deep.db "
WITH s AS (SELECT pid, stack_id FROM stack_samples ORDER BY samples DESC LIMIT 1),
 r(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM r WHERE n < 49999)
INSERT INTO frames SELECT s.pid, s.stack_id, 1000 + n, 4096 + n, '/usr/bin/deep', 'deep' || n,
	'deep.c', n + 1, 0 FROM s, r;" || fail "cannot deepen the stack"
errors=0
ulimit -s 1024 || skip "cannot limit the stack size"
for f in folded svg html speedscope perfetto chrome csv; do
	"$SQLPROF" export -f "$f" -o "deep.$f" deep.db 2>err
	rc=$?
	[ "$rc" -eq 0 ] || { echo "FAIL: export -f $f exited $rc: $(head -c 200 err)" >&2; errors=$((errors + 1)); }
done
for form in "report --stacks" "report --format json" "report --by site" "diff base.db" \
	"check --baseline base.db"; do
	# shellcheck disable=SC2086
	"$SQLPROF" $form deep.db >/dev/null 2>err
	rc=$?
	[ "$rc" -eq 0 ] || { echo "FAIL: $form exited $rc: $(head -c 200 err)" >&2; errors=$((errors + 1)); }
done
[ "$errors" -eq 0 ] || fail "$errors command(s) failed on a 50,000-frame stack"
"$PYTHON" - <<'PY' || fail "the flamegraph does not hold the deep stack"
import re, xml.dom.minidom
svg = xml.dom.minidom.parse("deep.svg")
titles = [g.getElementsByTagName("title")[0].firstChild.data for g in svg.getElementsByTagName("g")]
deep = [t for t in titles if t.startswith("deep")]
assert len(deep) == 50000, len(deep)
depth = max(int(g.getAttribute("data-d")) for g in svg.getElementsByTagName("g"))
assert depth >= 50000, depth
html = open("deep.html", encoding="utf-8").read()
assert len(re.findall(r'<g class="f"', html)) == len(titles), "html flamegraph differs"
print(f"svg: {len(titles)} frames drawn, {len(deep)} of the deep stack, depth {depth}")
PY
exit 0
