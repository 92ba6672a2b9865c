# SPDX-License-Identifier: MIT
# queries10k.py - exactly 10,000 executions of one parameterized SELECT
# through Python's sqlite3 module (whose _sqlite3 extension is dlopened and
# brings libsqlite3 in after the process started), for t_python.sh.
import sqlite3

con = sqlite3.connect(":memory:")
con.execute("CREATE TABLE nums(x INTEGER PRIMARY KEY, sq INTEGER)")
con.executemany("INSERT INTO nums(x, sq) VALUES (?, ?)", [(i, i * i) for i in range(100)])
cur = con.cursor()
total = 0
for i in range(10000):
    cur.execute("SELECT sq FROM nums WHERE x = ?", (i % 100,))
    total += cur.fetchone()[0]
con.close()
print("total=%d" % total)
