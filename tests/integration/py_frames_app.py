# SPDX-License-Identifier: MIT
# py_frames_app.py - a program for t_py_frames.sh. Its queries are issued
# from a method, a nested function, a generator, a lambda, a
# multi-line call and executescript, and each query calls probe(), a SQL function that
# records the Python stack issuing it (traceback, which CPython itself
# computes) into the JSON file argv[1]: {sql: [[function, file, line],
# ...] innermost first, without probe itself}. sqlprof's Python frames
# must be the same.
import json
import sqlite3
import sys
import traceback

seen = {}
current = [None]


def probe():
    st = traceback.extract_stack()[:-1]  # without probe()
    key = current[0]
    if key not in seen:
        seen[key] = [[f.name, f.filename, f.lineno] for f in reversed(st)]
    return 1


class Repo:
    def __init__(self, db):
        self.db = db

    def user_name(self, i):
        current[0] = "SELECT name, probe() FROM u WHERE id = ?"
        return self.db.execute("SELECT name, probe() FROM u WHERE id = ?", (i,)).fetchone()

    def names(self):
        def inner():
            current[0] = "SELECT count(*), probe() FROM u"
            return self.db.execute(
                "SELECT count(*), probe() FROM u"
            ).fetchone()
        return inner()


def gen(db, n):
    for i in range(n):
        current[0] = "SELECT ? + probe()"
        yield db.execute("SELECT ? + probe()", (i,)).fetchone()


def main():
    db = sqlite3.connect(":memory:")
    db.create_function("probe", 0, probe)
    db.execute("CREATE TABLE u(id INTEGER PRIMARY KEY, name TEXT)")
    db.executemany("INSERT INTO u(name) VALUES (?)", [("a",), ("b",)])
    r = Repo(db)
    for i in range(50):
        r.user_name(i % 2 + 1)
        r.names()
    total = sum(x[0] for x in gen(db, 50))
    f = lambda: db.execute("SELECT 7, probe()").fetchone()  # noqa: E731
    current[0] = "SELECT 7, probe()"
    for _ in range(50):
        f()
    current[0] = "INSERT INTO s VALUES (probe())"
    db.executescript("CREATE TABLE s(x);\nINSERT INTO s VALUES (probe());")
    with open(sys.argv[1], "w") as out:
        json.dump(seen, out)
    print("ok", total)


main()
