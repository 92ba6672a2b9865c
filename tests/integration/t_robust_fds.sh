#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_fds.sh - the preload never takes a descriptor the program would
# have got, whatever RLIMIT_NOFILE is (tests/progs/robust_unreach.c, mode
# fds LIMIT: opens /dev/null until EMFILE, prints how many and the first
# descriptor, then runs 100 executions):
#  - limit 200 and 900: the first descriptor is 3, as without sqlprof,
#    and the program gets 2 fewer (the socket and the statistics' memfd
#    at the top of the range); the 100 executions come over the socket
#    (before, at 200: first fd 5, both of ours took the lowest);
#  - limit 15, too low to leave room: the preload holds no descriptor
#    (output identical to the run without sqlprof: before, "opened 9
#    files, first fd 5" for 11 and 3); the image cannot connect, leaves
#    its totals in a file, and the profile still holds its 100 executions.
. "$(dirname "$0")/lib.sh"
need_prog robust_unreach

# LIMIT FEWER UNREPORTED
check() {
	local lim=$1 fewer=$2 unrep=$3 pn pf n f res
	"$PROGS/robust_unreach" fds "$lim" >"$TMP/plain.out" 2>&1 || fail "limit $lim: without sqlprof failed"
	read -r _ pn _ _ _ pf <<<"$(head -1 "$TMP/plain.out")"
	"$SQLPROF" record -q -o "$TMP/p$lim.db" -- "$PROGS/robust_unreach" fds "$lim" >"$TMP/out" 2>"$TMP/err" ||
		fail "limit $lim: record failed: $(cat "$TMP/err")"
	read -r _ n _ _ _ f <<<"$(head -1 "$TMP/out")"
	echo "limit $lim: opened $n files from fd $f under sqlprof, $pn from fd $pf without"
	[ "$f" = "$pf" ] || fail "limit $lim: first descriptor $f under sqlprof, $pf without"
	[ "$n" = $((pn - fewer)) ] || fail "limit $lim: $n files opened under sqlprof, expected $((pn - fewer)) ($pn without)"
	tail -n +2 "$TMP/plain.out" >"$TMP/plain.rest"
	tail -n +2 "$TMP/out" >"$TMP/rest"
	same_file "limit $lim: the rest of the output" "$TMP/plain.rest" "$TMP/rest"
	res=$(sqlite3 "$TMP/p$lim.db" "SELECT (SELECT sum(count) FROM queries WHERE fingerprint = 'SELECT ?, ?'),
		(SELECT value FROM meta WHERE key = 'unreported'),
		(SELECT value FROM meta WHERE key = 'unreported_missing')") || fail "cannot read the profile"
	[ "$res" = "100|$unrep|0" ] ||
		fail "limit $lim: executions|unreported|missing $res, expected 100|$unrep|0"
}
check 200 2 0
check 900 2 0
check 15 0 1
exit 0
