#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_valgrind.sh - valgrind memcheck on the CLI: `sqlprof record` of
# a small program (counts, at --rate 1 so stacks are symbolized) and
# `sqlprof report` of that profile in every format and grouping, plus
# `sqlprof report` of a damaged profile. No invalid read or write, no use
# of uninitialised values, no definite or indirect leak (valgrind exits 9
# on any). Only the CLI runs under valgrind; the profiled program runs
# normally (no --trace-children).
. "$(dirname "$0")/lib.sh"
need_prog counts
command -v valgrind >/dev/null || skip "valgrind not installed (scripts/install-deps.sh)"
if ldd "$SQLPROF" 2>/dev/null | grep -q -E 'lib(a|t)san'; then
	skip "$SQLPROF is built with ASan or TSan, which valgrind cannot run (use a plain build)"
fi
VG=(valgrind -q --error-exitcode=9 --leak-check=full --show-leak-kinds=definite,indirect
	--errors-for-leak-kinds=definite,indirect --track-origins=yes)
errors=0

# vg NAME WANT_RC ARGS...: run sqlprof ARGS under memcheck.
vg() {
	local name=$1 want=$2 rc
	shift 2
	"${VG[@]}" --log-file="$TMP/vg.$name.log" "$SQLPROF" "$@" >"$TMP/vg.$name.out" 2>"$TMP/vg.$name.err"
	rc=$?
	if [ "$rc" -ne "$want" ] || [ -s "$TMP/vg.$name.log" ]; then
		echo "FAIL: sqlprof $* under valgrind exited $rc (expected $want):" >&2
		head -40 "$TMP/vg.$name.log" "$TMP/vg.$name.err" | sed 's/^/    /' >&2
		errors=$((errors + 1))
	else
		echo "ok: sqlprof $*"
	fi
}

vg record 3 record -q --rate 1 -o "$TMP/p.db" -- "$PROGS/counts"
[ -s "$TMP/p.db" ] || fail "no profile written under valgrind"
vg table 0 report "$TMP/p.db"
vg json 0 report --format json --stacks "$TMP/p.db"
vg csv 0 report --format csv "$TMP/p.db"
vg site 0 report --by site --stacks --skip 'x*' "$TMP/p.db"
vg function 0 report --by function --format json "$TMP/p.db"
head -c 20000 "$TMP/p.db" >"$TMP/cut.db"
vg damaged 3 report "$TMP/cut.db"
[ "$errors" -eq 0 ] || fail "$errors valgrind run(s) failed"
exit 0
