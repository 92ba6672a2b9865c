#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_profile_mode.sh - the profile is created with mode 0600 (it holds SQL
# text, which may contain secrets), whatever the umask; an existing world-
# readable file at the output path does not keep its mode either.
. "$(dirname "$0")/lib.sh"
need_prog counts

for mask in 022 000; do
	out=$TMP/p-$mask.db
	(umask $mask && "$SQLPROF" record -q -o "$out" -- "$PROGS/counts" >/dev/null 2>&1)
	[ -f "$out" ] || fail "umask $mask: no profile written"
	mode=$(stat -c %a "$out")
	[ "$mode" = 600 ] || fail "umask $mask: profile mode $mode, expected 600"
done

# Overwriting an existing file that is readable by everyone.
out=$TMP/existing.db
: >"$out" && chmod 0644 "$out"
"$SQLPROF" record -q -o "$out" -- "$PROGS/counts" >/dev/null 2>&1
mode=$(stat -c %a "$out")
[ "$mode" = 600 ] || fail "overwritten profile has mode $mode, expected 600"
"$SQLPROF" report --format json "$out" >/dev/null || fail "overwritten profile is not readable"
exit 0
