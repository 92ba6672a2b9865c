#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_exact_live_stmts.sh - issue 24 item 1: every execution counted whatever
# the number of live statements. tests/progs/roundrobin keeps 70,000
# distinct statements prepared and steps each 3 times in turn (210,000
# executions), then 3 statements in turn beside 70,000 idle live ones:
# every execution counted, with its row, none untracked (before: past
# 65,536 live statements executions were not counted at all, and their
# steps counted as "untracked").
. "$(dirname "$0")/lib.sh"
need_prog roundrobin
# (not for a sanitized build: ASan reserves its shadow first)
ldd "$SQLPROF" 2>/dev/null | grep -q libasan || ulimit -v 4000000
want=$("$PROGS/roundrobin" 210000 70000) || fail "roundrobin failed"
out=$("$SQLPROF" record -q --rate 0 -o "$TMP/a.db" -- "$PROGS/roundrobin" 210000 70000) ||
	fail "record roundrobin exited $?"
[ "$out" = "$want" ] || fail "output changed: $out vs $want"
report_json "$TMP/a.db" "$TMP/a.json"
expect "$TMP/a.json" -t executions=210000 untracked=0
out=$("$SQLPROF" record -q --rate 0.01 -o "$TMP/b.db" -- "$PROGS/roundrobin" 30000 3 70000) ||
	fail "record roundrobin (idle statements) exited $?"
report_json "$TMP/b.db" "$TMP/b.json"
expect "$TMP/b.json" -t executions=30000 untracked=0
"$PYTHON" - "$TMP/a.json" "$TMP/b.json" <<'EOF_PY' || exit 1
import json, sys
for f, n in zip(sys.argv[1:], (210000, 30000)):
    d = json.load(open(f))
    c = sum(q["count"] for q in d["queries"])
    r = sum(q["rows"] for q in d["queries"])
    if c != n or r != n:
        sys.exit("FAIL: %s: %d executions, %d rows, want %d" % (f, c, r, n))
    print("%s: %d executions, %d rows" % (f.rsplit("/", 1)[1], c, r))
EOF_PY
exit 0
