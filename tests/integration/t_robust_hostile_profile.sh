#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_hostile_profile.sh - profiles are untrusted input: a real
# profile edited with the sqlite3 shell in ways no writer produces (NULL
# texts, negative and huge numbers, dangling ids, missing tables and meta
# rows) must make every report and export form exit 0 or 3 (bad input),
# or 2 for a time window on a profile without intervals, never crash
# (exit >= 128). Each case is named in the output; the fuzz
# target tests/fuzz/fuzz_profile.c explores the same space at random.
. "$(dirname "$0")/lib.sh"
need_prog counts
"$SQLPROF" record -q --rate 1 -o "$TMP/base.db" -- "$PROGS/counts" >/dev/null 2>&1
[ -s "$TMP/base.db" ] || fail "cannot record counts"
errors=0

forms=("report" "report --format json" "report --format csv" "report --by site --stacks"
	"report --by function --format json" "report --by site --format csv" "report -w 0 --plans")
if "$SQLPROF" export --help >/dev/null 2>&1; then
	for f in folded svg perfetto chrome speedscope csv html; do forms+=("export -f $f"); done
fi
# time windows over the intervals: exit 2 is theirs when there are none
forms+=("report --since @0" "report --last 1h --format json" "export -f csv --intervals"
	"diff --last 1d $TMP/base.db")

# case NAME SQL: apply SQL to a copy of the profile, run every form on it.
case_() {
	local name=$1 sql=$2 rc form
	cp "$TMP/base.db" "$TMP/$name.db"
	sqlite3 "$TMP/$name.db" "$sql" 2>"$TMP/sql.err" || { echo "note: $name: $(cat "$TMP/sql.err")"; }
	for form in "${forms[@]}"; do
		# shellcheck disable=SC2086
		"$SQLPROF" $form "$TMP/$name.db" >/dev/null 2>"$TMP/err"
		rc=$?
		if [ "$rc" -eq 2 ] && [[ "$form" == *-[-][sli]* ]] && grep -q "no intervals" "$TMP/err"; then
			rc=0
		fi
		if [ "$rc" -ge 128 ] || { [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; }; then
			echo "FAIL: $name: sqlprof $form exited $rc: $(head -c 300 "$TMP/err")" >&2
			errors=$((errors + 1))
		fi
	done
	echo "case $name done"
}

case_ null_kind_samples "UPDATE stack_samples SET kind = NULL"
case_ null_kind_queries "UPDATE queries SET kind = NULL"
case_ null_texts "UPDATE queries SET fingerprint = NULL, sql = NULL; UPDATE frames SET module = NULL, function = NULL, file = NULL; UPDATE errors SET message = NULL; UPDATE processes SET exe = NULL"
case_ huge_numbers "UPDATE queries SET count = 9223372036854775807, total_ns = 9223372036854775807, self_ns = -9223372036854775808, min_ns = -1, max_ns = -5, rows = -1; UPDATE histograms SET bucket_ns = -1, count = 9223372036854775807; UPDATE stack_samples SET samples = -3, total_ns = 9223372036854775807"
case_ zero_counts "UPDATE queries SET count = 0; UPDATE stack_samples SET samples = 0, total_ns = 0"
case_ dangling_ids "UPDATE stack_samples SET fp_id = fp_id + 1, stack_id = stack_id + 1; UPDATE errors SET fp_id = 7, stack_id = 99; UPDATE frames SET idx = idx * 1000, pid = pid + 1"
case_ text_in_numbers "UPDATE queries SET count = 'many', total_ns = x'00ff', fp_id = 'abc' || rowid; UPDATE frames SET line = 'x', idx = NULL; UPDATE stack_samples SET pid = 'p', stack_id = NULL"
case_ no_frames "DROP TABLE frames"
case_ no_stack_samples "DROP TABLE stack_samples"
case_ no_histograms "DROP TABLE histograms"
case_ no_errors_events "DROP TABLE errors; DROP TABLE events"
case_ no_format "DELETE FROM meta WHERE key = 'format'"
case_ format_text "UPDATE meta SET value = 'one' WHERE key = 'format'"
case_ empty_tables "DELETE FROM queries; DELETE FROM processes; DELETE FROM frames; DELETE FROM stack_samples; DELETE FROM histograms"
case_ duplicate_frames "INSERT INTO frames SELECT pid, stack_id, idx + 100000, pc, module, function, file, line, inlined FROM frames; INSERT INTO stack_samples SELECT * FROM stack_samples"
case_ bad_buckets "UPDATE interval_queries SET buckets = '[[1,'"
case_ huge_series "UPDATE interval_queries SET count = 9223372036854775807, total_ns = -9223372036854775808, buckets = '[[-1,5],[99999999999999999999,1],[5,-9223372036854775808],[7,9223372036854775807]]'; UPDATE intervals SET end_ns = -1"
case_ text_series "UPDATE interval_queries SET buckets = x'00ff', fp_id = 'abc', count = 'many'; UPDATE intervals SET end_ns = 'late', snapshots = NULL"
case_ no_intervals "DROP TABLE intervals"
case_ view_intervals "DROP TABLE interval_queries; CREATE VIEW interval_queries AS SELECT * FROM queries"
[ "$errors" -eq 0 ] || fail "$errors form(s) crashed or exited with an undocumented code"
exit 0
