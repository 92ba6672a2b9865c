#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_record_tmpdir.sh - issue 23, item 14 (TMPDIR): record makes its
# private directory in $TMPDIR; when it cannot, it said "cannot create a
# private directory: Permission denied" without saying where or that the
# place came from TMPDIR. A missing TMPDIR, a file as TMPDIR and (as an
# unprivileged user: root may write anywhere) a read-only TMPDIR are
# named with the variable and the reason; the command does not run.
. "$(dirname "$0")/lib.sh"
need_prog counts
cd "$TMP" || exit 1

# refused TMPDIR WHAT REASON [RUNNER...]
refused() {
	local dir=$1 what=$2 reason=$3 rc
	shift 3
	rm -f "$TMP/ran"
	env TMPDIR="$dir" "$@" "$SQLPROF" record -o "$TMP/o/p.db" -- sh -c ': >"$1"' sh "$TMP/ran" \
		>out 2>err
	rc=$?
	[ "$rc" != 0 ] || fail "$what: record exited 0"
	grep -q "TMPDIR=$dir" err && grep -q "$reason" err ||
		fail "$what: the message does not name TMPDIR=$dir and '$reason': $(cat err)"
	[ ! -e "$TMP/ran" ] || fail "$what: the command ran"
	echo "ok: $what (exit $rc) -> $(cat err)"
}
mkdir -m 0777 "$TMP/o"
refused "$TMP/missing" "a missing TMPDIR" "No such file or directory"
: >"$TMP/file"
refused "$TMP/file" "a file as TMPDIR" "Not a directory"
if [ "$(id -u)" != 0 ]; then
	mkdir -m 0500 "$TMP/ro"
	refused "$TMP/ro" "a read-only TMPDIR" "Permission denied"
elif command -v setpriv >/dev/null &&
	setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$SQLPROF"; then
	chmod 0711 "$TMP"
	mkdir -m 0755 "$TMP/ro"
	refused "$TMP/ro" "a read-only TMPDIR (as nobody)" "Permission denied" \
		setpriv --reuid=65534 --regid=65534 --clear-groups
else
	skip "cannot run as an unprivileged user for the read-only TMPDIR"
fi
exit 0
