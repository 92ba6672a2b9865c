#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_modules.sh - a site may be unknown, never wrong, when code comes
# and goes (issue "Attribution that is never wrong", items 1-5), at
# --rate 1, with plugins and hosts built here (tests/fixtures/modplug.c,
# modhost.c):
#   1. plug_a.so dlclose'd, plug_c.so (another layout) dlopen'd at the
#      same address: each one's 100 queries at its own function (before:
#      A's credited to C's pad_fn);
#   2. the same with plug_b.so, A's layout: B's queries at plug_b in
#      plug_b.so, which is in the module map (before: at plug_a, B never
#      in the map, the stack never sent again);
#   3. a non-PIE program exec'ing another of the same layout (the same
#      addresses, as under setarch -R): each image's queries at its own
#      function (before: the old image's);
#   4. a program without build-id replaced on disk before the recording
#      ends: its site is "??" in its module, not the new file's lines;
#   5. dlopen("./plug.so") after chdir, with another plug.so in the
#      collector's directory: the right file's function (before: the
#      decoy's, or ??).
# Cases 1-3 need the second image where the first was; when the loader put
# it elsewhere the sites are still checked, then the test skips (77),
# naming the case whose precondition failed (before: a note, and a pass).
. "$(dirname "$0")/lib.sh"
unchecked=()
command -v gcc >/dev/null || skip "gcc not installed"
fx=$(cd "$(dirname "$0")/../fixtures" && pwd)
cd "$TMP" || exit 1
cc=(gcc -O1 -g -fno-omit-frame-pointer -D_GNU_SOURCE)
"${cc[@]}" -shared -fPIC -DFN=plug_a -o plug_a.so "$fx/modplug.c" -lsqlite3 || fail "build plug_a"
"${cc[@]}" -shared -fPIC -DFN=plug_b -o plug_b.so "$fx/modplug.c" -lsqlite3 || fail "build plug_b"
"${cc[@]}" -shared -fPIC -DFN=plug_c -DPAD -o plug_c.so "$fx/modplug.c" -lsqlite3 || fail "build plug_c"
"${cc[@]}" -o modhost "$fx/modhost.c" -lsqlite3 -ldl || fail "build modhost"

sites() { # profile, fingerprint -> one "function module count" line per site
	"$SQLPROF" report --format json "$1" | "$PYTHON" -c '
import json, os, sys
for q in json.load(sys.stdin)["queries"]:
    if q["fingerprint"] == sys.argv[1]:
        for s in sorted(q["sites"], key=lambda s: (s["function"], s["module"] or "")):
            print(s["function"], os.path.basename(s["module"] or "??"), round(s["est_count"]))
' "$2"
}
expect_sites() { # case, profile, fingerprint, expected lines
	local got
	got=$(sites "$2" "$3")
	[ "$got" = "$4" ] || fail "$1: sites
$got
expected
$4"
	echo "$1: $(echo "$got" | tr '\n' ';')"
}
same_address() { # output of modhost: both libraries at one address?
	[ "$(awk '/ at 0x/ {print $3}' "$1" | sort -u | wc -l)" = 1 ]
}

# 1 and 2: unload, then load at the same address
for second in c b; do
	"$SQLPROF" record -q --rate 1 -o s$second.db -- ./modhost 100 "$TMP/plug_a.so:plug_a" \
		"$TMP/plug_$second.so:plug_$second" >s$second.out 2>s$second.err ||
		fail "modhost a $second: $(cat s$second.err)"
	if ! same_address s$second.out; then
		unchecked+=("plug_$second.so was not loaded where plug_a.so was ($(tr '\n' ' ' <s$second.out))")
	fi
	expect_sites "a then $second" s$second.db 'SELECT ? * ?' "plug_a plug_a.so 100
plug_$second plug_$second.so 100"
done
[ "$(sqlite3 sb.db "SELECT count(*) FROM modules WHERE path LIKE '%plug_b.so'")" -gt 0 ] ||
	fail "plug_b.so is not in the module map"

# 3: exec to a program of the same layout at the same (non-PIE) addresses
"${cc[@]}" -no-pie -DFN=host_a -o exec_a "$fx/modhost.c" -lsqlite3 -ldl || fail "build exec_a"
"${cc[@]}" -no-pie -DFN=host_b -o exec_b "$fx/modhost.c" -lsqlite3 -ldl || fail "build exec_b"
[ "$(nm exec_a | awk '/ host_a$/ {print $1}')" = "$(nm exec_b | awk '/ host_b$/ {print $1}')" ] ||
	unchecked+=("host_a and host_b are not at one address (-no-pie)")
"$SQLPROF" record -q --rate 1 -o ex.db -- ./exec_a -x 100 ./exec_b -x 50 /bin/true >ex.out 2>ex.err ||
	fail "exec_a: $(cat ex.err)"
expect_sites "exec, same layout" ex.db 'SELECT ? * ?' "host_a exec_a 100
host_b exec_b 50"

# 4: replaced on disk, no build-id
"${cc[@]}" -Wl,--build-id=none -DFN=host_r -o mod_r "$fx/modhost.c" -lsqlite3 -ldl || fail "build mod_r"
"${cc[@]}" -O0 -Wl,--build-id=none -DFN=host_s -DPAD -o mod_r2 "$fx/modhost.c" "$fx/modplug.c" \
	-lsqlite3 -ldl 2>/dev/null || "${cc[@]}" -O0 -Wl,--build-id=none -DFN=host_s -o mod_r2 \
	"$fx/modhost.c" -lsqlite3 -ldl || fail "build mod_r2"
"$SQLPROF" record -q --rate 1 -o rp.db -- ./mod_r -r 100 ./mod_r2 >rp.out 2>rp.err ||
	fail "mod_r: $(cat rp.err)"
expect_sites "replaced on disk" rp.db 'SELECT ? * ?' "?? mod_r 100"

# 5: a relative dlopen after chdir, a decoy where the collector runs
mkdir sub && cp plug_a.so sub/plug.so && cp plug_c.so plug.so
"$SQLPROF" record -q --rate 1 -o rel.db -- ./modhost -C "$TMP/sub" 100 ./plug.so:plug_a \
	>rel.out 2>rel.err || fail "modhost -C: $(cat rel.err)"
expect_sites "relative dlopen" rel.db 'SELECT ? * ?' "plug_a plug.so 100"
[ "$(sqlite3 rel.db "SELECT count(*) FROM modules WHERE path = '$TMP/sub/plug.so'")" -gt 0 ] ||
	fail "relative dlopen: the module map has not $TMP/sub/plug.so: $(sqlite3 rel.db 'SELECT path FROM modules')"
[ ${#unchecked[@]} -eq 0 ] || skip "sites right, but the same-address cases not checked: $(IFS=';'; echo "${unchecked[*]}")"
echo "cases 1-3 ran with each second image at the first one's address"
exit 0
