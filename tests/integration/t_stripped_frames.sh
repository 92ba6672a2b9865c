#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_stripped_frames.sh - issue 26: a program without debug info or symbols
# (a stripped copy of tests/progs/multisite at --rate 1: 2000 executions
# from site_a, 500 site_b, 300 site_c, 1 from main, 4 x 300 from worker
# threads). Every printed frame without a source file says where it is,
# MODULE+0xOFF: `report --stacks`, JSON sites, folded, SVG, speedscope,
# HTML, CSV (before: `?? (??:0) [ms_s]` in --stacks, `?? (ms_s)` merged in
# folded/SVG, `"name":"??"` in speedscope). `--skip ms_s+0xOFF` skips
# exactly that frame: site_a's 2000 go to the frame of main that called it
# (addr2line of the unstripped build). Skipping the whole module never
# credits libc's start code: all 4001 unattributed (before: 2801 to
# `__libc_start_call_main`, 1200 to `start_thread`).
. "$(dirname "$0")/lib.sh"
need_prog multisite
command -v strip >/dev/null && command -v addr2line >/dev/null || skip "binutils (strip, addr2line) not installed"

cd "$TMP" || exit 1
strip -o ms_s "$PROGS/multisite" || fail "strip failed"
"$SQLPROF" record -q --rate 1 -o s.db -- ./ms_s >/dev/null 2>rec.err || fail "record: $(cat rec.err)"

fn_at() { # OFFSET (hex, a return address): the function addr2line gives pc-1 in the unstripped build
	addr2line -f -e "$PROGS/multisite" "$(printf '0x%x' $(($1 - 1)))" | head -1
}

# --stacks: every frame of ms_s says its offset, none is ?? (??:0)
"$SQLPROF" report --stacks s.db >stacks.txt || fail "report --stacks"
sed 's/^/    /' stacks.txt | head -24
! grep -q '(??:0)' stacks.txt || fail "--stacks prints '(??:0)': $(grep -m1 '(??:0)' stacks.txt)"
n=$(grep -cE '^ +#[0-9]+ +\?\? \(ms_s\+0x[0-9a-f]+\) \[ms_s\]$' stacks.txt)
[ "$n" -ge 10 ] || fail "$n '?? (ms_s+0x...)' frames in --stacks, expected at least 10"

# the site of site_a's 2000
site2000() { # FILE: the offset of the site with 2000 executions at ?? (ms_s+0x...)
	sed -nE 's/.*-> 2000 execs, .* at \?\? \(ms_s\+(0x[0-9a-f]+)\) .*/\1/p' "$1"
}
off_a=$(site2000 stacks.txt)
[ -n "$off_a" ] || fail "no site with 2000 executions at ?? (ms_s+0x...)"
[ "$(fn_at "$off_a")" = site_a ] || fail "2000 executions at $off_a, which is $(fn_at "$off_a"), not site_a"

# JSON: the site's offset
report_json s.db s.json
"$PYTHON" - s.json "$off_a" <<'PY' || fail "JSON: site_a's site has no offset $off_a"
import json, sys
sites = [s for q in json.load(open(sys.argv[1]))["queries"] for s in q["sites"]]
sys.exit(0 if any(s.get("offset") == int(sys.argv[2], 16) and s["est_count"] == 2000
                  for s in sites) else 1)
PY

# every export
for f in folded svg speedscope html csv chrome; do
	"$SQLPROF" export -f $f -o "out.$f" s.db 2>err || fail "export -f $f: $(cat err)"
done
for f in folded svg speedscope html; do
	grep -q '?? (ms_s+0x[0-9a-f]*)' "out.$f" || fail "export -f $f names no frame ?? (ms_s+0x...)"
	! grep -q '?? (ms_s)' "out.$f" || fail "export -f $f has a frame ?? (ms_s) without offset"
	! grep -q '(??:0)' "out.$f" || fail "export -f $f has ?? (??:0)"
done
grep -q "?? (ms_s+$off_a);SELECT ? \* ? " out.folded || fail "folded: no leaf frame ?? (ms_s+$off_a)"
"$PYTHON" - out.speedscope <<'PY' || fail "speedscope: frames of ms_s without offsets"
import json, sys
fr = json.load(open(sys.argv[1]))["shared"]["frames"]
ms = [f["name"] for f in fr if f.get("file", "").endswith("/ms_s")]
sys.exit(0 if len(ms) >= 5 and all(n.startswith("?? (ms_s+0x") for n in ms) else 1)
PY
head -1 out.csv | grep -q ',offset$' || fail "CSV header has no offset column"
grep -q ",${off_a}\$" out.csv || fail "CSV: no site row with offset $off_a"
grep -q '"__libc_start\|start_thread' out.chrome && fail "chrome: a site in libc's start code"

# --skip MODULE+0xOFF: site_a's frame passed over, its caller (main) credited
"$SQLPROF" report --skip "ms_s+$off_a" s.db >skip1.txt || fail "report --skip ms_s+$off_a"
grep -q -- "at ?? (ms_s+$off_a)" skip1.txt && fail "--skip ms_s+$off_a: still a site"
off_m=$(site2000 skip1.txt)
[ -n "$off_m" ] && [ "$(fn_at "$off_m")" = main ] ||
	fail "--skip ms_s+$off_a: the 2000 went to '$off_m' ($(fn_at "${off_m:-0}")), not main: $(cat skip1.txt)"
echo "    site_a at ms_s+$off_a; skipped: main at ms_s+$off_m"
# the same by the module's path and a pattern
"$SQLPROF" report --skip "*/ms_s+0x${off_a#0x}" s.db | grep -q -- "-> 2000 execs, .* at ?? (ms_s+$off_m)" ||
	fail "--skip PATH+0xOFF does not match"

# skipping the whole module: unattributed, never libc's start code
for pat in '*ms_s*' ms_s; do
	"$SQLPROF" report --skip "$pat" s.db >skipall.txt || fail "report --skip $pat"
	grep -q -- '-> 4001 execs, .* at (unattributed) \[4001 samples\]' skipall.txt ||
		fail "--skip '$pat': $(grep -- '->' skipall.txt)"
	"$SQLPROF" report --format json --skip "$pat" s.db >skipall.json || fail "report --format json --skip"
	"$PYTHON" - skipall.json <<'PY' || fail "--skip '$pat': JSON sites not all unattributed"
import json, sys
sites = [s for q in json.load(open(sys.argv[1]))["queries"] for s in q["sites"]]
sys.exit(0 if sites and all(s.get("unattributed") for s in sites) else 1)
PY
done
exit 0
