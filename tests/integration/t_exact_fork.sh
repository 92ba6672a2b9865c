#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_exact_fork.sh - an execution open at fork() is counted once, with its
# true rows: the parent reads 1 row of a 1000-row SELECT, forks, the child
# finalizes its copy and closes the connection, the parent reads the rest
# (tests/progs/exact_fork.c; the same with Python's sqlite3 module, and
# with Perl's DBD::SQLite when installed). A forked child starts with
# clean totals: only its own executions are its.
. "$(dirname "$0")/lib.sh"
need_prog exact_fork

"$SQLPROF" record -q -o "$TMP/c.db" -- "$PROGS/exact_fork" >"$TMP/c.out" 2>"$TMP/c.err" ||
	fail "exact_fork under sqlprof failed: $(cat "$TMP/c.err")"
[ "$(cat "$TMP/c.out")" = "1000 rows" ] || fail "exact_fork printed $(cat "$TMP/c.out")"
report_json "$TMP/c.db" "$TMP/c.json"
expect "$TMP/c.json" \
	-q stmt "WITH RECURSIVE c(x) AS (VALUES (?) UNION ALL SELECT x + ? FROM c WHERE x < ?) SELECT x AS open_at_fork FROM c" count=1 rows=1000 \
	-q stmt "SELECT ? AS in_child" count=5 rows=5
n=$(sqlite3 "$TMP/c.db" "SELECT executions FROM processes ORDER BY pid" | tr '\n' ' ')
echo "C: open_at_fork counted once with 1000 rows; executions per process: $n"

cat >"$TMP/fork.py" <<'EOF_PY'
import os, sqlite3
con = sqlite3.connect(":memory:")
cur = con.execute("WITH RECURSIVE c(x) AS (VALUES(1) UNION ALL SELECT x + 1 FROM c WHERE x < 1000) "
                  "SELECT x AS py_open_at_fork FROM c")
first = cur.fetchone()
pid = os.fork()
if pid == 0:
    con.close()
    os._exit(0)
os.waitpid(pid, 0)
print(1 + len(cur.fetchall()))
EOF_PY
"$SQLPROF" record -q -o "$TMP/p.db" -- "$PYTHON" "$TMP/fork.py" >"$TMP/p.out" 2>"$TMP/p.err" ||
	fail "python under sqlprof failed: $(cat "$TMP/p.err")"
[ "$(cat "$TMP/p.out")" = 1000 ] || fail "python printed $(cat "$TMP/p.out")"
report_json "$TMP/p.db" "$TMP/p.json"
expect "$TMP/p.json" \
	-q stmt "WITH RECURSIVE c(x) AS (VALUES (?) UNION ALL SELECT x + ? FROM c WHERE x < ?) SELECT x AS py_open_at_fork FROM c" count=1 rows=1000
echo "Python: py_open_at_fork counted once with 1000 rows"

if ! perl -MDBD::SQLite -e 1 2>/dev/null; then
	not_checked "Perl's DBD::SQLite is not installed (libdbd-sqlite3-perl): the Perl case"
	exit 0
fi
cat >"$TMP/fork.pl" <<'EOF_PL'
use DBI;
my $db = DBI->connect("dbi:SQLite:dbname=:memory:", "", "", { RaiseError => 1 });
my $st = $db->prepare("WITH RECURSIVE c(x) AS (VALUES(1) UNION ALL SELECT x + 1 FROM c WHERE x < 1000) SELECT x AS pl_open_at_fork FROM c");
$st->execute;
my $n = $st->fetchrow_array ? 1 : 0;
my $pid = fork();
if ($pid == 0) { undef $st; $db->disconnect; exit 0; }
waitpid($pid, 0);
$n++ while $st->fetchrow_array;
print "$n\n";
EOF_PL
"$SQLPROF" record -q -o "$TMP/l.db" -- perl "$TMP/fork.pl" >"$TMP/l.out" 2>"$TMP/l.err" ||
	fail "perl under sqlprof failed: $(cat "$TMP/l.err")"
[ "$(cat "$TMP/l.out")" = 1000 ] || fail "perl printed $(cat "$TMP/l.out")"
report_json "$TMP/l.db" "$TMP/l.json"
expect "$TMP/l.json" \
	-q stmt "WITH RECURSIVE c(x) AS (VALUES (?) UNION ALL SELECT x + ? FROM c WHERE x < ?) SELECT x AS pl_open_at_fork FROM c" count=1 rows=1000
echo "Perl: pl_open_at_fork counted once with 1000 rows"
exit 0
