#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_record_tty.sh - record never draws over what its command writes to
# the terminal: in a tmux pane, (1) the interactive sqlite3 shell under
# record: every prompt and every result line is as without sqlprof (before:
# a live counter "\rsqlprof: N executions ..." overwrote "sqlite>" on
# every line and came out in front of results: "sqlprof: 0 executions ...
# line 1|1"); (2) a program printing while it runs (longrun-style: the
# shell printing 20 numbered lines, one every 50 ms, each after a query):
# all 20 lines intact. The summary comes after the command's output.
. "$(dirname "$0")/lib.sh"
command -v tmux >/dev/null || skip "tmux not installed"
command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
cd "$TMP" || exit 1
export TMUX_TMPDIR=$TMP
sock=tmux.sock
t() { tmux -S "$sock" "$@"; }
trap 't kill-server 2>/dev/null; rm -rf "$TMP"' EXIT
# the server in the foreground, in the background (-D: no daemon(3),
# which needs a /dev/null character device and a controlling session)
tmux -S "$sock" -D >/dev/null 2>&1 </dev/null &
for _ in $(seq 1 50); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || skip "the tmux server did not start"
capture() { t capture-pane -p -t s -S - -E - | sed 's/[[:space:]]*$//' | sed '/^$/d'; }
wait_for() { # text: wait until the pane shows it
	for _ in $(seq 1 100); do capture | grep -qF -- "$1" && return 0; sleep 0.1; done
	fail "the pane never showed '$1': $(capture)"
}

# (1) the interactive shell
t new-session -d -s s -x 150 -y 40 "$SQLPROF record -o p.db -- sqlite3 -interactive :memory:; sleep 30"
wait_for 'sqlite>'
for q in "select 1;" "select 2 + 3;" "create table t(x);" "insert into t values (7);" "select x from t;"; do
	t send-keys -t s -l -- "${q//;/\\;}" # tmux ends a command at a trailing ;
	t send-keys -t s Enter
	sleep 0.4
done
t send-keys -t s -l -- ".quit"
t send-keys -t s Enter
wait_for 'profile in p.db'
capture >pane1.txt
cat pane1.txt
for want in "sqlite> select 1;" "sqlite> select 2 + 3;" "sqlite> create table t(x);" \
	"sqlite> insert into t values (7);" "sqlite> select x from t;" "sqlite> .quit"; do
	grep -qxF -- "$want" pane1.txt || fail "the prompt line '$want' is not intact"
done
for want in 1 5 7; do
	grep -qx -- "$want" pane1.txt || fail "the result line '$want' is not intact"
done
n=$(grep -c "sqlprof" pane1.txt)
[ "$n" = 1 ] && tail -n 1 pane1.txt | grep -q "^sqlprof: .*profile in p.db" ||
	fail "sqlprof wrote $n lines in the pane; only the summary, last, is expected"
t kill-session -t s

# (2) a program printing while it runs
cat >prog.sh <<'EOS'
for i in $(seq 1 20); do
	sqlite3 :memory: "select $i * 2;" >/dev/null
	echo "line $i of the program"
	sleep 0.05
done
EOS
t new-session -d -s s -x 150 -y 40 "$SQLPROF record -o q.db -- sh prog.sh; sleep 30"
wait_for 'profile in q.db'
capture >pane2.txt
for i in $(seq 1 20); do
	grep -qx "line $i of the program" pane2.txt || fail "program line $i is not intact: $(cat pane2.txt)"
done
[ "$(grep -c sqlprof pane2.txt)" = 1 ] || fail "more than the summary from sqlprof: $(cat pane2.txt)"
echo "interactive shell: prompts and results intact; 20 program lines intact; one summary line each"
