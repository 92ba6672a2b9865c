#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_record_full_tmpdir.sh - a full $TMPDIR costs sampled executions, not the
# profile. record keeps the sampled executions of the timeline (events) in
# a file in its private directory under $TMPDIR; here that is a 64 KiB
# tmpfs (as root, in a private mount namespace) and longrun runs 20000
# executions at --rate 1 (about 1.9 MB of events). The profile (written
# outside $TMPDIR) must be written where -o says, with the exact count of
# 20000, the events that did not fit counted in meta.events_dropped (the
# events table and events_dropped add up to every sampled execution that
# reached record), a warning saying so, and record exiting 5 as longrun
# does. Before: "cannot write p.db: profile: reading back sampled
# executions: No space left on device", the profile not at -o but saved
# as ./sqlprof-PID.db, exit 4.
. "$(dirname "$0")/lib.sh"
need_prog longrun
[ "$(id -u)" = 0 ] || skip "needs root (mount a tmpfs)"
unshare -m true 2>/dev/null || skip "unshare -m not permitted"
command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
cd "$TMP" || exit 1
mkdir small

# shellcheck disable=SC2016
timeout "$HANG_S" unshare -m bash -c '
	mount -t tmpfs -o size=64k tmpfs small || exit 77
	TMPDIR=$PWD/small "$0" record --rate 1 -o "$PWD/p.db" -- "$1" 20000 >out 2>err
	echo "$?" >rc
	umount small' "$SQLPROF" "$PROGS/longrun"
case $? in
77) skip "cannot mount a tmpfs" ;;
0) ;;
*) fail "the test's namespace failed: $(cat err 2>/dev/null)" ;;
esac
rc=$(cat rc)
[ "$rc" = 5 ] || fail "record exited $rc, expected longrun's 5: $(cat err)"
[ -s p.db ] || fail "no profile at -o: $(cat err)"
report_json p.db p.json
expect p.json -q stmt 'SELECT ? * ? + ?' count=20000
ev=$(sqlite3 p.db "SELECT count(*) FROM events")
dropped=$(sqlite3 p.db "SELECT value FROM meta WHERE key='events_dropped'")
lost=$(sqlite3 p.db "SELECT value FROM meta WHERE key='lost'")
echo "events $ev, events_dropped $dropped, lost $lost"
[ "$dropped" -gt 0 ] || fail "nothing counted as dropped (events $ev)"
# every EXEC event of the 20000 executions: in the table, dropped, or lost
# on the way (counted as lost)
[ $((ev + dropped)) -le 20000 ] || fail "events $ev + dropped $dropped > 20000"
[ $((ev + dropped + lost)) -ge 20000 ] || fail "events $ev + dropped $dropped + lost $lost < 20000"
grep -q "sampled executions dropped from the timeline.*No space left on device" err ||
	fail "no warning about the dropped events: $(cat err)"
grep -q "reading back" err && fail "the profile was not written normally: $(cat err)"
echo "ok: $(grep -c . err) lines on stderr:"
sed 's/^/    /' err
exit 0
