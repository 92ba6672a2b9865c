#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_export_output.sh - a failed `export -o` destroys nothing. Writes fail
# here by a file size limit (ulimit -f 1 with SIGXFSZ ignored: EFBIG past
# 1 KiB; the HTML export is far larger), or on a copy of /dev/full made
# with mknod in $TMP (never the system's node). In every case export exits
# 4 and:
# 1. an existing regular file (a previous export) keeps its contents (it
#    was deleted before);
# 2. a symlink to a file: both stay, the file unchanged (before: the
#    symlink was deleted and its file left truncated);
# 3. a new file: nothing is left behind, no temporary either;
# 4. a symlink to /proc/self/fd/1 (as /dev/stdout is), stdout appended to
#    a file: the symlink stays, the file keeps what it had (before: the
#    file was truncated and the symlink deleted);
# 5. a device node (mknod c 1 7, /dev/full): still the same device.
# And writing still works: -o /dev/stdout into a pipe and appended to a
# file (after what the file had: it was truncated before), -o a FIFO and
# -o a device (mknod c 1 3, /dev/null) written as they are and left in
# place; a symlink to a file writes the file, the symlink stays; new and
# replaced files are mode 0600, and no temporary is left. -o /dev/stdout
# appended to the profile itself is refused (exit 2, unchanged).
. "$(dirname "$0")/lib.sh"
need_prog counts
cd "$TMP" || exit 1

"$SQLPROF" record -q -o p.db --rate 1 -- "$PROGS/counts" >/dev/null 2>&1
[ -s p.db ] || fail "no profile recorded"
"$SQLPROF" export -f html -o ref.html p.db || fail "export -f html failed"
[ "$(stat -c %s ref.html)" -gt 4096 ] || fail "the HTML export is too small for this test"

# limited OUT: export -f html -o OUT under a 1 KiB file size limit;
# must exit 4.
limited() {
	local rc
	(trap '' XFSZ; ulimit -f 1; exec "$SQLPROF" export -f html -o "$1" p.db) >out 2>err
	rc=$?
	[ "$rc" = 4 ] || fail "export -o $1 under a 1 KiB limit: exit $rc, expected 4: $(cat err)"
}
no_temporaries() {
	local left
	left=$(find . -name '*.sqlprof-export.*')
	[ -z "$left" ] || fail "$1: temporary left behind: $left"
}

echo "previous export" >old.html
limited old.html
[ "$(cat old.html 2>/dev/null)" = "previous export" ] || fail "1: the existing file was destroyed"
echo "ok: 1. existing file kept"

echo "the target" >target.html
ln -s target.html link.html
limited link.html
[ -L link.html ] || fail "2: the symlink was removed"
[ "$(cat target.html)" = "the target" ] || fail "2: the symlink's file was changed: $(head -c 80 target.html)"
echo "ok: 2. symlink and its file kept"

limited new.html
[ ! -e new.html ] || fail "3: a partial new file was left"
no_temporaries 3
echo "ok: 3. nothing left"

ln -s /proc/self/fd/1 fd1
echo "earlier output" >log
(trap '' XFSZ; ulimit -f 1; exec "$SQLPROF" export -f html -o "$TMP/fd1" p.db) >>log 2>err
rc=$?
[ "$rc" = 4 ] || fail "4: exit $rc, expected 4: $(cat err)"
[ -L fd1 ] || fail "4: the symlink to /proc/self/fd/1 was removed"
[ "$(head -1 log)" = "earlier output" ] || fail "4: the file behind stdout lost what it had"
echo "ok: 4. stdout's symlink and file kept"

if mknod full c 1 7 2>/dev/null; then
	"$SQLPROF" export -f folded -o full p.db 2>err
	rc=$?
	[ "$rc" = 4 ] || fail "5: export -o a full device: exit $rc, expected 4: $(cat err)"
	[ -c full ] && [ "$(stat -c %t:%T full)" = 1:7 ] || fail "5: the device node is gone or changed"
	"$SQLPROF" export -f folded -o /dev/stdout p.db >full 2>err
	[ $? = 4 ] || fail "5: -o /dev/stdout > full device: not exit 4: $(cat err)"
	[ -c full ] || fail "5: the device node is gone"
	echo "ok: 5. device node kept"
else
	not_checked "case 5, a device node (mknod not permitted)"
fi

# Writing works.
"$SQLPROF" export -f folded p.db >want.folded || fail "export to stdout failed"
"$SQLPROF" export -f folded -o /dev/stdout p.db | cat >got.folded
same_file "-o /dev/stdout into a pipe" want.folded got.folded
{ echo "before"; cat want.folded; } >want.log
echo "before" >got.log
"$SQLPROF" export -f folded -o /dev/stdout p.db >>got.log || fail "-o /dev/stdout >> file failed"
same_file "-o /dev/stdout appended to a file" want.log got.log
mkfifo fifo
cat fifo >got.fifo &
"$SQLPROF" export -f folded -o fifo p.db || fail "-o a FIFO failed"
wait
same_file "-o a FIFO" want.folded got.fifo
[ -p fifo ] || fail "the FIFO is gone"
if mknod null c 1 3 2>/dev/null; then
	"$SQLPROF" export -f folded -o null p.db || fail "-o a null device failed"
	[ -c null ] || fail "the null device node is gone"
fi
"$SQLPROF" export -f folded -o link.html p.db || fail "-o a symlink failed"
[ -L link.html ] || fail "writing through the symlink replaced it"
same_file "-o a symlink writes its file" want.folded target.html
[ "$(stat -c %a target.html)" = 600 ] || fail "the replaced file is mode $(stat -c %a target.html)"
(umask 000 && "$SQLPROF" export -f folded -o fresh.folded p.db) || fail "-o a new file failed"
[ "$(stat -c %a fresh.folded)" = 600 ] || fail "a new export is mode $(stat -c %a fresh.folded)"
cp p.db p.copy
"$SQLPROF" export -f folded -o /dev/stdout p.db >>p.db 2>err
rc=$?
[ "$rc" = 2 ] || fail "-o /dev/stdout >> the profile: exit $rc, expected 2: $(cat err)"
cmp -s p.db p.copy || fail "-o /dev/stdout >> the profile changed it"
no_temporaries "after the exports"
echo "ok: writing to a pipe, an appended file, a FIFO, a device, a symlink, new files"
exit 0
