#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_record_libpath.sh - sqlprof installed where the path has a space or a
# colon, which LD_PRELOAD cannot carry (the loader splits it there): the
# build copied to "$TMP/with space/" and "$TMP/with:colon/". record must
# refuse before running the command (exit 2, one line naming LD_PRELOAD,
# the command not run, no profile) - before, the loader's errors reached
# the program's stderr and nothing was profiled. With SQLPROF_LIB set to a
# symbolic link whose path has neither, the same copy records (counts:
# its 1000 executions).
. "$(dirname "$0")/lib.sh"
need_prog counts
for d in "with space" "with:colon"; do
	root=$TMP/$d
	mkdir -p "$root/bin" "$root/lib"
	cp "$SQLPROF" "$root/bin/sqlprof"
	cp "$BUILD/lib/libsqlprof.so" "$root/lib/libsqlprof.so"
	"$root/bin/sqlprof" record -o "$TMP/p.db" -- sh -c "touch '$TMP/ran'; '$PROGS/counts'" \
		>"$TMP/out" 2>"$TMP/err"
	rc=$?
	echo "installed in '$d': exit $rc, stderr: $(cat "$TMP/err")"
	[ "$rc" = 2 ] || fail "'$d': record exited $rc, expected 2"
	[ ! -e "$TMP/ran" ] || fail "'$d': the command ran"
	[ ! -e "$TMP/p.db" ] || fail "'$d': a profile was written"
	[ "$(wc -l <"$TMP/err")" = 1 ] && grep -q "LD_PRELOAD" "$TMP/err" ||
		fail "'$d': expected one line about LD_PRELOAD, got: $(cat "$TMP/err")"
	! grep -q "ld.so" "$TMP/err" "$TMP/out" || fail "'$d': the loader's errors showed"

	ln -sf "$root/lib/libsqlprof.so" "$TMP/libsqlprof-link.so"
	SQLPROF_LIB=$TMP/libsqlprof-link.so "$root/bin/sqlprof" record -q -o "$TMP/p.db" -- \
		"$PROGS/counts" >"$TMP/out" 2>"$TMP/err"
	rc=$?
	[ "$rc" = 3 ] || fail "'$d' with SQLPROF_LIB: counts exited $rc (expected its 3): $(cat "$TMP/err")"
	! grep -q "ld.so" "$TMP/err" || fail "'$d' with SQLPROF_LIB: the loader's errors showed: $(cat "$TMP/err")"
	report_json "$TMP/p.db" "$TMP/r.json"
	expect "$TMP/r.json" -t lost=0 -q stmt "SELECT a FROM t WHERE a = ?" count=1000
	rm -f "$TMP/p.db" "$TMP/r.json"
done
exit 0
