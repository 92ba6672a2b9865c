#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_export_html.sh - the HTML report and the SVG flamegraph in headless
# Chromium. For the fixture profile the page's script must run to the end
# (it sets <body data-ok="N"> with N table rows; window.onerror would set
# data-error), the table must have 6 rows, and a screenshot must be made;
# for the hostile fixture (hostile.sql) nothing from the profile may run
# (its payloads would set data-pwned="1"). Skips when chromium is absent
# (Debian: apt-get install chromium).
. "$(dirname "$0")/lib.sh"

CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$CHROMIUM" ] || skip "chromium not installed (apt-get install chromium)"
command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
GOLD=$ITDIR/../golden/export
cd "$TMP" || exit 1
SQLPROF=$SQLPROF "$GOLD/mkfixture.sh" f.db || fail "mkfixture.sh failed"
SQLPROF=$SQLPROF "$GOLD/mkfixture.sh" h.db "$GOLD/hostile.sql" || fail "mkfixture.sh failed"
for p in f h; do
	"$SQLPROF" export -f html -o "$p.html" "$p.db" || fail "export html $p"
	"$SQLPROF" export -f svg -o "$p.svg" "$p.db" || fail "export svg $p"
done

for p in f h; do
	chrome --virtual-time-budget=3000 --dump-dom "file://$TMP/$p.html" >"$p.dom" ||
		fail "chromium --dump-dom $p.html failed: $(tail -n 3 chrome.log)"
	chrome --virtual-time-budget=3000 --dump-dom "file://$TMP/$p.svg" >"$p.svg.dom" ||
		fail "chromium --dump-dom $p.svg failed"
done
grep -q 'data-error=' f.dom && fail "JavaScript error: $(grep -o 'data-error="[^"]*"' f.dom)"
grep -q '<body[^>]*data-ok="6"' f.dom || fail "page script did not finish with 6 rows: $(grep -o '<body[^>]*>' f.dom)"
[ "$(grep -c '<tr><td data-v=' f.dom)" = 6 ] || fail "query table does not have 6 rows"
grep -q '<g class="f"' f.svg.dom || fail "svg has no frames"
grep -q 'data-pwned="1"' h.dom h.svg.dom && fail "hostile text ran in the page"
grep -q 'data-error=' h.dom && fail "JavaScript error on the hostile page"
grep -q '<body[^>]*data-ok="6"' h.dom || fail "hostile page script did not finish"
chrome --window-size=1280,1000 --screenshot="$TMP/f.png" "file://$TMP/f.html" >/dev/null ||
	fail "screenshot failed"
[ -s f.png ] || fail "empty screenshot"
echo "chromium: $("$CHROMIUM" --version 2>/dev/null | head -n 1); page ok, 6 rows, screenshot $(wc -c <f.png) bytes"
exit 0
