#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_clock_paths.sh - issue 25, acceptance 7: the inline path on the TSC
# (SQLPROF_CLOCK=tsc), the inline path on the monotonic clock
# (SQLPROF_CLOCK=monotonic, step_mono) and the general path
# (SQLPROF_INLINE=0: every step through step_general) give identical
# totals on the integration fixtures: every query's count, rows, errors,
# nested executions, prepares and SQLite's counters, at --rate 0 and
# --rate 1. The profile's meta "clock" shows each run used the clock it
# was given, and no time was clamped.
. "$(dirname "$0")/lib.sh"
cases=(
	"counts" "trivial 5000" "nested_steps" "handoff 500" "seg_counters" "exec_deep"
	"exec_abort" "gate_app clean" "memo_sites" "exact_threads 4 5000 10" "manyfp 100"
)
cat >"$TMP/tot.py" <<'EOF_PY'
import json, sys
d = json.load(open(sys.argv[1]))
keys = ("count", "rows", "errors", "nested", "prepares", "vm_steps", "fullscan_steps", "sorts", "autoindex")
out = []
for q in d["queries"]:
    # a text lost on the way (issue 24 item 3, a loaded machine) names no
    # query: its figures are still compared, by kind
    sql = "" if q["sql"] == "<sql text lost>" or sys.argv[2:] == ["notext"] else q["sql"]
    out.append("%s|%s|%s" % (q["kind"], sql, "|".join(str(q.get(k)) for k in keys)))
out.sort()
print("executions %s clamped %s" % (d["executions"], d.get("clock_clamped")))
print("\n".join(out))
EOF_PY
n=0
for c in "${cases[@]}"; do
	read -r prog args <<<"$c"
	[ -x "$PROGS/$prog" ] || fail "$PROGS/$prog not built"
	(cd "$TMP" && timeout 120 "$PROGS/$prog" $args >/dev/null 2>&1)
	want_rc=$?
	for rate in 0 1; do
		for clk in tsc monotonic general; do
			inl=1 want=$clk
			[ "$clk" = general ] && inl=0 want=tsc
			(cd "$TMP" && SQLPROF_CLOCK=$want SQLPROF_INLINE=$inl timeout 120 "$SQLPROF" record -q --rate $rate \
				-o "$TMP/$prog.$rate.$clk.db" -- "$PROGS/$prog" $args >/dev/null 2>"$TMP/err")
			rc=$?
			[ "$rc" = "$want_rc" ] || fail "$prog under $clk exited $rc, $want_rc without: $(tail -3 "$TMP/err")"
			got=$(sqlite3 "$TMP/$prog.$rate.$clk.db" "SELECT value FROM meta WHERE key='clock'")
			[ "$got" = "$want" ] || fail "$prog: SQLPROF_CLOCK=$want ran on clock '$got'"
			report_json "$TMP/$prog.$rate.$clk.db" "$TMP/$prog.$rate.$clk.json"
			"$PYTHON" "$TMP/tot.py" "$TMP/$prog.$rate.$clk.json" >"$TMP/$prog.$rate.$clk.tot"
		done
		if grep -q '^[a-z]*||' "$TMP/$prog.$rate".{tsc,monotonic,general}.tot; then
			echo "note: $prog --rate $rate: an SQL text was lost; compared without texts"
			for clk in tsc monotonic general; do
				"$PYTHON" "$TMP/tot.py" "$TMP/$prog.$rate.$clk.json" notext >"$TMP/$prog.$rate.$clk.tot"
			done
		fi
		same_file "$prog --rate $rate totals, tsc vs monotonic" "$TMP/$prog.$rate.monotonic.tot" \
			"$TMP/$prog.$rate.tsc.tot"
		same_file "$prog --rate $rate totals, inline vs general" "$TMP/$prog.$rate.general.tot" \
			"$TMP/$prog.$rate.tsc.tot"
		grep -q '^executions [1-9][0-9]* clamped 0$' "$TMP/$prog.$rate.tsc.tot" ||
			fail "$prog: $(head -1 "$TMP/$prog.$rate.tsc.tot")"
		n=$((n + 1))
	done
done
echo "$n fixture runs: identical totals on the three paths"
