#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_guest_aslimit.sh - issue 23 item 5: under an address-space limit
# (ulimit -v 1000000, ~976 MiB) a program that mallocs and touches 600 MiB
# of its own and then runs 1000 queries (tests/progs/bigalloc) runs as
# without sqlprof - same output, exit 0 - and every execution is counted
# (before: the preload's 512 MiB statistics mapping made the program's
# malloc fail, exit 3); record says the statistics were kept small.
. "$(dirname "$0")/lib.sh"
need_prog bigalloc
want=$( (ulimit -v 1000000; "$PROGS/bigalloc" 600 1000) ) || skip "bigalloc fails even without sqlprof here"
(ulimit -v 1000000; LD_PRELOAD="$BUILD/lib/libsqlprof.so" SQLPROF_SOCK="$TMP/none/sock" "$PROGS/bigalloc" 600 1000) \
	>"$TMP/pre.out" 2>"$TMP/pre.err" || fail "under the preload alone bigalloc exited $?: $(cat "$TMP/pre.err")"
[ "$(cat "$TMP/pre.out")" = "$want" ] || fail "output changed under the preload"
# record itself runs outside the limit; the program under it
"$SQLPROF" record -o "$TMP/p.db" -- bash -c 'ulimit -v 1000000; exec "$0" 600 1000' "$PROGS/bigalloc" \
	>"$TMP/rec.out" 2>"$TMP/rec.err" || fail "record: bigalloc exited $?: $(cat "$TMP/rec.err")"
[ "$(cat "$TMP/rec.out")" = "$want" ] || fail "output changed under record"
grep -q 'address-space limit' "$TMP/rec.err" || fail "record did not say the statistics were kept small: $(cat "$TMP/rec.err")"
report_json "$TMP/p.db" "$TMP/p.json"
expect "$TMP/p.json" -t executions=1000
echo "600 MiB under ulimit -v 1000000: exit 0, 1000 executions"
