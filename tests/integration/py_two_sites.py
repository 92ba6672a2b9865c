# SPDX-License-Identifier: MIT
# py_two_sites.py - for t_py_sampled.sh: one query from two Python
# functions, 14,000 executions from the first and 6,000 from the second.
import sqlite3

db = sqlite3.connect(":memory:")


def load_user(i):
    return db.execute("SELECT ? * 2", (i,)).fetchone()


def load_post(i):
    return db.execute("SELECT ? * 2", (i,)).fetchone()


for i in range(20000):
    if i % 10 < 7:
        load_user(i)
    else:
        load_post(i)
print("ok")
