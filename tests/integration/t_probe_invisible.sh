#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_probe_invisible.sh - the counter probe's private connection is
# invisible to the program (tests/progs/autoext.c registers an automatic
# extension, opens one connection and counts the extension's calls).
# Whenever the process probes for itself - a layout handed over for
# another file, or none at all - the extension runs once, on the program's
# connection, as without sqlprof (twice before: the probe's open ran it
# too); the counters are still read from memory and equal the API's.
. "$(dirname "$0")/lib.sh"
need_prog autoext
"$PROGS/autoext" >"$TMP/plain.out" 2>&1 || fail "autoext without sqlprof failed"
grep -q "called 1 time" "$TMP/plain.out" || fail "autoext without sqlprof: $(cat "$TMP/plain.out")"
SQLPROF_STATUS=api "$SQLPROF" record -q --rate 0 -o "$TMP/api.db" -- "$PROGS/autoext" >/dev/null 2>&1 ||
	fail "record (api) failed"
api=$(sqlite3 "$TMP/api.db" "SELECT count, vm_steps FROM queries WHERE fingerprint = 'SELECT ? * ?'")
[ -n "$api" ] || fail "the query is missing from the API run's profile"
for how in handed-over other-file none; do
	case $how in
	handed-over) pre= ;;
	other-file) pre="SQLPROF_STATUS_LAYOUT=4:1:1" ;;
	none) pre="unset SQLPROF_STATUS_LAYOUT;" ;;
	esac
	echo "$pre exec \"$PROGS/autoext\"" >"$TMP/run.sh"
	"$SQLPROF" record -q --rate 0 -o "$TMP/$how.db" -- sh "$TMP/run.sh" >"$TMP/$how.out" 2>"$TMP/err" ||
		fail "record ($how) failed: $(cat "$TMP/err")"
	echo "layout $how: $(cat "$TMP/$how.out")"
	same_file "autoext output (layout $how)" "$TMP/plain.out" "$TMP/$how.out"
	got=$(sqlite3 "$TMP/$how.db" "SELECT count, vm_steps FROM queries WHERE fingerprint = 'SELECT ? * ?'")
	[ "$got" = "$api" ] || fail "layout $how: count|vm_steps $got, through the API $api"
done
exit 0
