#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_soak.sh - issue 24, item 5, scaled down (make bench runs the
# 10-minute soak): a service making 1,000 new SQL texts a second
# (tests/progs/soak) and 2 short processes a second under one agent with
# --metrics, --interval 1 and --max-texts 2000, for 15 s
# (scripts/agent_soak.py, under ulimit -v and the runner's timeout). The
# profile holds exactly what the processes ran (totals exact through the
# folding), keeps at most 2,000 texts plus one fold per fingerprint, says
# how many it folded, every scrape answered; the agent's own memory
# (RssAnon, the median of its last three samples against that of the
# first three after the 5th second: scrapes and merges make transient
# peaks) grows by less than 8 MiB (the agent still keeps every text, about
# 320 B each: 3.2 MB for 10,000; before the texts budget the profile held
# all 15,000 too). No wall time is asserted.
. "$(dirname "$0")/lib.sh"
need_prog soak
need_prog service
ldd "$SQLPROF" 2>/dev/null | grep -q libasan || ulimit -v 4000000
out=$TMP/soak.json
"$PYTHON" "$ITDIR/../../scripts/agent_soak.py" --build "$BUILD" --seconds 15 --rate 1000 \
	--procs 2 --interval 1 --scrape-every 1 --warmup 5 --rss-growth-kb 8192 \
	--agent-args "--max-texts 2000" --keep "$TMP/soak.db" --check >"$out" ||
	fail "agent_soak: $(cat "$out")"
"$PYTHON" - "$out" <<'EOF' || fail "soak figures"
import json, sys
d = json.load(open(sys.argv[1]))
print("ran %d, profiled %d; agent RssAnon max %d KiB, grown %d KiB after 5 s; %d scrapes, %d failed"
      % (d["ran"], d["profiled"], d["rss_anon_max_kb"], d["rss_after_warmup_growth_kb"],
         len(d["scrape_s"]), d["scrape_failures"]))
assert d["ran"] == d["profiled"], (d["ran"], d["profiled"])
assert d["ran"] > 2000
assert d["scrape_failures"] == 0
assert len(d["scrape_s"]) >= 5
EOF
command -v sqlite3 >/dev/null || skip "no sqlite3 shell for the profile's tables (the totals were checked)"
texts=$(sqlite3 "$TMP/soak.db" "SELECT count(*) FROM statements")
folded=$(sqlite3 "$TMP/soak.db" "SELECT value FROM meta WHERE key = 'agent_texts_folded'")
echo "profile: $texts texts kept, $folded folded"
[ "$texts" -le $((2000 + 60)) ] || fail "the profile keeps $texts texts (--max-texts 2000)"
[ "${folded:-0}" -gt 0 ] || fail "meta agent_texts_folded is '$folded'"
exit 0
