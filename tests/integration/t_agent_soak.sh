#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_agent_soak.sh - issue 24, item 5, scaled down (make bench runs the
# 10-minute soak): a service making 1,000 new SQL texts a second
# (tests/progs/soak, SQLPROF_TEXTS_PER_SHAPE=0: every text reaches the
# agent) and 2 short processes a second under one agent with
# --metrics, --interval 1, --max-texts 2000 and --max-processes 10, for 15 s
# (scripts/agent_soak.py, under ulimit -v and the runner's timeout). The
# profile holds exactly what the processes ran (totals exact through the
# folding), keeps at most 2,000 texts plus one fold per fingerprint, says
# how many it folded, has no totals under an unknown text, every scrape
# answered and the executions /metrics counts never went down (a
# snapshot's copy of the service's growing statistics was refused whole,
# its totals missing: both failed); the agent's own memory
# (RssAnon, the median of its last three samples against that of the
# first three after the 5th second: scrapes and merges make transient
# peaks) grows by less than 8 MiB (the agent folds its own texts beyond
# --max-texts too, remembering 16 bytes a folded text while the service
# holds records of it; before, it kept every text, about 180 B each). No
# wall time is asserted.
. "$(dirname "$0")/lib.sh"
need_prog soak
need_prog service
ldd "$SQLPROF" 2>/dev/null | grep -q libasan || ulimit -v 4000000
out=$TMP/soak.json
"$PYTHON" "$ITDIR/../../scripts/agent_soak.py" --build "$BUILD" --seconds 15 --rate 1000 \
	--procs 2 --interval 1 --scrape-every 1 --warmup 5 --rss-growth-kb 8192 \
	--agent-args "--max-texts 2000 --max-processes 10" --keep "$TMP/soak.db" --check >"$out" ||
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
ex = d["scrape_executions"]
assert all(ex[i] >= ex[i - 1] for i in range(1, len(ex))), ex
EOF
command -v sqlite3 >/dev/null || skip "no sqlite3 shell for the profile's tables (the totals were checked)"
texts=$(sqlite3 "$TMP/soak.db" "SELECT count(*) FROM statements")
folded=$(sqlite3 "$TMP/soak.db" "SELECT value FROM meta WHERE key = 'agent_texts_folded'")
echo "profile: $texts texts kept, $folded folded"
[ "$texts" -le $((2000 + 60)) ] || fail "the profile keeps $texts texts (--max-texts 2000)"
[ "${folded:-0}" -gt 0 ] || fail "meta agent_texts_folded is '$folded'"
# the processes budget: at most 10 rows (and 11 more between two folds),
# the others in the row of pid 0, the report counting them all (a loaded
# machine may start too few processes to fold any: not checked then)
rows=$(sqlite3 "$TMP/soak.db" "SELECT count(*) FROM processes")
pfolded=$(sqlite3 "$TMP/soak.db" "SELECT value FROM meta WHERE key = 'agent_processes_folded'")
nproc=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["processes"])' "$out")
echo "processes: $rows rows, $pfolded folded, $nproc ran"
[ "$rows" -le 22 ] || fail "the profile keeps $rows process rows (--max-processes 10)"
[ "$nproc" -le 12 ] || [ "${pfolded:-0}" -gt 0 ] || fail "meta agent_processes_folded is '$pfolded'"
"$SQLPROF" report "$TMP/soak.db" | head -1 | grep -q " in $nproc processes" ||
	fail "report's header: $("$SQLPROF" report "$TMP/soak.db" | head -1), $nproc processes ran"
# the folded processes keep where their queries ran (their stacks in the
# row's own module map, proc-fold.c): every execution of the service's
# query attributed to service.c, none left without a site (before, a
# folded process's callers lost their address: unattributed)
"$SQLPROF" report --format json "$TMP/soak.db" >"$TMP/soak-report.json" || fail "report --format json"
"$PYTHON" - "$TMP/soak-report.json" "$pfolded" <<'EOF2' || fail "the folded processes' sites"
import json, sys
d = json.load(open(sys.argv[1]))
# the query under its text, or under its fingerprint's fold (the texts
# budget folds it when no service process brought it for a while: on a
# loaded machine, part or all of it)
q = [q for q in d["queries"] if q["sql"] in ("SELECT ?1 + 1", "SELECT ? + ?")]
assert q, [x["sql"] for x in d["queries"]][:5]
n = sum(x["count"] for x in q)
on = sum(s["est_count"] for x in q for s in x["sites"]
         if (s["file"] or "").endswith("service.c"))
print("service's query: %d executions (%d record%s), %d at service.c, %s processes folded"
      % (n, len(q), "" if len(q) == 1 else "s", on, sys.argv[2]))
assert on == n, [x["sites"] for x in q]
EOF2
# every text's totals under a text or its fold: none under an unknown id
# (a folded text whose process's records went uncounted in snapshots: a
# snapshot's copy of a growing service's statistics was refused whole)
lost=$(sqlite3 "$TMP/soak.db" "SELECT count(*) FROM agent_queries WHERE sql_id NOT IN
	(SELECT sql_id FROM statements)")
[ "$lost" = 0 ] || fail "$lost rows of agent_queries have no text"
# the sampled executions kept one by one wait in the agent's spill file
# (agent_spill), where folds rename them too: every event under a text
# the profile has (a folded text's under its fold), and an event of a
# process folded into the row of pid 0 without its own stack (that
# process's addresses are gone with its map)
ev=$(sqlite3 "$TMP/soak.db" "SELECT count(*) FROM events")
nofold=$(sqlite3 "$TMP/soak.db" "SELECT count(*) FROM events WHERE sql_id NOT IN
	(SELECT sql_id FROM statements)")
nostack=$(sqlite3 "$TMP/soak.db" "SELECT count(*) FROM events WHERE stack_id != 0 AND
	pid NOT IN (SELECT pid FROM processes)")
echo "events: $ev kept, $nofold without a text, $nostack of gone processes with a stack"
[ "$ev" -gt 0 ] || fail "no sampled execution in the profile"
[ "$nofold" = 0 ] || fail "$nofold events name a text the profile does not have"
[ "$nostack" = 0 ] || fail "$nostack events of folded processes keep a stack"
exit 0
