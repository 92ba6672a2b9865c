#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_record_sigstate.sh - every run of `record --repeat` starts its command
# with the signal state record itself inherited, as the first run does
# and as the command would without sqlprof. record is started (by python3)
# with SIGHUP, SIGINT, SIGQUIT, SIGTERM and SIGCHLD ignored, SIGPIPE at its
# default and SIGUSR1 blocked; each of 3 runs of a bash command reports
# `yes | head -n 1`'s status (141: yes killed by SIGPIPE; before, runs 2
# and 3 got 1 and "Broken pipe" on stderr, record having ignored SIGPIPE)
# and then tests/progs/sigstate prints its ignored and blocked signals.
# All three runs must print what the command prints without sqlprof.
# Also: record started with SIGPIPE ignored passes that on to every run.
. "$(dirname "$0")/lib.sh"
need_prog sigstate
cd "$TMP" || exit 1

cmd="yes | head -n 1 >/dev/null; echo \"yes \${PIPESTATUS[0]}\"; exec \"$PROGS/sigstate\" show"

# launch PIPE OUT CMD...: exec CMD with the state described above, SIGPIPE
# at PIPE (dfl or ign); stdout to OUT, stderr to OUT.err.
launch() {
	local pipe=$1 out=$2
	shift 2
	"$PYTHON" - "$pipe" "$out" "$@" <<'PY'
import os, signal, sys
pipe, out, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
for s in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGCHLD):
    signal.signal(s, signal.SIG_IGN)
signal.signal(signal.SIGPIPE, signal.SIG_IGN if pipe == "ign" else signal.SIG_DFL)
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
signal.pthread_sigmask(signal.SIG_SETMASK, {signal.SIGUSR1})
fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.dup2(fd, 1)
fd = os.open(out + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.dup2(fd, 2)
os.execvp(cmd[0], cmd)
PY
}

for pipe in dfl ign; do
	launch $pipe bare.$pipe bash -c "$cmd" || fail "$pipe: the command alone failed: $(cat bare.$pipe.err)"
	# what it prints without sqlprof, three times
	for i in 1 2 3; do cat bare.$pipe; done >want.$pipe
	launch $pipe rec.$pipe "$SQLPROF" record -q -o rec.$pipe.db --repeat 3 -- bash -c "$cmd" ||
		fail "$pipe: record exited $?: $(cat rec.$pipe.err)"
	echo "$pipe: without sqlprof: $(tr '\n' ' ' <bare.$pipe)"
	same_file "$pipe: the state of the 3 runs" want.$pipe rec.$pipe
	if [ $pipe = dfl ] && grep -q "Broken pipe" rec.$pipe.err; then
		fail "$pipe: 'Broken pipe' on stderr: $(cat rec.$pipe.err)"
	fi
	report_json rec.$pipe.db rec.$pipe.json
	expect rec.$pipe.json -q stmt 'SELECT ? * ?' count=3
	echo "ok: $pipe: 3 runs: $(tr '\n' ' ' <rec.$pipe)"
done
grep -q "yes 141" want.dfl || fail "yes was not killed by SIGPIPE even without sqlprof: $(cat want.dfl)"
exit 0
