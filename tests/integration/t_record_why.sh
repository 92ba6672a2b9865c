#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_record_why.sh - when the profile is empty, record names the cause it
# saw, not "a static or setuid binary" for everything: a program a shell
# could not find (exit 127), --no-follow, a program that never loaded
# libsqlite3, a statically linked command; a plugin opened with
# RTLD_DEEPBIND (tests/fixtures/deepbind) is profiled, with no warning
# (its slots are patched: preload/deepbind.c). A missing command itself: exit 127, nothing written.
. "$(dirname "$0")/lib.sh"
need_prog counts
FX="$ITDIR/../fixtures/deepbind"

# why LINE: the warning line(s) of record's stderr in $TMP/err
check() {
	local what=$1 want=$2

	sed "s|^|    $what: |" "$TMP/err"
	grep -q -- "$want" "$TMP/err" || fail "$what: no '$want' on stderr"
	! grep -q "static or setuid" "$TMP/err" || fail "$what: still blames a static or setuid binary"
}

"$SQLPROF" record -o "$TMP/a.db" -- sh -c ./nosuch-program >/dev/null 2>"$TMP/err"
check "sh -c ./nosuch" "no SQLite execution reached it: the command exited 127: a program it tried to run was not found"

"$SQLPROF" record --no-follow -o "$TMP/b.db" -- sh -c "$PROGS/counts" >/dev/null 2>"$TMP/err"
check "--no-follow" "no SQLite execution reached it: --no-follow: only the command itself was profiled"

"$SQLPROF" record -o "$TMP/c.db" -- /bin/true >/dev/null 2>"$TMP/err"
check "/bin/true" "1 process ran with the profiler but no SQLite execution reached it: it never loaded libsqlite3"

if printf 'int main(void) { return 0; }\n' >"$TMP/st.c" && cc -static -o "$TMP/static" "$TMP/st.c" 2>/dev/null; then
	"$SQLPROF" record -o "$TMP/d.db" -- "$TMP/static" >/dev/null 2>"$TMP/err"
	check "static" "no process connected: libsqlprof.so was not loaded ($TMP/static is statically linked"
	# static-pie (gcc -static-pie; Go's -buildmode=pie without cgo): a
	# dynamic section but no loader. Before: "is dynamically linked: its
	# environment was replaced or LD_PRELOAD cleared"
	if cc -static-pie -o "$TMP/spie" "$TMP/st.c" 2>/dev/null; then
		"$SQLPROF" record -o "$TMP/d2.db" -- "$TMP/spie" >/dev/null 2>"$TMP/err"
		check "static-pie" "no process connected: libsqlprof.so was not loaded ($TMP/spie is statically linked"
	else
		echo "note: no static-pie support here; that case is not run"
	fi
else
	not_checked "no static libc here: the static case"
fi

cc -shared -fPIC -o "$TMP/plug.so" "$FX/plug.c" -lsqlite3 && cc -o "$TMP/host" "$FX/host.c" -ldl ||
	fail "cannot build the deepbind fixture"
"$SQLPROF" record -o "$TMP/e.db" -- "$TMP/host" "$TMP/plug.so" >"$TMP/out" 2>"$TMP/err"
grep -q "^rows 50$" "$TMP/out" || fail "host: $(cat "$TMP/out")"
n=$(sqlite3 "$TMP/e.db" "SELECT sum(count) FROM queries WHERE fingerprint = 'SELECT ?'")
[ "$n" = 50 ] || fail "plugin without RTLD_DEEPBIND: $n executions, expected 50"
! grep -q warning "$TMP/err" || fail "a warning for the profiled plugin: $(cat "$TMP/err")"
"$SQLPROF" record -o "$TMP/f.db" -- "$TMP/host" "$TMP/plug.so" deepbind >"$TMP/out" 2>"$TMP/err"
grep -q "^rows 50$" "$TMP/out" || fail "host deepbind: $(cat "$TMP/out")"
# an RTLD_DEEPBIND plugin is profiled now (preload/deepbind.c patches its
# slots): no warning, its 50 executions counted
n=$(sqlite3 "$TMP/f.db" "SELECT coalesce(sum(count), 0) FROM queries WHERE kind = 'stmt'")
[ "$n" -ge 50 ] || fail "RTLD_DEEPBIND plugin: $n executions"
! grep -q "warning" "$TMP/err" || fail "RTLD_DEEPBIND: a warning for a profiled plugin: $(cat "$TMP/err")"

"$SQLPROF" record -o "$TMP/g.db" -- ./nosuch-program >/dev/null 2>"$TMP/err"
rc=$?
[ "$rc" = 127 ] || fail "a missing command: exit $rc, expected 127"
[ ! -e "$TMP/g.db" ] || fail "a missing command wrote a profile"
check "./nosuch" "cannot run ./nosuch-program: No such file or directory"

# -q: none of it
"$SQLPROF" record -q -o "$TMP/h.db" -- "$TMP/host" "$TMP/plug.so" deepbind >/dev/null 2>"$TMP/err"
[ ! -s "$TMP/err" ] || fail "-q printed: $(cat "$TMP/err")"
exit 0
