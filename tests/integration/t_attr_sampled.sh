#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_sampled.sh - the attribution fixture at --rate 0.01 with a fixed
# --seed: every query's count is exact, every site reported is one of the
# query's real sites (function, file:line, module), nothing is
# unattributed, and the estimated count of each site with at least 10,000
# executions is within +-20 % of the truth.  The fixture's "SELECT ? AS
# hot, ?" comes from two sites, hot_a (30,000) and hot_b (10,000).  Prints
# the estimate errors.
. "$(dirname "$0")/lib.sh"
. "$ITDIR/../fixtures/attr/fixture.sh"

attr_record "$TMP/p.db" --rate 0.01 --seed 42 -- "$FIX/attr_main"
report_json "$TMP/p.db" "$TMP/r.json"
"${CHECK[@]}" sites sampled "$TMP/r.json" "$FIX/markers.txt" "$FIXSRC/expected.tsv" \
	--tolerance 0.2 --min-count 10000 --table
