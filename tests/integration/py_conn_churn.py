# SPDX-License-Identifier: MIT
"""A service that opens a connection per request thread (issue 27, item
5), for t_report_prepare.sh: 40 requests, each a new thread with a new
connection to DBFILE running one lookup. Usage: py_conn_churn.py DBFILE.
Prints a checksum."""
import sqlite3
import sys
import threading

path = sys.argv[1]
db = sqlite3.connect(path)
db.executescript("DROP TABLE IF EXISTS users;"
                 "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT);"
                 "CREATE TABLE orders(id INTEGER PRIMARY KEY, user_id INTEGER);"
                 "CREATE INDEX orders_user ON orders(user_id);")
with db:
    db.executemany("INSERT INTO users(id, name) VALUES (?, ?)", [(i, "u%d" % i) for i in range(1, 41)])
db.close()
total = []


def request(uid):
    c = sqlite3.connect(path)
    total.append(len(c.execute("SELECT name FROM users WHERE id = ?", (uid,)).fetchone()[0]))
    c.close()


for uid in range(1, 41):
    t = threading.Thread(target=request, args=(uid,))
    t.start()
    t.join()
print(sum(total))
