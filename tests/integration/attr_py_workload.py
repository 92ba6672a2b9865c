# SPDX-License-Identifier: MIT
# attr_py_workload.py - the Python workload of t_attr_python.sh: known
# numbers of executions through the sqlite3 module (so through the
# interpreter's _sqlite3 extension): 1 CREATE TABLE, 300 INSERTs by
# executemany, 500 SELECTs by Cursor.execute, 40 UPDATEs by
# Connection.execute from a function of its own.
import sqlite3


def bump(con, i):
    con.execute("UPDATE t SET y = y + 1 WHERE x = ?", (i,))


con = sqlite3.connect(":memory:")
con.execute("CREATE TABLE t(x INTEGER PRIMARY KEY, y INTEGER)")
con.executemany("INSERT INTO t(x, y) VALUES (?, ?)", [(i, 2 * i) for i in range(300)])
cur = con.cursor()
total = 0
for i in range(500):
    cur.execute("SELECT y FROM t WHERE x = ?", (i % 300,))
    total += cur.fetchone()[0]
for i in range(40):
    bump(con, i)
con.commit()
con.close()
print("total=%d" % total)
