-- SPDX-License-Identifier: MIT
-- fixture.sql - a small synthetic profile with fixed numbers, for the
-- export golden files (see README.md). Applied to an empty profile written
-- by the current sqlprof, so the schema is always the current one: every
-- table is emptied first, and rows are inserted by column name (columns
-- added later stay NULL, which readers take as 0).
DELETE FROM meta; DELETE FROM processes; DELETE FROM queries; DELETE FROM histograms;
DELETE FROM statements; DELETE FROM stack_samples; DELETE FROM frames; DELETE FROM errors;
DELETE FROM events; DELETE FROM modules;

INSERT INTO meta(key, value) VALUES ('format', 2), ('sqlprof_version', '0.1.0'),
  ('command', './shop --fixture'), ('started', 1700000000), ('duration_ns', 5000000),
  ('exit_status', 0), ('rate', '0.5'), ('lost', 3), ('events_dropped', 0), ('bad_messages', 0);

INSERT INTO processes(pid, ppid, exe, executions, lost, untracked, sqlite_found, clean_exit,
                      messages, bad_messages) VALUES
  (100, 1, '/opt/shop/bin/shop', 116, 3, 0, 1, 1, 5, 0),
  (200, 100, '/opt/shop/bin/worker', 7, 0, 0, 1, 1, 2, 0);

-- fp 1001 is spread over three stacks in two processes; 1003 is an exec
-- running 1004; 1005 failed once and has one stack without frames; 1006
-- has no stack sample at all.
INSERT INTO queries(fp_id, kind, fingerprint, sql, count, total_ns, self_ns, wall_ns, min_ns,
                    max_ns, rows, vm_steps, fullscan_steps, sorts, autoindex, errors, nested,
                    samples, prepares, prepare_ns) VALUES
  (1001, 'stmt', 'SELECT name FROM authors WHERE id = ?', 'SELECT name FROM authors WHERE id = 7',
   100, 500000, 500000, 600000, 3000, 20000, 100, 2000, 0, 0, 0, 0, 0, 50, 1, 10000),
  (1002, 'stmt', 'SELECT id FROM books WHERE title LIKE ? ORDER BY price',
   'SELECT id FROM books WHERE title LIKE ''%7%'' ORDER BY price',
   4, 800000, 800000, 900000, 150000, 250000, 40, 80000, 79000, 4, 0, 0, 0, 4, 4, 40000),
  (1003, 'exec', 'CREATE TABLE t(a); INSERT INTO t VALUES (?)',
   'CREATE TABLE t(a); INSERT INTO t VALUES (1)',
   1, 90000, 30000, 100000, 90000, 90000, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0),
  (1004, 'stmt', 'INSERT INTO t VALUES (?)', 'INSERT INTO t VALUES (1)',
   1, 60000, 60000, 60000, 60000, 60000, 0, 12, 0, 0, 0, 0, 1, 1, 1, 2000),
  (1005, 'stmt', 'INSERT INTO authors(id, name) VALUES (?, ?)',
   'INSERT INTO authors(id, name) VALUES (?1, ?2)',
   10, 40000, 40000, 41000, 3000, 9000, 0, 150, 0, 0, 2, 1, 0, 2, 1, 3000),
  (1006, 'stmt', 'SELECT count(*) FROM books', 'SELECT count(*) FROM books',
   2, 7000, 7000, 7500, 3000, 4000, 2, 60, 50, 0, 0, 0, 0, 0, 1, 1500);

INSERT INTO histograms(fp_id, kind, bucket_ns, count) VALUES
  (1001, 'stmt', 2944, 50), (1001, 'stmt', 3968, 40), (1001, 'stmt', 19968, 10),
  (1002, 'stmt', 149504, 2), (1002, 'stmt', 249856, 2),
  (1003, 'exec', 89088, 1), (1004, 'stmt', 59904, 1),
  (1005, 'stmt', 2944, 9), (1005, 'stmt', 8960, 1),
  (1006, 'stmt', 2944, 1), (1006, 'stmt', 3968, 1);

INSERT INTO statements(sql_id, fp_id, sql, full_len, truncated) VALUES
  (501, 1001, 'SELECT name FROM authors WHERE id = 7', 37, 0),
  (502, 1002, 'SELECT id FROM books WHERE title LIKE ''%7%'' ORDER BY price', 59, 0),
  (503, 1003, 'CREATE TABLE t(a); INSERT INTO t VALUES (1)', 44, 0),
  (504, 1004, 'INSERT INTO t VALUES (1)', 24, 0),
  (505, 1005, 'INSERT INTO authors(id, name) VALUES (?1, ?2)', 45, 0);

-- stack 99 of pid 100 has no frames (symbolization failed).
INSERT INTO stack_samples(fp_id, kind, pid, stack_id, samples, total_ns, rows, vm_steps) VALUES
  (1001, 'stmt', 100, 11, 20, 100000, 20, 400),
  (1001, 'stmt', 100, 11, 10, 50000, 10, 200),
  (1001, 'stmt', 100, 13, 15, 80000, 15, 300),
  (1001, 'stmt', 200, 21, 5, 20000, 5, 100),
  (1002, 'stmt', 100, 12, 4, 800000, 40, 80000),
  (1003, 'exec', 100, 15, 1, 90000, 0, 0),
  (1004, 'stmt', 100, 16, 1, 60000, 0, 12),
  (1005, 'stmt', 100, 14, 1, 5000, 0, 20),
  (1005, 'stmt', 100, 99, 1, 3000, 0, 10);

-- frames are leaf first; 100/11 starts with an inlined function; 100/16 is
-- a statement run by sqlite3_exec, with libsqlite3 and libsqlprof frames.
INSERT INTO frames(pid, stack_id, idx, pc, module, function, file, line, inlined) VALUES
  (100, 11, 0, 4096, '/opt/shop/bin/shop', 'author_name', '/src/shop/shop.c', 40, 1),
  (100, 11, 1, 4096, '/opt/shop/bin/shop', 'list_books', '/src/shop/shop.c', 52, 0),
  (100, 11, 2, 4200, '/opt/shop/bin/shop', 'main', '/src/shop/shop.c', 90, 0),
  (100, 11, 3, 8000, '/lib/x86_64-linux-gnu/libc.so.6', '__libc_start_main_impl', '??', 0, 0),
  (100, 12, 0, 4300, '/opt/shop/bin/shop', 'search_titles', '/src/shop/shop.c', 60, 0),
  (100, 12, 1, 4210, '/opt/shop/bin/shop', 'main', '/src/shop/shop.c', 95, 0),
  (100, 12, 2, 8000, '/lib/x86_64-linux-gnu/libc.so.6', '__libc_start_main_impl', '??', 0, 0),
  (100, 13, 0, 4400, '/opt/shop/bin/shop', 'report_page', '/src/shop/shop.c', 70, 0),
  (100, 13, 1, 4220, '/opt/shop/bin/shop', 'main', '/src/shop/shop.c', 96, 0),
  (100, 13, 2, 8000, '/lib/x86_64-linux-gnu/libc.so.6', '__libc_start_main_impl', '??', 0, 0),
  (100, 14, 0, 6000, '/opt/shop/lib/libshopdb.so', 'db_insert', '/src/shop/db.c', 10, 0),
  (100, 14, 1, 4500, '/opt/shop/bin/shop', 'add_author', '/src/shop/shop.c', 30, 0),
  (100, 14, 2, 4230, '/opt/shop/bin/shop', 'main', '/src/shop/shop.c', 88, 0),
  (100, 15, 0, 4600, '/opt/shop/bin/shop', 'setup_schema', '/src/shop/shop.c', 20, 0),
  (100, 15, 1, 4240, '/opt/shop/bin/shop', 'main', '/src/shop/shop.c', 85, 0),
  (100, 16, 0, 9000, '/usr/lib/x86_64-linux-gnu/libsqlite3.so.0', 'sqlite3_exec', '??', 0, 0),
  (100, 16, 1, 9500, '/usr/lib/sqlprof/libsqlprof.so', 'sqlite3_exec', '/src/sqlprof/preload/shims.c', 257, 0),
  (100, 16, 2, 4600, '/opt/shop/bin/shop', 'setup_schema', '/src/shop/shop.c', 20, 0),
  (100, 16, 3, 4240, '/opt/shop/bin/shop', 'main', '/src/shop/shop.c', 85, 0),
  (200, 21, 0, 5000, '/opt/shop/bin/worker', 'worker_loop', '/src/shop/worker.c', 12, 0),
  (200, 21, 1, 8100, '/lib/x86_64-linux-gnu/libc.so.6', 'start_thread', '??', 0, 0);

INSERT INTO errors(fp_id, kind, rc, message, pid, stack_id, count) VALUES
  (1005, 'stmt', 1555, 'UNIQUE constraint failed: authors.id', 100, 14, 1);

-- Thread 100: an exec (seq 1) with its statement nested (seq 2); a LIKE
-- scan (seq 4) whose wall time contains seq 5 and overlaps seq 6 without
-- containing it; a failed insert (seq 7). Thread 201 of pid 200: one query.
INSERT INTO events(pid, tid, seq, parent_seq, fp_id, kind, sql_id, stack_id, start_ns, wall_ns,
                   db_ns, self_ns, rows, vm_steps, rc, flags) VALUES
  (100, 100, 1, 0, 1003, 'exec', 503, 15, 1000000, 100000, 90000, 30000, 0, 0, 0, 17),
  (100, 100, 2, 1, 1004, 'stmt', 504, 16, 1020000, 60000, 60000, 60000, 0, 12, 0, 19),
  (100, 100, 3, 0, 1001, 'stmt', 501, 11, 1200000, 5000, 4000, 4000, 1, 20, 0, 17),
  (100, 100, 4, 0, 1002, 'stmt', 502, 12, 1300000, 300000, 200000, 200000, 10, 20000, 0, 17),
  (100, 100, 5, 0, 1001, 'stmt', 501, 13, 1350000, 4000, 3500, 3500, 1, 20, 0, 1),
  (100, 100, 6, 0, 1001, 'stmt', 501, 13, 1550000, 100000, 20000, 20000, 1, 20, 0, 1),
  (100, 100, 7, 0, 1005, 'stmt', 505, 14, 1700000, 5000, 5000, 5000, 0, 20, 1555, 21),
  (200, 201, 1, 0, 1001, 'stmt', 501, 21, 2000000, 4000, 3800, 3800, 1, 20, 0, 17);
