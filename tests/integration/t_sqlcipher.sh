#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_sqlcipher.sh - SQLite under another name (issue 14, item 7). A program
# linked with SQLCipher (-lsqlcipher, no libsqlite3 in the process): PRAGMA
# key, a table filled by a prepared insert, N sqlite3_exec calls of one
# SELECT and N executions of a prepared SELECT (tests/fixtures/cipher_app.c).
# SQLCipher is the SQLite this program uses, so it is profiled: exact
# counts, and every site is a line of cipher_app.c - the statements run
# inside sqlite3_exec and SQLCipher's schema loading included, never a
# frame inside libsqlcipher. The module is flagged as SQLite in the
# profile (modules.sqlite = 1) because it defines the sqlite3 API.
# Before: the statements inside sqlite3_exec were credited to
# `sqlite3_exec (??:0)` in libsqlcipher, its schema queries to `?? (??:0)`
# (only libsqlite3.so* frames were passed over).
. "$(dirname "$0")/lib.sh"
command -v gcc >/dev/null || skip "gcc not installed"
[ -e /usr/include/sqlcipher/sqlite3.h ] || skip "libsqlcipher-dev not installed (scripts/install-deps.sh)"
src=$(cd "$(dirname "$0")/../fixtures" && pwd)/cipher_app.c
cd "$TMP" || exit 1
gcc -g -O1 -o cipher_app "$src" -lsqlcipher || fail "building cipher_app"
ldd ./cipher_app | grep -q 'libsqlcipher' || fail "cipher_app is not linked with libsqlcipher"
ldd ./cipher_app | grep -q 'libsqlite3' && fail "cipher_app also links libsqlite3"

N=150
./cipher_app plain.db $N >plain.out 2>&1 || fail "cipher_app without sqlprof: $(cat plain.out)"
"$SQLPROF" record --rate 1 -o c.prof -- ./cipher_app c.db $N >c.out 2>c.err ||
	fail "cipher_app under sqlprof: $(cat c.out c.err)"
same_file "output" plain.out c.out
grep -q "statically\|second SQLite\|no SQLite execution" c.err && fail "unexpected warning: $(cat c.err)"

count_of() { # kind fingerprint -> executions
	sqlite3 c.prof "SELECT coalesce(sum(count), 0) FROM queries WHERE kind = '$1' AND fingerprint = '$2'"
}
check_count() { # kind fingerprint expected
	local n
	n=$(count_of "$1" "$2")
	[ "$n" = "$3" ] || fail "$1 '$2' counted $n, not $3"
}
check_count stmt 'INSERT INTO t VALUES (?, ?)' $N
check_count stmt 'SELECT b FROM t WHERE a = ?' $N
check_count exec 'SELECT count(*) FROM t WHERE a <= ?' $N
check_count stmt 'SELECT count(*) FROM t WHERE a <= ?' $N
check_count exec 'PRAGMA KEY = ?' 1
vm=$(sqlite3 c.prof "SELECT vm_steps FROM queries WHERE kind = 'stmt' AND fingerprint = 'SELECT b FROM t WHERE a = ?'")
[ "${vm:-0}" -gt 0 ] || fail "no VM steps for the prepared select: '$vm'"

report_json c.prof c.json
"$PYTHON" - c.json "$src" <<'PY' || fail "sites"
import json, sys
d = json.load(open(sys.argv[1]))
want = {('stmt', 'INSERT INTO t VALUES (?, ?)'): 47, ('stmt', 'SELECT b FROM t WHERE a = ?'): 59,
        ('exec', 'SELECT count(*) FROM t WHERE a <= ?'): 53,
        ('stmt', 'SELECT count(*) FROM t WHERE a <= ?'): 53, ('exec', 'PRAGMA KEY = ?'): 39,
        ('stmt', 'PRAGMA KEY = ?'): 39}
bad = 0
for q in d['queries']:
    for s in q['sites']:
        where = '%s (%s:%d) [%s]' % (s['function'], s['file'], s['line'], s['module'])
        if s['file'] != sys.argv[2] or s['function'] != 'main' or 'sqlcipher' in s['module']:
            print('wrong site for %s %s: %s' % (q['kind'], q['fingerprint'], where)); bad = 1
        line = want.get((q['kind'], q['fingerprint']))
        if line is not None and s['line'] != line:
            print('%s %s at line %d, not %d' % (q['kind'], q['fingerprint'], s['line'], line)); bad = 1
    print('%5d %-5s %s -> %s' % (q['count'], q['kind'], q['fingerprint'][:60],
          ', '.join('main:%d' % s['line'] for s in q['sites'])))
if d['unattributed_samples']:
    print('unattributed samples: %d' % d['unattributed_samples']); bad = 1
sys.exit(bad)
PY
kind=$(sqlite3 c.prof "SELECT group_concat(DISTINCT sqlite) FROM modules WHERE path LIKE '%libsqlcipher%'")
[ "$kind" = 1 ] || fail "libsqlcipher's module not flagged as SQLite (modules.sqlite: '$kind')"
exit 0
