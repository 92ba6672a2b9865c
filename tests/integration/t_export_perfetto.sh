#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_export_perfetto.sh - the Perfetto export decodes with `protoc
# --decode_raw` (Debian's protobuf-compiler), for the fixture profile and
# for a real recording (tests/progs/counts at --rate 1, with an exec and
# its nested statements): every packet is Trace.packet (field 1), there are
# as many slice begins as ends and as events in the profile, and the
# process and thread descriptors are there. The field-by-field decoding
# and nesting checks are in tests/check_export.c.
. "$(dirname "$0")/lib.sh"

command -v protoc >/dev/null || skip "protoc not installed (apt-get install protobuf-compiler)"
command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
need_prog counts
cd "$TMP" || exit 1
SQLPROF=$SQLPROF "$ITDIR/../golden/export/mkfixture.sh" f.db || fail "mkfixture.sh failed"
"$SQLPROF" record -q --rate 1 -o c.db -- "$PROGS/counts" >/dev/null 2>&1
[ -s c.db ] || fail "recording counts failed"
for p in f c; do
	"$SQLPROF" export -f perfetto -o "$p.pftrace" "$p.db" || fail "export perfetto $p"
	protoc --decode_raw <"$p.pftrace" >"$p.txt" 2>err || fail "protoc --decode_raw $p: $(cat err)"
	n=$(sqlite3 "$p.db" "SELECT COUNT(*) FROM events")
	begins=$(grep -c '^    9: 1$' "$p.txt")
	ends=$(grep -c '^    9: 2$' "$p.txt")
	[ "$begins" = "$n" ] && [ "$ends" = "$n" ] ||
		fail "$p: $begins begins, $ends ends, $n events"
	grep -v '^1 {$' "$p.txt" | grep -q '^[^ }]' && fail "$p: top-level field other than 1"
	grep -q '^      6: "' "$p.txt" || fail "$p: no process descriptor"
	grep -q '^    4 {$' "$p.txt" || fail "$p: no thread descriptor"
	echo "$p: $(grep -c '^1 {$' "$p.txt") packets, $n slices"
done
exit 0
