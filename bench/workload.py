# SPDX-License-Identifier: MIT
# workload.py - the Python workload of `make bench`: what an application
# using the standard sqlite3 module does. A 10,000-row table, then N
# iterations of a point lookup through cursor.execute + fetchone, with an
# INSERT every 10th iteration (all in one transaction, committed at the
# end). Only the loop is timed (time.perf_counter_ns, CLOCK_MONOTONIC);
# prints the same BENCH line as bench/bench.h.
#
# Usage: python3 workload.py [N]   (default 100000)
import sqlite3
import sys
import time

n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
con = sqlite3.connect(":memory:")
con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score INTEGER)")
# One statement fills the table, so the set-up costs a profiler (or ltrace)
# next to nothing and the loop is what is measured.
con.execute("WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c WHERE x < 9999) "
            "INSERT INTO t(id, name, score) SELECT x, 'name ' || x, x * 7 % 1000 FROM c")
con.commit()
cur = con.cursor()
check = 0
t0 = time.perf_counter_ns()
for i in range(n):
    cur.execute("SELECT name, score FROM t WHERE id = ?", ((i * 7919) % 10000,))
    check += cur.fetchone()[1]
    if i % 10 == 9:
        cur.execute("INSERT INTO t(name, score) VALUES (?, ?)", ("new %d" % i, i))
t1 = time.perf_counter_ns()
con.commit()
con.close()
# Peak RSS of this image (VmHWM; ru_maxrss would include the forking parent).
with open("/proc/self/status") as f:
    rss = next((int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:")), -1)
print("BENCH name=python n=%d loop_ns=%d maxrss_kb=%d check=%d"
      % (n + n // 10, t1 - t0, rss, check))
