#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The doctor's duplicate rule with the bound values hashed from the
# statement's parameter array (the start-up probe's layout: preload/
# sp_probe.h), and with the fallback forced (SQLPROF_PARAMS=2: the
# sqlite3_expanded_sql text). tests/progs/params_cases at --rate 1:
# - repeat (text, integer, blob and real, the same 200 times): flagged by
#   both ways, the layout handed over by record or probed by the process;
# - distinct (one integer differs), typed (1, '1', 1.0, x'31', NULL, '',
#   x'', zeroblob(0) with distinct companions), long (5000-byte texts
#   differing in their last bytes): not flagged by either way;
# - near (200 distinct reals all "0.3" to 15 digits): not flagged with the
#   array (distinct values: it is the way in use), flagged with the text,
#   which cannot tell them apart (what every run did before: the text was
#   the only way);
# - none (a statement without parameters, in turn with one with distinct
#   values): the first flagged, the second not.
# The values are not in the profile.
. "$(dirname "$0")/lib.sh"
need_prog params_cases

# dup CASE [ENV...]: the case's duplicates row "samples|repeats|top"
dup() {
	local c=$1
	shift
	env "$@" "$SQLPROF" record -q --rate 1 -o "$TMP/$c.db" -- "$PROGS/params_cases" "$c" \
		>"$TMP/out" || fail "record $c $*"
	[ "$(cat "$TMP/out")" = ok ] || fail "$c: output changed: $(cat "$TMP/out")"
	"$SQLPROF" report "$TMP/$c.db" | sed -n '/# query doctor/,$p' >"$TMP/doc" || fail "report $c"
	sqlite3 "$TMP/$c.db" "SELECT samples || '|' || repeats || '|' || top FROM duplicates"
}
flagged() { grep -q '^duplicate ' "$TMP/doc"; }

ok_repeat=
for way in "SQLPROF_PARAMS=1" "SQLPROF_PARAMS=2"; do
	d=$(dup repeat "$way")
	ok_repeat="$ok_repeat ${way#SQLPROF_}: $d"
	flagged || fail "$way: repeated values not flagged ($d): $(cat "$TMP/doc")"
	IFS='|' read -r s r top <<<"$d"
	[ "$s" -ge 10 ] && [ "$r" = $((s - 1)) ] && [ "$top" = "$s" ] ||
		fail "$way: repeat: $d (want all but the first drawn execution repeating one set)"
	! grep -q 'customer-' "$TMP/repeat.db" || fail "a bound value is in the profile"
	# a statement without parameters is its text: every run repeats it
	dup none "$way" >/dev/null
	grep -q '^duplicate   SELECT ? + ? AS answer$' "$TMP/doc" ||
		fail "$way: the statement without parameters not flagged: $(cat "$TMP/doc")"
	[ "$(grep -c '^duplicate' "$TMP/doc")" = 1 ] || fail "$way: none: $(cat "$TMP/doc")"
	for c in distinct typed long; do
		d=$(dup "$c" "$way")
		! flagged || fail "$way: $c flagged ($d): $(cat "$TMP/doc")"
		IFS='|' read -r s r top <<<"$d"
		[ "$s" -ge 10 ] && [ "$r" = 0 ] || fail "$way: $c: $d (want no repeat)"
	done
done

# the array: 200 distinct reals
d=$(dup near)
! flagged || fail "near reals flagged: the text way is in use ($d)"
IFS='|' read -r s r top <<<"$d"
[ "$r" = 0 ] || fail "near: $d"
# the text cannot tell them apart
d=$(dup near SQLPROF_PARAMS=2)
flagged || fail "near reals not flagged with SQLPROF_PARAMS=2 ($d): is the fallback used?"

# the process's own probe: no layout handed over, or one for another file
for e in "-u SQLPROF_PARAMS_LAYOUT" "SQLPROF_PARAMS_LAYOUT=128:56:0:8:16:20:1:4:8:2:10:400:1:1"; do
	# shellcheck disable=SC2086
	"$SQLPROF" record -q --rate 1 -o "$TMP/own.db" -- env $e "$PROGS/params_cases" near \
		>/dev/null || fail "record ($e)"
	r=$(sqlite3 "$TMP/own.db" "SELECT repeats FROM duplicates")
	[ "$r" = 0 ] || fail "own probe ($e): near reals repeat ($r): the text way is in use"
	"$SQLPROF" record -q --rate 1 -o "$TMP/own.db" -- env $e "$PROGS/params_cases" repeat \
		>/dev/null || fail "record ($e)"
	d=$(sqlite3 "$TMP/own.db" "SELECT samples || '|' || repeats FROM duplicates")
	IFS='|' read -r s r <<<"$d"
	[ "$r" = $((s - 1)) ] || fail "own probe ($e): repeat: $d"
done
echo "ok: repeats flagged by both ways (samples|repeats|top:$ok_repeat), distinct, typed and long values not;" \
	"near reals apart with the array, alike with the text"
