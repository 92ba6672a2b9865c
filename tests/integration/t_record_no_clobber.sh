#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_record_no_clobber.sh - record -o never destroys data: a SQLite database
# that is no profile, a text file, a directory, and a FILE.old that is no
# profile are refused before the command runs (exit 2, one line on
# stderr, file untouched); a previous profile is kept as FILE.old; an
# empty file is replaced; a command that could not be started (exit 127)
# leaves the old profile in place and writes nothing; a command that puts
# a database at the output path while it runs keeps it (the profile goes
# to $TMPDIR/sqlprof-PID.db, exit 4).
. "$(dirname "$0")/lib.sh"
need_prog counts
command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
cd "$TMP" || exit 1

# refused FILE WHAT: record -o FILE must exit 2 with one line naming FILE,
# without running the command and without changing FILE.
refused() {
	local f=$1 what=$2 rc
	cp -a "$f" "$f.orig" 2>/dev/null
	rm -f ran
	"$SQLPROF" record -o "$f" -- sh -c ': >ran; exec "$0"' "$PROGS/counts" >out 2>err
	rc=$?
	[ "$rc" = 2 ] || fail "$what: exit $rc, expected 2: $(head -3 err)"
	[ "$(wc -l <err)" = 1 ] || fail "$what: expected one line on stderr: $(cat err)"
	grep -q "$f" err || fail "$what: the message does not name $f: $(cat err)"
	[ ! -e ran ] || fail "$what: the command ran"
	if [ -f "$f.orig" ]; then
		cmp -s "$f" "$f.orig" || fail "$what: $f was changed"
	fi
	echo "ok: $what -> $(cat err)"
}

sqlite3 mydata.db "CREATE TABLE t(a); INSERT INTO t VALUES(42);"
refused mydata.db "a user's database"
# one with a meta table too, but no format key
sqlite3 meta.db "CREATE TABLE meta(key, value); INSERT INTO meta VALUES('version', 1);"
refused meta.db "a database with another meta table"
# a WAL database: not even a -wal or -shm file may appear beside it
sqlite3 wal.db "PRAGMA journal_mode=WAL; CREATE TABLE t(a); INSERT INTO t VALUES(1);" >/dev/null
refused wal.db "a database in WAL mode"
[ ! -e wal.db-wal ] && [ ! -e wal.db-shm ] || fail "looking at wal.db left -wal or -shm files"
printf 'my notes\nline two\n' >notes.txt
refused notes.txt "a text file"
head -c 4096 /dev/urandom >random.bin
refused random.bin "random bytes"
mkdir adir
refused adir "a directory"
[ -d adir ] || fail "the directory is gone"

# A profile is replaced, and kept as FILE.old.
"$SQLPROF" record -q -o good.db -- "$PROGS/counts" >/dev/null 2>&1
[ -s good.db ] || fail "no first profile"
cp good.db first.db
"$SQLPROF" record -q -o good.db --rate 1 -- "$PROGS/counts" >/dev/null 2>err || [ $? = 3 ] ||
	fail "second record failed: $(cat err)"
cmp -s good.db.old first.db || fail "good.db.old is not the previous profile"
cmp -s good.db first.db && fail "good.db was not replaced"
report_json good.db r.json
report_json good.db.old r-old.json
[ "$(stat -c %a good.db.old)" = 600 ] || fail "good.db.old mode $(stat -c %a good.db.old)"
echo "ok: previous profile kept as good.db.old"

# The command cannot be started: nothing written, the old profile stays.
cp good.db second.db
cp good.db.old second.db.old
"$SQLPROF" record -o good.db -- ./nosuch >out 2>err
rc=$?
[ "$rc" = 127 ] || fail "missing command: exit $rc, expected 127"
grep -q nosuch err || fail "the 127 message does not name the command: $(cat err)"
cmp -s good.db second.db || fail "missing command: good.db was replaced"
cmp -s good.db.old second.db.old || fail "missing command: good.db.old was replaced"
ls good.db.tmp.* >/dev/null 2>&1 && fail "missing command: a temporary file was left"
"$SQLPROF" record -q -o never.db -- ./nosuch >/dev/null 2>&1
[ ! -e never.db ] || fail "missing command: an empty profile was written"
echo "ok: a command that cannot start writes nothing"

# FILE.old that is not a profile: refused too, neither file touched.
cp good.db p2.db
echo "keep me" >p2.db.old
refused p2.db "FILE.old is a text file"
cmp -s p2.db.old <(echo "keep me") || fail "p2.db.old changed"

# An empty file is replaced (documented).
: >empty.db
"$SQLPROF" record -q -o empty.db -- "$PROGS/counts" >/dev/null 2>&1
report_json empty.db r-empty.json
[ ! -e empty.db.old ] || fail "an empty file was kept as .old"
echo "ok: an empty file is replaced"

# The command creates a database at the output path while it runs.
mkdir alt
TMPDIR=$TMP/alt "$SQLPROF" record -q -o made.db -- \
	sh -c '"$0" >/dev/null; sqlite3 made.db "CREATE TABLE mine(x); INSERT INTO mine VALUES(7);"' \
	"$PROGS/counts" >out 2>err
rc=$?
[ "$rc" = 4 ] || fail "database made by the command: exit $rc, expected 4: $(cat err)"
[ "$(sqlite3 made.db 'SELECT x FROM mine')" = 7 ] || fail "the command's database was overwritten"
saved=$(ls alt/sqlprof-*.db 2>/dev/null | head -1)
[ -n "$saved" ] || fail "no profile saved in \$TMPDIR: $(cat err)"
grep -qF "$saved" err || fail "stderr does not say where the profile went: $(cat err)"
report_json "$saved" r-saved.json
echo "ok: $(cat err)"
exit 0
