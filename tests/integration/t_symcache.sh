#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_symcache.sh - the symbolization cache ($XDG_CACHE_HOME/sqlprof/sym):
# a second record of the same program opens no module (neither libc nor its
# debug file: the symbolizer's counters, SQLPROF_SYMSTATS) and writes the
# same frames (function, file:line, inline flags) as a record without the
# cache (SQLPROF_SYMCACHE=0). The cache is not used when what its results
# depend on changed: a debug file that appears under --debug-dir gives the
# names it holds at once. Garbage, truncated or symlinked cache files are
# ignored and rewritten; a cache directory others may write to is not used;
# four records at once leave a cache that gives the same frames; a
# collector stopped while counts runs (a loaded machine's, at its worst)
# changes none of them.
# (Before: every record opened libc and inflated libc6-dbg's DWARF.)
. "$(dirname "$0")/lib.sh"
for t in gcc objcopy strip readelf; do
	command -v $t >/dev/null || skip "$t not installed (binutils, gcc)"
done
cd "$TMP" || exit 1
gcc -g -O1 -o counts "$ITDIR/../progs/counts.c" -lsqlite3 || fail "gcc failed"
objcopy --only-keep-debug counts counts.debug && strip --strip-all counts || fail "objcopy/strip failed"
bid=$(readelf -n counts | awk '/Build ID/ { print $3 }')
[ -n "$bid" ] || skip "the toolchain writes no build-id"
mkdir -p "dd/.build-id/${bid:0:2}"
export XDG_CACHE_HOME=$TMP/xdg
C=$XDG_CACHE_HOME/sqlprof/sym

# rec NAME [ENV=V...] [-- COMMAND...]: record ./counts (or COMMAND, which
# exits with counts' code) into NAME.db (exit 3 is counts'), its frames
# (what a report shows of them, without pcs: ASLR moves them) into
# NAME.txt and the symbolizer's counters into NAME.stats. The records
# compared are different runs, so each must hold the same stacks, whatever
# the load: at --rate 0 only the first execution of each text and the
# failing one have a stack (9 stacks, 65 lookups), records that fit in the
# thread's 128 KiB ring however late the collector reads it. (At --rate 1
# each of the 1,046 executions was a record, more than the ring holds: at
# load 25-29 a recording lost 21, the failing INSERT's stack, counts.c:58,
# among them, and differed from the others.) --slow-ms 0: a slow
# execution's stack would be one more (at its sqlite3_reset, counts.c:52).
# A recording that lost records fails here, not in a diff of frames.
rec() {
	local n=$1 cmd=(./counts) envs=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1") && shift; done
	[ $# -gt 0 ] && shift && cmd=("$@")
	env SQLPROF_SYMSTATS=1 "${envs[@]}" "$SQLPROF" record -q --rate 0 --slow-ms 0 \
		--debug-dir "$TMP/dd" -o "$n.db" -- "${cmd[@]}" >/dev/null 2>"$n.err"
	[ $? = 3 ] || fail "record $n: counts did not exit 3: $(cat "$n.err")"
	"$PYTHON" - "$n.db" >"$n.txt" <<'PY' || fail "frames of $n"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
lost = db.execute("SELECT value FROM meta WHERE key = 'lost'").fetchone()
if lost and lost[0]:
    sys.exit("%s records lost: its stacks are not all there" % lost[0])
rows = db.execute("SELECT idx, module, function, file, line, inlined FROM frames").fetchall()
for r in sorted(set(rows), key=repr):
    print("|".join(map(str, r)))
PY
	grep '^sqlprof: symbolizer:' "$n.err" >"$n.stats" || fail "no SQLPROF_SYMSTATS line: $(cat "$n.err")"
}
# ctr NAME WHAT: the counter before WHAT ("modules opened", "from cache files", ...)
ctr() {
	sed -n "s/.*[ (]\([0-9][0-9]*\) $2.*/\1/p" "$1.stats"
}

rec r1
[ "$(ctr r1 'modules opened')" -ge 2 ] || fail "r1 opened no module: $(cat r1.stats)"
grep -q 'libc.so.6|' r1.txt || skip "no libc frame in the stacks (unwinding stops before libc)"
ls "$C" | grep -q "^$bid-" || fail "no cache file for counts in $C: $(ls -la "$C")"
rec r2
[ "$(ctr r2 'modules opened')" = 0 ] || fail "r2 opened modules (libc's DWARF read again): $(cat r2.stats)"
[ "$(ctr r2 'from cache files')" -gt 0 ] || fail "r2: nothing from the cache: $(cat r2.stats)"
same_file "frames from the cache" r1.txt r2.txt
grep -q '|counts|main|' r1.txt && fail "counts has names before its debug file is there"
echo "warm: $(cat r2.stats)"

# the debug file appears: the cache's results for counts are stale
mv counts.debug "dd/.build-id/${bid:0:2}/${bid:2}.debug"
rec r3
[ "$(ctr r3 stale)" -ge 1 ] || fail "r3: the new debug file left the cache in use: $(cat r3.stats)"
grep -q '|main|.*counts.c|' r3.txt || fail "r3: no main in counts.c: $(cat r3.txt)"
rec r4 SQLPROF_SYMCACHE=0
same_file "frames after the debug file came, against no cache" r4.txt r3.txt
rec r5
[ "$(ctr r5 'modules opened')" = 0 ] || fail "r5 opened modules: $(cat r5.stats)"
same_file "frames from the rewritten cache" r4.txt r5.txt
echo "debug file came: $(cat r3.stats)"

# the collector stopped (SIGSTOP) from before counts starts until it has
# exited: what it reads late is all there (at --rate 1: 39 records lost,
# counts.c:58 missing, every time)
mkfifo go || fail "mkfifo failed"
rec r5s -- sh -c 'echo $PPID >coll.tmp && mv coll.tmp coll && read -r x <go &&
	./counts; r=$?; echo $r >rc.tmp && mv rc.tmp rc; exit $r' &
sub=$!
wait_file coll "$HANG_S" || fail "sqlprof record did not start the command: $(cat r5s.err)"
coll=$(cat coll)
kill -STOP "$coll" || fail "cannot stop sqlprof record ($coll)"
echo go >go
wait_file rc "$HANG_S" || { kill -CONT "$coll"; fail "counts did not exit under a stopped collector"; }
kill -CONT "$coll"
wait "$sub" || exit 1
same_file "frames with a collector stopped while counts ran" r4.txt r5s.txt

# hostile files: each one cut short, then garbage, then a symbolic link
for f in "$C"/*; do head -c $(($(stat -c %s "$f") / 2)) "$f" >"$f.x" && mv "$f.x" "$f"; done
rec r6
[ "$(ctr r6 rejected)" -ge 2 ] || fail "r6: truncated files not rejected: $(cat r6.stats)"
same_file "frames with truncated cache files" r4.txt r6.txt
for f in "$C"/*; do head -c 4096 /dev/urandom >"$f"; done
rec r7
same_file "frames with garbage cache files" r4.txt r7.txt
for f in "$C"/*; do cp "$f" "$TMP/kept" && ln -sf "$TMP/kept" "$f"; done
rec r8
[ "$(ctr r8 'files used')" = 0 ] || fail "r8 read a symbolic link: $(cat r8.stats)"
same_file "frames with symlinked cache files" r4.txt r8.txt
rec r9
[ "$(ctr r9 'modules opened')" = 0 ] || fail "r9: the cache was not rewritten: $(cat r9.stats)"
same_file "frames from the cache rewritten after bad files" r4.txt r9.txt

# a directory others may write to is not used at all
chmod 0777 "$C"
rec r10
[ "$(ctr r10 'modules opened')" -ge 2 ] || fail "r10 used a world-writable cache: $(cat r10.stats)"
same_file "frames with a world-writable cache" r4.txt r10.txt
chmod 0700 "$C"

# concurrent records on an empty cache
rm -rf "$XDG_CACHE_HOME"
for i in 1 2 3 4; do rec "p$i" & done
wait
for i in 1 2 3 4; do same_file "frames of concurrent record $i" r4.txt "p$i.txt"; done
ls -a "$C" | grep -q '^\.tmp' && fail "temporary files left in $C"
rec r11
[ "$(ctr r11 'modules opened')" = 0 ] || fail "r11 after concurrent writers: $(cat r11.stats)"
same_file "frames after concurrent writers" r4.txt r11.txt
echo "ok: $(wc -l <r4.txt) frames identical with and without the cache, cold, warm, stale, stopped collector, hostile, concurrent"
