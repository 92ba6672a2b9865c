#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_go_line.sh - issue 26, item 4: never a wrong line. A cgo program
# (tests/fixtures/cgo, 200 executions through runtime.asmcgocall) at
# --rate 1: the innermost frame of every pc of the program in the profile
# has binutils' addr2line's file and line for pc-1, or no line at all
# (before: runtime.asmcgocall.abi0 at gcc_mmap.c:37, addr2line
# asm_amd64.s:844; the Go linker writes .debug_aranges for its gcc units
# only, and libdw took the unit of the arange before the pc). Skips
# without go (golang-go).
. "$(dirname "$0")/lib.sh"
command -v go >/dev/null || skip "go not installed (golang-go)"
command -v addr2line >/dev/null && command -v sqlite3 >/dev/null || skip "binutils or the sqlite3 shell not installed"
cp -r "$ITDIR/../fixtures/cgo" "$TMP/src" && cd "$TMP/src" || exit 1
export GOCACHE=$BUILD/gocache GOPATH=$TMP/gopath GOPROXY=off GOFLAGS=-mod=mod GOTOOLCHAIN=local
timeout 600 go build -o cgoapp . 2>build.err || fail "go build: $(cat build.err)"
"$SQLPROF" record -q --rate 1 -o g.db -- ./cgoapp >out 2>err || fail "record: $(cat err)"
grep -qx 'sum 20100' out || fail "cgoapp printed $(cat out)"

# each pc of cgoapp: its innermost frame's file and line, and the bias
sqlite3 -separator ' ' g.db "
	SELECT f.pc - COALESCE((SELECT bias FROM modules m WHERE m.pid = f.pid AND m.path = f.module
	                        AND m.lo <= f.pc AND f.pc < m.hi LIMIT 1), 0) - 1, f.file, f.line, f.function
	FROM frames f WHERE f.module LIKE '%/cgoapp' AND NOT EXISTS (
		SELECT 1 FROM frames g WHERE g.pid = f.pid AND g.stack_id = f.stack_id
		AND g.pc = f.pc AND g.idx < f.idx)
	GROUP BY f.pc ORDER BY f.pc" >pcs.txt || fail "reading the profile's frames"
[ -s pcs.txt ] || fail "no frame in cgoapp"
grep -q 'asmcgocall' pcs.txt || fail "no runtime.asmcgocall frame: $(cat pcs.txt)"
bad=0
while read -r addr file line fn; do
	want=$(addr2line -e cgoapp "$(printf '0x%x' "$addr")" | sed 's/ (discriminator [0-9]*)//')
	got="$(basename "$file"):$line"
	if [ "$line" = 0 ]; then
		echo "    $fn: no line (addr2line: $want)"
	elif [ "$got" = "$(basename "${want%:*}"):${want##*:}" ]; then
		echo "    $fn: $got (addr2line: $want)"
	else
		echo "FAIL: $fn at $file:$line, addr2line says $want"
		bad=1
	fi
done <pcs.txt
exit $bad
