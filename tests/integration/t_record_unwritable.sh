#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_record_unwritable.sh - an -o record cannot write is found before the
# command runs: a missing directory, a directory of a read-only file
# system (/proc), a read-only directory and a read-only profile (as an
# unprivileged user), a full disk (a 64 KiB tmpfs in a private mount
# namespace, as root) all exit 2 with one line on stderr and the command
# not run. When writing fails at the end all the same (the directory is
# removed, or the disk fills up, while the command runs), the profile is
# saved as $TMPDIR/sqlprof-PID.db, stderr says so and record exits 4.
. "$(dirname "$0")/lib.sh"
need_prog counts
cd "$TMP" || exit 1

# early OUT WHAT [RUNNER...]: record -o OUT refused before running.
early() {
	local out=$1 what=$2 rc
	shift 2
	rm -f "$TMP/ran"
	"$@" "$SQLPROF" record -o "$out" -- sh -c ': >"$1"; exec "$0"' "$PROGS/counts" "$TMP/ran" \
		>out 2>err
	rc=$?
	[ "$rc" = 2 ] || fail "$what: exit $rc, expected 2: $(head -3 err)"
	[ "$(wc -l <err)" = 1 ] || fail "$what: expected one line on stderr: $(cat err)"
	[ ! -e "$TMP/ran" ] || fail "$what: the command ran although -o cannot be written"
	echo "ok: $what -> $(cat err)"
}

early "$TMP/nodir/p.db" "missing directory"
[ ! -e "$TMP/nodir" ] || fail "the missing directory was created"
early /proc/sqlprof-test.db "read-only file system"

# As an unprivileged user (root may write anywhere): a read-only directory
# and a read-only profile.
nobody=65534
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
	setpriv --reuid=$nobody --regid=$nobody --clear-groups test -x "$SQLPROF"; then
	as_nobody=(setpriv --reuid=$nobody --regid=$nobody --clear-groups)
	chmod 0711 "$TMP"
	mkdir "$TMP/ro" "$TMP/rw" && chown $nobody:$nobody "$TMP/ro" "$TMP/rw"
	chmod 0555 "$TMP/ro"
	early "$TMP/ro/p.db" "read-only directory" "${as_nobody[@]}"
	"${as_nobody[@]}" "$SQLPROF" record -q -o "$TMP/rw/p.db" -- "$PROGS/counts" >/dev/null 2>&1
	[ -s "$TMP/rw/p.db" ] || fail "no profile written as nobody"
	chmod 0444 "$TMP/rw/p.db"
	cp "$TMP/rw/p.db" "$TMP/p.orig"
	early "$TMP/rw/p.db" "read-only profile" "${as_nobody[@]}"
	cmp -s "$TMP/rw/p.db" "$TMP/p.orig" || fail "the read-only profile changed"
elif [ "$(id -u)" != 0 ]; then
	mkdir "$TMP/ro" && chmod 0555 "$TMP/ro"
	early "$TMP/ro/p.db" "read-only directory"
	"$SQLPROF" record -q -o "$TMP/p.db" -- "$PROGS/counts" >/dev/null 2>&1
	chmod 0444 "$TMP/p.db"
	early "$TMP/p.db" "read-only profile"
else
	not_checked "the read-only directory and file cases (cannot run as an unprivileged user)"
fi

# Writing fails at the end: the profile is saved in $TMPDIR.
mkdir alt gone
TMPDIR=$TMP/alt "$SQLPROF" record -o "$TMP/gone/p.db" -- \
	sh -c '"$0" >/dev/null; rm -rf "$1"' "$PROGS/counts" "$TMP/gone" >out 2>err
rc=$?
[ "$rc" = 4 ] || fail "directory removed during the run: exit $rc, expected 4: $(cat err)"
saved=$(ls alt/sqlprof-*.db 2>/dev/null | head -1)
[ -n "$saved" ] || fail "directory removed during the run: no profile in \$TMPDIR: $(cat err)"
grep -qF "$saved" err || fail "stderr does not name $saved: $(cat err)"
report_json "$saved" saved.json
expect saved.json -q stmt 'SELECT a FROM t WHERE a = ?' count=1000
[ "$(stat -c %a "$saved")" = 600 ] || fail "saved profile mode $(stat -c %a "$saved")"
echo "ok: directory removed during the run -> $(grep saved err)"

# A full disk, as root in a private mount namespace with a small tmpfs.
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
	mkdir small
	# shellcheck disable=SC2016
	timeout "$HANG_S" unshare -m bash -c '
		mount -t tmpfs -o size=64k tmpfs small || exit 77
		head -c 1M /dev/zero >small/fill 2>/dev/null
		rm -f ran
		"$0" record -o small/p.db -- sh -c ": >ran; exec \"\$0\"" "$1" >out 2>err
		echo "full: $? $([ -e ran ] && echo ran)" >full.rc
		rm -f small/fill
		TMPDIR=$PWD/alt "$0" record -o small/p.db --rate 1 -- \
			sh -c "\"\$0\" >/dev/null; head -c 1M /dev/zero >small/fill 2>/dev/null; exit 0" \
			"$1" >out2 2>err2
		echo "filled: $?" >>full.rc
		umount small' "$SQLPROF" "$PROGS/counts"
	case $? in
	77) not_checked "the full-disk cases (cannot mount a tmpfs)" ;;
	0)
		[ "$(head -1 full.rc)" = "full: 2 " ] || fail "full disk before the run: $(cat full.rc err)"
		[ "$(wc -l <err)" = 1 ] || fail "full disk: expected one line: $(cat err)"
		echo "ok: full disk before the run -> $(cat err)"
		[ "$(sed -n 2p full.rc)" = "filled: 4" ] || fail "disk filled during the run: $(cat full.rc err2)"
		saved=$(grep -o "$TMP/alt/sqlprof-[0-9]*\.db" err2 | head -1)
		[ -n "$saved" ] && [ -s "$saved" ] || fail "disk filled during the run: not saved: $(cat err2)"
		report_json "$saved" full.json
		echo "ok: disk filled during the run -> $(grep saved err2)"
		;;
	*) fail "full-disk case failed: $(cat full.rc err err2 2>/dev/null)" ;;
	esac
else
	not_checked "the full-disk cases (need root and unshare -m)"
fi
exit 0
