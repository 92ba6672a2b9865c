#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_first.sh - the executions sampled whatever the rate, at --rate 0:
# the first execution of each distinct SQL text in each process (so every
# query, sqlite3_exec calls included, has at least one call site) and every
# failed execution.  Per query of the attribution fixture, exactly the
# expected number of samples ("forced" in tests/fixtures/attr/expected.tsv)
# at each of its sites, and no other site. Slow executions are sampled
# too (SQLPROF_SLOW_MS, 100 ms): the test turns that off (--slow-ms 0), or
# an execution that a loaded machine kept off the CPU for 100 ms would
# count a sample more (hot_a: 2 of 1 beside stress.sh 8 at load 19).
. "$(dirname "$0")/lib.sh"
. "$ITDIR/../fixtures/attr/fixture.sh"

attr_record "$TMP/p.db" --rate 0 --slow-ms 0 --seed 1 -- "$FIX/attr_main"
report_json "$TMP/p.db" "$TMP/r.json"
"${CHECK[@]}" sites forced "$TMP/r.json" "$FIX/markers.txt" "$FIXSRC/expected.tsv" --table
