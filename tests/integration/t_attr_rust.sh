#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_rust.sh - issue 26, item 3: Rust names demangled fully and
# --skip 'rusqlite::*' matching them.
# 1. tests/fixtures/rust/rust_names.c (gcc, no debug info): functions under
#    a legacy and a v0 Rust name with LLVM's ".llvm.NNN" suffix: sites
#    `rusqlite::statement::Statement::step` (70) and
#    `<rusqlite::Connection>::execute` (30); --skip 'rusqlite::*' gives main.
# 2. With rustc (PATH or ~/.cargo/bin; cargo has no network here, so no
#    crates): a stand-in for rusqlite compiled from a Cargo registry path
#    (tests/fixtures/rust/rusqlite.rs) and a program using it (main.rs),
#    -g, legacy and v0 mangling, --rate 1. By default the site is main.rs's
#    line (the crate and Rust's standard library are installed code):
#    CREATE 1, INSERT 120, SELECT 250, exact. --all-frames: the SELECT at
#    `<rusqlite::Statement as rusqlite::Exec>::exec_step`; no frame of
#    --stacks keeps a hash (::h0123...), a $LT$/$u20$ escape or a v0
#    `_R...` name; --all-frames --skip 'rusqlite::*': main.rs again.
# Before: `_$LT$rusqlite..Statement$u20$as$u20$rusqlite..Exec$GT$::exec_step::h0aff...`,
# std's v0 frames mangled, --skip 'rusqlite::*' matching neither.
. "$(dirname "$0")/lib.sh"
command -v gcc >/dev/null || skip "gcc not installed"
FIX=$(cd "$ITDIR/../fixtures/rust" && pwd)
cd "$TMP" || exit 1

# sites TABLE: the "-> N execs ... at SITE [" lines as "N SITE"
sites() {
	sed -nE 's/^ *-> ([0-9]+) execs?, .* at (.*) \[[0-9]+ samples?\]$/\1 \2/p' "$1"
}

gcc -O1 -g0 -o rn "$FIX/rust_names.c" -lsqlite3 || fail "building rust_names.c"
"$SQLPROF" record -q --rate 1 -o rn.db -- ./rn >rn.out 2>rn.err || fail "record rn: $(cat rn.err)"
"$SQLPROF" report rn.db >rn.txt || fail "report rn"
sites rn.txt | sed 's/^/    /'
sites rn.txt | grep -qx '70 rusqlite::statement::Statement::step (rn)' ||
	fail "legacy name with .llvm. suffix: $(sites rn.txt)"
sites rn.txt | grep -qx '30 <rusqlite::Connection>::execute (rn)' ||
	fail "v0 name with .llvm. suffix: $(sites rn.txt)"
"$SQLPROF" report --skip 'rusqlite::*' rn.db >rns.txt || fail "report --skip"
[ "$(sites rns.txt | sort)" = "$(printf '30 main (rn)\n70 main (rn)')" ] ||
	fail "--skip 'rusqlite::*': $(sites rns.txt)"

RUSTC=$(command -v rustc || echo "${CARGO_HOME:-$HOME/.cargo}/bin/rustc")
if ! [ -x "$RUSTC" ]; then
	echo "note: no rustc: the rustc-built program is not checked"
	exit 0
fi
echo "== $("$RUSTC" --version)"
R=$TMP/cargo-home/registry/src/index.crates.io-6f17d22bba15001f/rusqlite-0.31.0/src
mkdir -p "$R" app/src && cp "$FIX/rusqlite.rs" "$R/lib.rs" && cp "$FIX/main.rs" app/src/main.rs
line() { grep -n "// site: $1\$" app/src/main.rs | cut -d: -f1; }

# check REPORT.json MODE: the three queries' sites (see the header)
check() {
	"$PYTHON" - "$1" "$2" "$TMP/app/src/main.rs" "$(line create)" "$(line insert)" "$(line select)" <<'PY'
import json, sys
doc, mode, main_rs = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
want = {"CREATE TABLE t": (1, int(sys.argv[4])), "INSERT INTO t": (120, int(sys.argv[5])),
        "SELECT y FROM t": (250, int(sys.argv[6]))}
bad = []
for kw, (count, line) in want.items():
    qs = [q for q in doc["queries"] if q["fingerprint"].startswith(kw)]
    if len(qs) != 1:
        bad.append("%s: %d queries" % (kw, len(qs)))
        continue
    s = qs[0]["sites"]
    desc = ["%s (%s:%s) %s" % (x["function"], x["file"], x["line"], x["est_count"]) for x in s]
    print("    %-5s %-16s %s" % (mode, kw, "; ".join(desc)))
    if qs[0]["count"] != count or len(s) != 1 or s[0]["est_count"] != count:
        bad.append("%s: count %d, sites %s, expected %d at one site" % (kw, qs[0]["count"], desc, count))
        continue
    if mode == "all" and kw.startswith("SELECT"):
        if s[0]["function"] != "<rusqlite::Statement as rusqlite::Exec>::exec_step" or \
                not s[0]["file"].endswith("/rusqlite-0.31.0/src/lib.rs"):
            bad.append("--all-frames: %s at %s" % (kw, desc))
    elif mode != "all" and (s[0]["function"] != "main::main" or s[0]["file"] != main_rs
                            or s[0]["line"] != line):
        bad.append("%s: at %s, expected main::main at main.rs:%d" % (kw, desc, line))
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
}

rc=0
for mangling in legacy v0; do
	mkdir -p "$mangling"
	flags=(--edition 2021 -g -C opt-level=1) # legacy: rustc's default (naming it is unstable)
	[ "$mangling" = v0 ] && flags+=(-C symbol-mangling-version=v0)
	"$RUSTC" "${flags[@]}" --crate-type rlib --crate-name rusqlite "$R/lib.rs" \
		-o "$mangling/librusqlite.rlib" 2>"$mangling.err" &&
		"$RUSTC" "${flags[@]}" --extern "rusqlite=$mangling/librusqlite.rlib" app/src/main.rs \
			-o "app_$mangling" -lsqlite3 2>>"$mangling.err" || {
		# rustc before 1.59 has no stable v0 mangling
		[ "$mangling" = v0 ] && { echo "note: rustc cannot mangle v0: $(head -1 "$mangling.err")"; continue; }
		fail "rustc: $(cat "$mangling.err")"
	}
	"$SQLPROF" record -q --rate 1 -o "$mangling.db" -- "./app_$mangling" >"$mangling.out" 2>"$mangling.rec" ||
		fail "record app_$mangling: $(cat "$mangling.rec")"
	grep -qx 'rows=250' "$mangling.out" || fail "app_$mangling printed $(cat "$mangling.out")"
	report_json "$mangling.db" "$mangling.json"
	check "$mangling.json" "$mangling" || rc=1
	"$SQLPROF" report --format json --all-frames "$mangling.db" >"$mangling.all.json" || fail "report --all-frames"
	check "$mangling.all.json" all || rc=1
	"$SQLPROF" report --format json --all-frames --skip 'rusqlite::*' "$mangling.db" >"$mangling.skip.json" ||
		fail "report --skip"
	check "$mangling.skip.json" skip || rc=1
	"$SQLPROF" report --all-frames --stacks "$mangling.db" >"$mangling.stacks" || fail "report --stacks"
	mangled=$(grep -nE '::h[0-9a-f]{16}|\$(LT|GT|u20|u7b|u7d)\$| _R[A-Za-z0-9_]{8,}' "$mangling.stacks")
	n=$(grep -c '^ *#' "$mangling.stacks")
	if [ -n "$mangled" ]; then
		echo "FAIL: $mangling: frames not demangled in --stacks: $(echo "$mangled" | head -3)"
		rc=1
	elif [ "$n" -lt 20 ]; then
		echo "FAIL: $mangling: only $n frames in --stacks"
		rc=1
	else
		echo "    $mangling: $n frames in --stacks, all demangled"
	fi
done
exit $rc
