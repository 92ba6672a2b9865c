#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two checkouts of one program, built in different directories, have the
# same sites (issue 27, item 6): tests/progs/gate_app.c compiled in
# $TMP/main/app and in $TMP/pr/checkout/app; sites are compared by their
# file relative to each profile's source root (the common directory of
# its sites), so `diff` shows no site change and `check` passes (before:
# every site row vanished and came back new, by absolute path). A real
# change (the nplus1 mode) still shows per site, by relative path.
. "$(dirname "$0")/lib.sh"
command -v cc >/dev/null || skip "no C compiler (cc)"

for d in main/app pr/checkout/app; do
	mkdir -p "$TMP/$d"
	cp "$ITDIR/../progs/gate_app.c" "$TMP/$d/" || fail "copy gate_app.c"
	(cd "$TMP/$d" && cc -g -O1 -o gate_app gate_app.c -lsqlite3) || fail "build in $d"
done
"$SQLPROF" record -q -o "$TMP/base.db" -- "$TMP/main/app/gate_app" clean >/dev/null || fail "record base"
"$SQLPROF" record -q -o "$TMP/pr.db" -- "$TMP/pr/checkout/app/gate_app" clean >/dev/null || fail "record pr"
"$SQLPROF" record -q -o "$TMP/n1.db" -- "$TMP/pr/checkout/app/gate_app" nplus1 >/dev/null || fail "record nplus1"

"$SQLPROF" diff "$TMP/base.db" "$TMP/pr.db" >"$TMP/diff.txt" || fail "diff exited $?"
! grep -q 'gate_app.c' "$TMP/diff.txt" || fail "sites changed between checkouts: $(cat "$TMP/diff.txt")"
grep -q ' 0 new, 0 vanished, 0 changed' "$TMP/diff.txt" || fail "queries changed: $(head -3 "$TMP/diff.txt")"
"$SQLPROF" check --baseline "$TMP/base.db" "$TMP/pr.db" >"$TMP/check.txt"; rc=$?
[ "$rc" -eq 0 ] || fail "check across checkouts exited $rc: $(cat "$TMP/check.txt")"

"$SQLPROF" diff "$TMP/base.db" "$TMP/n1.db" >"$TMP/n1.txt" || fail "diff nplus1 exited $?"
grep -q '^[0-9.]* -> [0-9.]* (+[0-9]*.*order_total (gate_app.c:[0-9]*): SELECT sum(amount) FROM orders WHERE user_id = ?' "$TMP/n1.txt" ||
	fail "the N+1's site is not shown as more executions at order_total (gate_app.c): $(cat "$TMP/n1.txt")"
! grep -v '^# sqlprof diff' "$TMP/n1.txt" | grep -q "$TMP/" || fail "absolute paths in site rows: $(cat "$TMP/n1.txt")"
echo "ok: no site change across checkouts; a real change shows at gate_app.c"
