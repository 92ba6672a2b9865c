# SPDX-License-Identifier: MIT
"""A blog as an ORM user writes it (issue 27, items 2-3), for
t_doctor_loops.sh. Usage: py_blog.py MODE, MODE one of

  blog       fetch 150 posts, then per post the author's name and the
             comment count (two lookups in turn per row: the ORM N+1)
  pause      blog, with a 50 ms pause between the fetch and the loop:
             what a thread descheduled there on a loaded machine looks
             like to the profiler
  slow       per post, the count of its comments with no index on
             comments(post_id): a slow lookup per row, back to back
  service    30 requests 10 ms apart, each reading one post, then its
             author and comment count (a service loop, not an N+1)
  tableless  per post, two expressions that read no table (SELECT ? * 2,
             SELECT upper(?)) in turn: no N+1

In memory, deterministic; prints a checksum.
"""
import sqlite3
import sys
import time


def setup(db, index=True):
    db.executescript(
        "CREATE TABLE authors(id INTEGER PRIMARY KEY, name TEXT);"
        "CREATE TABLE posts(id INTEGER PRIMARY KEY, author_id INTEGER, title TEXT);"
        "CREATE TABLE comments(id INTEGER PRIMARY KEY, post_id INTEGER, body TEXT);"
    )
    if index:
        db.execute("CREATE INDEX comments_post ON comments(post_id)")
    with db:
        db.executemany("INSERT INTO authors(id, name) VALUES (?, ?)",
                       [(i, "author%d" % i) for i in range(1, 21)])
        db.executemany("INSERT INTO posts(id, author_id, title) VALUES (?, ?, ?)",
                       [(i, i % 20 + 1, "post") for i in range(1, 151)])
        n = 20000 if not index else 1000
        db.executemany("INSERT INTO comments(post_id, body) VALUES (?, ?)",
                       [(i % 150 + 1, "c") for i in range(n)])


def main():
    mode = sys.argv[1]
    db = sqlite3.connect(":memory:")
    setup(db, index=mode != "slow")
    s = 0
    if mode in ("blog", "pause", "slow"):
        posts = db.execute("SELECT id, author_id FROM posts ORDER BY id").fetchall()
        if mode == "pause":
            time.sleep(0.05)
        for pid, aid in posts:
            if mode != "slow":
                s += len(db.execute("SELECT name FROM authors WHERE id = ?", (aid,)).fetchone()[0])
            s += db.execute("SELECT count(*) FROM comments WHERE post_id = ?", (pid,)).fetchone()[0]
    elif mode == "service":
        for req in range(1, 31):
            pid, aid = db.execute("SELECT id, author_id FROM posts WHERE id = ?", (req,)).fetchone()
            s += len(db.execute("SELECT name FROM authors WHERE id = ?", (aid,)).fetchone()[0])
            s += db.execute("SELECT count(*) FROM comments WHERE post_id = ?", (pid,)).fetchone()[0]
            time.sleep(0.01)
    elif mode == "tableless":
        posts = db.execute("SELECT id, title FROM posts ORDER BY id").fetchall()
        for pid, title in posts:
            s += db.execute("SELECT ? * 2", (pid,)).fetchone()[0]
            s += len(db.execute("SELECT upper(?)", (title,)).fetchone()[0])
    else:
        sys.exit("usage: py_blog.py blog|pause|slow|service|tableless")
    print(s)


main()
