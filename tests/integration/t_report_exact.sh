#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_report_exact.sh - at --rate 1 (nothing lost) every execution has its
# stack, so the site figures are counts: tests/progs/manyfp (each query
# from two sites, 2 and 1 executions) shows "-> 2 execs, ... [2 samples]"
# and "-> 1 exec, ... [1 sample]" with no "(est.)" and no "~" (before:
# "~2 (est.) execs" because a site's samples are not the query's count),
# and --by site says the figures are exact. At --rate 0 the sites' counts
# are exact too, from the per-caller counts (each site is its own caller),
# while --by site calls its figures estimates (not every stack was taken).
# Never "1 samples" or "1 execs".
. "$(dirname "$0")/lib.sh"
need_prog manyfp

"$SQLPROF" record -q --rate 1 -o "$TMP/p.db" -- "$PROGS/manyfp" 5 >/dev/null || fail "record failed"
"$SQLPROF" report "$TMP/p.db" >"$TMP/r.txt" || fail "report failed"
"$SQLPROF" report --by site "$TMP/p.db" >"$TMP/s.txt" || fail "report --by site failed"
grep -A2 'AS c0$' "$TMP/r.txt" | sed 's/^/    /'
head -1 "$TMP/s.txt" | sed 's/^/    /'
! grep -q '(est\.)\|-> ~' "$TMP/r.txt" || fail "--rate 1: figures marked as estimates: $(grep -m1 'est\.' "$TMP/r.txt")"
grep -q '^ *-> 2 execs, [0-9.]* [mun]*s at site_a (manyfp.c:[0-9]*) \[2 samples\]$' "$TMP/r.txt" ||
	fail "no exact '-> 2 execs ... [2 samples]' line for site_a"
grep -q '^ *-> 1 exec, [0-9.]* [mun]*s at site_b (manyfp.c:[0-9]*) \[1 sample\]$' "$TMP/r.txt" ||
	fail "no exact '-> 1 exec ... [1 sample]' line for site_b"
grep -q '^# by site; counts and times are exact' "$TMP/s.txt" || fail "--by site: $(head -1 "$TMP/s.txt")"
! grep -q ' 1 samples\| 1 execs\| 1 queries' "$TMP/r.txt" "$TMP/s.txt" || fail "a plural for one"

"$SQLPROF" record -q --rate 0 -o "$TMP/z.db" -- "$PROGS/manyfp" 5 >/dev/null || fail "record --rate 0 failed"
"$SQLPROF" report "$TMP/z.db" >"$TMP/z.txt" || fail "report failed"
grep -q -- '-> 2 execs, ' "$TMP/z.txt" || fail "--rate 0: the per-caller counts are not exact: $(grep -- '->' "$TMP/z.txt" | head -3)"
grep -q '^# by site; counts and times are estimates' <("$SQLPROF" report --by site "$TMP/z.db") ||
	fail "--rate 0 --by site: not marked as estimates"
exit 0
