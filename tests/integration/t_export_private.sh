#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_export_private.sh - export -o FILE, in every format, creates FILE with
# mode 0600 (exports hold SQL text, like the profile) under umask 022 and
# 000, and an existing 0644 file loses its group and other bits when it is
# overwritten; exporting again over the previous export works. export -o
# never writes over a SQLite database: the input profile itself, another
# profile, a user's database are refused (exit 2, one line, file
# unchanged). A device (/dev/null) is written as it is, and stays.
. "$(dirname "$0")/lib.sh"
need_prog counts
command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
cd "$TMP" || exit 1

"$SQLPROF" record -q -o p.db --rate 1 -- "$PROGS/counts" >/dev/null 2>&1
[ -s p.db ] || fail "no profile recorded"
cp p.db p.orig

for f in folded svg perfetto chrome speedscope csv html; do
	for mask in 022 000; do
		(umask $mask && "$SQLPROF" export -f $f -o "new-$mask.$f" p.db) 2>err ||
			fail "export -f $f (umask $mask): $(cat err)"
		mode=$(stat -c %a "new-$mask.$f")
		[ "$mode" = 600 ] || fail "export -f $f under umask $mask: mode $mode, expected 600"
	done
	echo old >"old.$f" && chmod 0644 "old.$f"
	(umask 022 && "$SQLPROF" export -f $f -o "old.$f" p.db) 2>err || fail "export -f $f over a file: $(cat err)"
	mode=$(stat -c %a "old.$f")
	[ "$mode" = 600 ] || fail "export -f $f over a 0644 file: mode $mode, expected 600"
	cmp -s "old.$f" "new-022.$f" || [ $f = perfetto ] || [ $f = html ] ||
		fail "export -f $f over a file differs from a fresh export"
	"$SQLPROF" export -f $f -o "old.$f" p.db 2>err || fail "export -f $f over its previous output: $(cat err)"
done
echo "ok: every format created 0600"

# refused OUT WHAT: export -o OUT exits 2 with one line, OUT unchanged.
refused() {
	local rc
	cp "$1" "$1.before"
	"$SQLPROF" export -f folded -o "$1" p.db >out 2>err
	rc=$?
	[ "$rc" = 2 ] || fail "$2: exit $rc, expected 2: $(cat err)"
	[ "$(wc -l <err)" = 1 ] || fail "$2: expected one line: $(cat err)"
	cmp -s "$1" "$1.before" || fail "$2: $1 was changed"
	echo "ok: $2 -> $(cat err)"
}
refused p.db "the input profile"
ln -s p.db link.db
refused link.db "the input profile through a symlink"
cp p.db other.db
refused other.db "another profile"
sqlite3 mydata.db "CREATE TABLE t(a); INSERT INTO t VALUES(1);"
refused mydata.db "a user's database"
cmp -s p.db p.orig || fail "the profile changed"

if [ -c /dev/null ]; then
	"$SQLPROF" export -f folded -o /dev/null p.db 2>err || fail "export -o /dev/null: $(cat err)"
	[ -c /dev/null ] || fail "/dev/null is no longer a device"
fi
exit 0
