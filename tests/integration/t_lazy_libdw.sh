#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_lazy_libdw.sh - record loads libdw (and libelf, libz, liblzma, libbz2
# with it) only when a stack has to be symbolized (symbolizer/dwload.c):
# not for a command that runs no SQLite (no stack), not when every frame
# comes from the symbolization cache; it does when a frame is symbolized
# (the frames have their names then). With libdw missing at that point
# (bound over with an empty file in a mount namespace of our own), record
# still runs the command, keeps its exit status, writes the profile with
# frames "??" and says once why: "cannot load libdw.so.1". (Before: the
# CLI was linked with libdw, so every command loaded it at start.)
. "$(dirname "$0")/lib.sh"
need_prog counts
cd "$TMP" || exit 1

# loaded NAME: 0 when libdw.so.1 was loaded in record's process of run
# NAME (LD_DEBUG=files writes one file per process into NAME.ld.PID; the
# command's processes never load it, they get only the preload)
loaded() {
	ls "$1".ld.* >/dev/null 2>&1 || fail "$1: no LD_DEBUG output (LD_DEBUG_OUTPUT ignored?)"
	grep -l 'file=libdw\.so' "$1".ld.* >/dev/null 2>&1
}
# rec NAME STATUS CMD...: record CMD into NAME.db, which must exit STATUS.
# --rate 0 --slow-ms 0: each text's first execution and the failing one
# have a stack (a few records, in the ring however late the collector
# reads), so both records of counts hold the same stacks on a loaded
# machine; at --rate 1 a late collector lost the last records (the
# failing INSERT's stack) and the warm record met a frame the cache had
# not seen (t_symcache had the same flake).
rec() {
	local n=$1 want=$2
	shift 2
	LD_DEBUG=files LD_DEBUG_OUTPUT="$TMP/$n.ld" "$SQLPROF" record --rate 0 --slow-ms 0 -o "$n.db" -- "$@" \
		>"$n.out" 2>"$n.err"
	local rc=$?
	[ "$rc" = "$want" ] || fail "record $n exited $rc, not $want: $(tail -5 "$n.err")"
	[ -s "$n.db" ] || fail "record $n wrote no profile: $(tail -5 "$n.err")"
}
frames() {
	"$PYTHON" - "$1.db" <<'PY' || fail "frames of $1"
import sqlite3, sys
for r in sorted(sqlite3.connect(sys.argv[1]).execute("SELECT DISTINCT module, function FROM frames")):
    print("|".join(map(str, r)))
PY
}

# no SQLite, no stack: libdw is not loaded
rec none 0 sh -c 'exit 0'
loaded none && fail "record of a command without SQLite loaded libdw"

# a stack, symbolized: loaded, names in the frames (counts exits 3)
rec cold 3 "$PROGS/counts"
loaded cold || fail "record symbolized a stack without loading libdw?"
frames cold >cold.txt
grep -q '/counts|main$' cold.txt || fail "no main in the frames of counts: $(cat cold.txt)"

# the same stacks again: the cache answers, libdw is not loaded
rec warm 3 "$PROGS/counts"
loaded warm && fail "record loaded libdw although the cache had every frame"
frames warm >warm.txt
same_file "frames from the cache" cold.txt warm.txt

# libdw missing when a stack is symbolized
dw=$(ldconfig -p 2>/dev/null | awk '/libdw\.so\.1 / { print $NF; exit }')
[ -n "$dw" ] && dw=$(readlink -f "$dw")
if [ -z "$dw" ] || [ ! -f "$dw" ]; then
	not_checked "record without libdw (libdw.so.1 not found by ldconfig)"
elif ! unshare -m true 2>/dev/null; then
	not_checked "record without libdw (unshare -m not permitted here)"
else
	: >empty.so
	SQLPROF_SYMCACHE=0 unshare -m sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh \
		"$TMP/empty.so" "$dw" "$SQLPROF" record --rate 0 --slow-ms 0 -o gone.db -- "$PROGS/counts" \
		>gone.out 2>gone.err
	rc=$?
	[ "$rc" = 3 ] || fail "record without libdw exited $rc, not counts' 3: $(tail -5 gone.err)"
	[ -s gone.db ] || fail "record without libdw wrote no profile: $(cat gone.err)"
	grep -q "warning: cannot load libdw\.so\.1" gone.err ||
		fail "no clear warning without libdw: $(cat gone.err)"
	[ "$(grep -c 'cannot load libdw' gone.err)" = 1 ] || fail "the warning more than once: $(cat gone.err)"
	frames gone >gone.txt
	grep -q '|??$' gone.txt || fail "frames named without libdw: $(cat gone.txt)"
	"$PROGS/counts" >bare.out 2>/dev/null
	same_file "the command's output without libdw" bare.out gone.out
fi
echo "ok: libdw loaded only to symbolize"
