#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_errno.sh - the profiler leaves errno as it found it
# (tests/progs/robust_errno.c prints errno at the start of main, which C
# guarantees to be 0, and after prepare, step, reset, finalize and exec
# calls made with errno set to EXDEV):
#  1. with the socket unreachable (no such file; a socket nobody listens
#     on): errno 0 at main (it was 2, ENOENT, from the failed connect);
#  2. under record, and in a child forked after the collector was killed
#     (kill -9), whose first calls connect again: EXDEV after every call
#     (the child's first step returned with 111, ECONNREFUSED).
# Output identical to the run without the preload in every case.
. "$(dirname "$0")/lib.sh"
need_prog robust_errno
LIB=$BUILD/lib/libsqlprof.so

"$PROGS/robust_errno" >"$TMP/plain.out" 2>&1 || fail "robust_errno without sqlprof failed"
grep -q "start of main: 0" "$TMP/plain.out" || fail "errno is not 0 at main even without sqlprof"

# 1. No such socket.
LD_PRELOAD=$LIB SQLPROF_SOCK=$TMP/none/s "$PROGS/robust_errno" >"$TMP/nosock.out" 2>&1 ||
	fail "robust_errno with a missing socket failed"
same_file "output with a missing socket" "$TMP/plain.out" "$TMP/nosock.out"

# 2. Under record; then the collector killed, and a forked child.
cat >"$TMP/run.sh" <<EOS
"$PROGS/robust_errno" "$TMP/started" "$TMP/go" >"$TMP/rec.out" 2>&1
echo \$? >"$TMP/rc.tmp" && mv "$TMP/rc.tmp" "$TMP/rc"
EOS
TMPDIR=$TMP "$SQLPROF" record -q -o "$TMP/p.db" -- sh "$TMP/run.sh" >"$TMP/coll.out" 2>&1 &
coll=$!
wait_started "$TMP/started" "$coll" || { touch "$TMP/go"; fail "robust_errno never started under sqlprof: $(cat "$TMP/coll.out")"; }
sock=$(ls -d "$TMP"/sqlprof.*/s 2>/dev/null | head -1)
kill -9 "$coll"
wait "$coll" 2>/dev/null
touch "$TMP/go"
for _ in $(seq 1 1500); do
	[ -e "$TMP/rc" ] && break
	sleep 0.02
done
[ -e "$TMP/rc" ] || fail "robust_errno did not finish after the collector died"
[ "$(cat "$TMP/rc")" = 0 ] || fail "robust_errno exited $(cat "$TMP/rc") after the collector died"
cat "$TMP/rec.out"
"$PROGS/robust_errno" "$TMP/s2" "$TMP/go" >"$TMP/plain2.out" 2>&1
same_file "output under record with the collector killed before fork" "$TMP/plain2.out" "$TMP/rec.out"

# 1b. The dead collector's socket: a file nobody listens on (ECONNREFUSED).
if [ -n "$sock" ] && [ -S "$sock" ]; then
	LD_PRELOAD=$LIB SQLPROF_SOCK=$sock "$PROGS/robust_errno" >"$TMP/refused.out" 2>&1 ||
		fail "robust_errno with a refused socket failed"
	same_file "output with a socket nobody listens on" "$TMP/plain.out" "$TMP/refused.out"
else
	fail "the killed collector left no socket behind to connect to ($sock)"
fi
exit 0
