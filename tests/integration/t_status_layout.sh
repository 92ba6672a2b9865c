#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_status_layout.sh - SQLite's statement counters read from memory are
# SQLite's own: the same program recorded with the offset sqlprof record
# hands over (SQLPROF_STATUS_LAYOUT), with a layout naming another file
# (ignored: the process probes for itself), and through the API
# (SQLPROF_STATUS=api) gives the same VM steps, full-scan steps, sorts and
# automatic-index rows for every query.
. "$(dirname "$0")/lib.sh"
need_prog gate_app

counters() { # PROFILE -> one line per query
	sqlite3 "$1" "SELECT kind, fingerprint, count, vm_steps, fullscan_steps, sorts, autoindex
		FROM queries ORDER BY kind, fingerprint" || fail "cannot read $1"
}
"$SQLPROF" record -q --rate 0 -o "$TMP/mem.db" -- "$PROGS/gate_app" clean >/dev/null 2>"$TMP/err" ||
	fail "record failed: $(cat "$TMP/err")"
SQLPROF_STATUS=api "$SQLPROF" record -q --rate 0 -o "$TMP/api.db" -- "$PROGS/gate_app" clean \
	>/dev/null 2>"$TMP/err" || fail "record (api) failed: $(cat "$TMP/err")"
# a layout for a file that is not this libsqlite3: record sets its own, so
# give the program one by hand through a wrapper that overrides it
cat >"$TMP/wrong.sh" <<EOS
SQLPROF_STATUS_LAYOUT=4:1:1 exec "$PROGS/gate_app" clean
EOS
"$SQLPROF" record -q --rate 0 -o "$TMP/wrong.db" -- sh "$TMP/wrong.sh" >/dev/null 2>"$TMP/err" ||
	fail "record (wrong layout) failed: $(cat "$TMP/err")"
counters "$TMP/mem.db" >"$TMP/mem.txt"
counters "$TMP/api.db" >"$TMP/api.txt"
counters "$TMP/wrong.db" >"$TMP/wrong.txt"
[ -s "$TMP/mem.txt" ] || fail "no queries recorded"
awk -F'|' '$4 > 0' "$TMP/mem.txt" | grep -q . || fail "no VM steps counted at all"
same_file "counters read from memory vs through the API" "$TMP/api.txt" "$TMP/mem.txt"
same_file "counters with a layout for another file vs through the API" "$TMP/api.txt" "$TMP/wrong.txt"
echo "$(wc -l <"$TMP/mem.txt") queries: counters identical from memory (handed-over layout, own probe) and the API"
exit 0
