#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_embedded_sqlite.sh - SQLite compiled into the program (issue 26):
# tests/fixtures/embed_app.c built as `gcc embed_app.c sqlite3.c` from
# the amalgamation, so no sqlite3_* call ever reaches an interposer.
# Before: 0 executions and the generic "never loaded libsqlite3" note.
#   1. symbols kept: output and exit status (3) as without sqlprof; the
#      counts exact (300 inserts, 150 selects, one scan of 300 rows) and
#      each at its own file:line (the EMBED_*_SITE lines), no estimate;
#   2. the same binary stripped: output and status unchanged, and exactly
#      one warning, naming the binary and saying it is stripped;
#   2b. a stripped program carrying only SQLite's header string (a
#      file-type detector, PHP's fileinfo.so): no warning;
#   3. a build that calls sqlite3_config itself: left alone (its call
#      still succeeds: "config 0"), one warning naming it;
#   4. preloaded without a collector: output and status unchanged;
#   5. a plugin with SQLite compiled in and hidden (a version script keeps
#      only plugin_run), dlopen'd by tests/progs/bundled_host: hooked when
#      dlopen returns, its 300 inserts counted exactly at their line
#      (before: 0 and no word).
# The amalgamation: $SQLPROF_AMALGAMATION (a directory with sqlite3.c and
# sqlite3.h), else the one npm's `sqlite3` package ships
# (deps/sqlite-autoconf-*.tar.gz), fetched with `npm pack` into
# $BUILD/amalgamation, where its object is kept for the next run (its
# first compile takes minutes on a loaded machine: hence the cap).
# test-timeout: 600
. "$(dirname "$0")/lib.sh"
command -v gcc >/dev/null || skip "gcc not installed"
src=$(cd "$(dirname "$0")/../fixtures" && pwd)/embed_app.c
need_amalgamation
am=$AMALG_DIR obj=$AMALG_OBJ
cd "$TMP" || exit 1
gcc -O1 -g -I"$am" -o app "$src" "$obj" -lm -lpthread -ldl || fail "building app"
nm app | grep -q ' T sqlite3_step$' || fail "app has no sqlite3_step symbol"
nm -D app | grep -q sqlite3_ && fail "app exports sqlite3_* dynamically"
strip -o app.stripped app || fail "strip"
gcc -O1 -g -DEMBED_CONFIG -I"$am" -o app.config "$src" "$obj" -lm -lpthread -ldl ||
	fail "building app.config"

run_same() { # name binary: run plain and under record, same output and status
	local name=$1 bin=$2 rc0 rc1
	"./$bin" 300 >"$name.plain" 2>&1
	rc0=$?
	"$SQLPROF" record -o "$name.db" -- "./$bin" 300 >"$name.out" 2>"$name.err"
	rc1=$?
	[ "$rc0" = 3 ] || fail "$name: exit status $rc0 without sqlprof (expected 3): $(cat "$name.plain")"
	[ "$rc1" = 3 ] || fail "$name: exit status $rc1 under sqlprof record: $(cat "$name.out" "$name.err")"
	same_file "$name: output" "$name.plain" "$name.out"
}

# 1. symbols kept: exact counts, each at its line
run_same sym app
report_json sym.db sym.json
expect sym.json -t executions=452 \
	-q stmt 'INSERT INTO t VALUES (?, ?)' count=300 \
	-q stmt 'SELECT b FROM t WHERE a = ?' count=150 rows=150 \
	-q stmt 'SELECT a, b FROM t ORDER BY b' count=1 rows=300
ins=$(grep -n EMBED_INSERT_SITE "$src" | cut -d: -f1)
sel=$(grep -n EMBED_SELECT_SITE "$src" | cut -d: -f1)
"$PYTHON" - sym.json "$ins" "$sel" <<'PY' || fail "sites: $(cat sym.err)"
import json, sys
d = json.load(open(sys.argv[1]))
want = {'INSERT INTO t VALUES (?, ?)': (int(sys.argv[2]), 300),
        'SELECT b FROM t WHERE a = ?': (int(sys.argv[3]), 150)}
bad = 0
for q in d['queries']:
    if q['fingerprint'] not in want:
        continue
    line, n = want[q['fingerprint']]
    s = q['sites']
    ok = len(s) == 1 and s[0]['file'].endswith('embed_app.c') and s[0]['line'] == line \
        and s[0]['est_count'] == n
    print(q['fingerprint'], '->', [(x['function'], x['file'].split('/')[-1], x['line'], x['est_count']) for x in s])
    if not ok:
        print('  expected one site embed_app.c:%d with %d executions' % (line, n))
        bad = 1
sys.exit(bad)
PY
grep -q "warning" sym.err && fail "symbols kept: unexpected warning: $(cat sym.err)"
"$SQLPROF" report sym.db | grep -q "300 execs, .* at insert_rows (embed_app.c:$ins)" ||
	fail "report: the insert is not shown exact at embed_app.c:$ins: $("$SQLPROF" report sym.db)"

# 2. stripped: one warning naming it
run_same stripped app.stripped
n=$(grep -c "warning" stripped.err)
[ "$n" = 1 ] || fail "stripped: $n warnings, not 1: $(cat stripped.err)"
grep -q "warning: .*/app.stripped has SQLite compiled in and no symbol table (stripped)" stripped.err ||
	fail "stripped: the warning does not name the binary and the cause: $(cat stripped.err)"
echo "stripped: $(grep warning stripped.err)"

# 2b. a stripped program that only carries SQLite's header string (a
# file-type detector: PHP's fileinfo.so, libmagic): no SQLite, no warning
# (before: "has SQLite compiled in and no symbol table")
printf '#include <stdio.h>\nconst char magic_of_sqlite[] = "SQLite format 3";\nint main(void) { return puts(magic_of_sqlite) < 0; }\n' >detect.c
gcc -O1 -o detect detect.c && strip detect || fail "building detect"
"$SQLPROF" record -o detect.db -- ./detect >detect.out 2>detect.err || fail "record detect: $(cat detect.err)"
grep -q "has SQLite compiled in" detect.err && fail "a program carrying only SQLite's header string is said to have SQLite compiled in: $(cat detect.err)"

# 3. a program that configures SQLite itself: left alone, its call works
run_same config app.config
grep -q '^config 0$' config.out || fail "config: sqlite3_config failed under sqlprof: $(cat config.out)"
n=$(grep -c "warning" config.err)
[ "$n" = 1 ] || fail "config: $n warnings, not 1: $(cat config.err)"
grep -q "app.config has SQLite compiled in and calls sqlite3_config" config.err ||
	fail "config: no warning naming it: $(cat config.err)"

# 4. preloaded without a collector
LD_PRELOAD=$BUILD/lib/libsqlprof.so ./app 300 >nocoll.out 2>&1
rc=$?
[ "$rc" = 3 ] || fail "without a collector: exit status $rc"
same_file "without a collector: output" sym.plain nocoll.out
echo "symbols kept: 452 executions, exact at embed_app.c:$ins and :$sel"

# 5. a dlopen'd plugin with its SQLite compiled in and not exported
need_prog bundled_host
psrc=$(dirname "$src")/bundled_plugin.c
printf '{ global: plugin_run; local: *; };\n' >plug.map
gcc -shared -fPIC -O1 -g -DPLUGIN_NAME='"emb"' -I"$am" -o plug_emb.so "$psrc" "$obj" \
	-Wl,--version-script=plug.map -lm -lpthread || fail "building plug_emb.so"
nm -D plug_emb.so | grep -q sqlite3_ && fail "plug_emb.so exports sqlite3_*"
"$PROGS/bundled_host" 300 "$TMP/plug_emb.so" >plug.plain 2>&1 || fail "plugin: $(cat plug.plain)"
"$SQLPROF" record -o plug.db -- "$PROGS/bundled_host" 300 "$TMP/plug_emb.so" >plug.out 2>plug.err ||
	fail "plugin under sqlprof: $(cat plug.out plug.err)"
same_file "plugin: output" plug.plain plug.out
grep -q warning plug.err && fail "plugin: unexpected warning: $(cat plug.err)"
report_json plug.db plug.json
expect plug.json -q stmt 'INSERT INTO temb VALUES (?)' count=300 \
	-q stmt 'SELECT x FROM temb' count=1 rows=300
"$SQLPROF" report plug.db | grep -q "300 execs, .* at plugin_run (bundled_plugin.c:[1-9]" ||
	fail "plugin: the insert is not at its line: $("$SQLPROF" report plug.db)"
echo "plugin: $(cat plug.out); 300 inserts counted at their line"
exit 0
