#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_exit_quiet.sh - issue 23 item 10: a process that exits well without
# its goodbye is not called dead. tests/progs/exit_quiet runs 300
# executions, then ends by syscall(SYS_exit_group, 0) (as every Go
# program), under a seccomp filter that keeps the goodbye in (socket calls
# and open fail with EPERM), under one that sends it to a file (socket
# calls only), after setuid(nobody) and after chroot (root): each exact
# (300), exit 0, a clean exit in the profile and no "ended without
# exiting" (before: raw and seccomp were reported as "ended without
# exiting (a signal or a crash)" next to exit status 0). The same one
# level down (under sh, record's waitpid does not see it: the pidfd does,
# Linux 6.15+). A segfault is still a death, at both levels.
. "$(dirname "$0")/lib.sh"
need_prog exit_quiet
cd "$TMP" || exit 1
ulimit -c 0

modes="raw seccomp nosend"
[ "$(id -u)" = 0 ] && modes="$modes setuid chroot"
[ "$(id -u)" = 0 ] || echo "not root: setuid and chroot not tried"
mkdir -m 755 jail
check_clean() { # NAME ERRFILE DB
	grep -q "ended without exiting" "$2" && fail "$1: called dead: $(cat "$2")"
	"$SQLPROF" report "$3" | grep -q "^# died" && fail "$1: the report names a death"
	r=$(sqlite3 "$3" "SELECT executions, clean_exit FROM processes WHERE exe LIKE '%exit_quiet'")
	[ "$r" = "300|1" ] || fail "$1: executions|clean_exit $r, not 300|1: $(cat "$2")"
	echo "$1: $r"
}
for m in $modes; do
	arg=
	[ "$m" = chroot ] && arg=$TMP/jail
	"$SQLPROF" record -o $m.db -- "$PROGS/exit_quiet" $m $arg >$m.out 2>$m.err
	rc=$?
	[ "$rc" = 0 ] || fail "$m: record exited $rc: $(cat $m.err)"
	[ "$(cat $m.out)" = 44850 ] || fail "$m: output $(cat $m.out)"
	check_clean "$m" $m.err $m.db
done

# one level down: sh waits for it, record does not see its status
pidfd_info=0
kv=$(uname -r | awk -F'[.-]' '{ print $1 * 1000 + $2 }')
[ "$kv" -ge 6015 ] && pidfd_info=1
for m in raw seccomp; do
	"$SQLPROF" record -o sh$m.db -- sh -c "'$PROGS/exit_quiet' $m; exit 0" >sh$m.out 2>sh$m.err ||
		fail "sh $m: record exited $?: $(cat sh$m.err)"
	if [ $pidfd_info = 1 ]; then
		check_clean "sh -c $m" sh$m.err sh$m.db
	else
		not_checked "sh -c $m: kernel $(uname -r) has no PIDFD_GET_INFO (6.15) to tell a grandchild's exit"
	fi
done

# a real death is still one, at both levels
"$SQLPROF" record -o segv.db -- "$PROGS/exit_quiet" segv >/dev/null 2>segv.err
[ $? = 139 ] || fail "segv: record did not exit 139: $(cat segv.err)"
grep -q "exit_quiet) ended without exiting" segv.err || fail "segv: no death said: $(cat segv.err)"
"$SQLPROF" record -o shsegv.db -- sh -c "'$PROGS/exit_quiet' segv; exit 0" >/dev/null 2>shsegv.err
grep -q "exit_quiet) ended without exiting" shsegv.err || fail "sh -c segv: no death said: $(cat shsegv.err)"
[ "$(sqlite3 shsegv.db "SELECT executions, clean_exit FROM processes WHERE exe LIKE '%exit_quiet'")" = "300|0" ] ||
	fail "sh -c segv: not 300 executions without a clean exit"
echo "segv: a death, directly and one level down"
exit 0
