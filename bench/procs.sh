#!/bin/sh
# SPDX-License-Identifier: MIT
# procs.sh N - N exec'd processes, the sqlite3 shell and python3 in turn, a
# few queries each (make bench's "processes" scale workload, issue 12).
# PYTHON names the interpreter (default python3).
n=${1:-300}
py=${PYTHON:-python3}
i=0
while [ "$i" -lt "$n" ]; do
	if [ $((i % 2)) -eq 0 ]; then
		sqlite3 :memory: "CREATE TABLE t(a); INSERT INTO t VALUES ($i); SELECT a FROM t; SELECT count(*) FROM t;" >/dev/null || exit 1
	else
		"$py" -c "import sqlite3; c = sqlite3.connect(':memory:'); c.execute('CREATE TABLE t(a)'); c.execute('INSERT INTO t VALUES (?)', ($i,)); c.execute('SELECT a FROM t').fetchall(); c.execute('SELECT count(*) FROM t').fetchall()" || exit 1
	fi
	i=$((i + 1))
done
