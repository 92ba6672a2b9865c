#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_bundled_sqlite.sh - a plugin carrying its own SQLite (a copy of the
# system's libsqlite3 under another soname, loaded RTLD_LOCAL as vendored
# wheels and plugins are), next to a plugin linked with the system
# libsqlite3 and also loaded RTLD_LOCAL (as Python loads _sqlite3). Each
# plugin's calls must reach the library it would have bound to without
# sqlprof. Before: the bundled plugin alone got SQLITE_MISUSE (21) from
# sqlite3_open; with the system one loaded first, the program died of
# SIGSEGV (its open/prepare/step went to the system library, its
# sqlite3_column_* to its own copy).
#   1. system plugin, then bundled: output as without sqlprof; the system
#      library is profiled (its 300 inserts counted exactly), the bundled
#      one passed through, and record says so;
#   2. bundled alone: the only SQLite there is, so it is profiled;
#   3. bundled first, then the system one: output unchanged, the bundled
#      library (the first one called) profiled;
#   4. each of these with no collector (only LD_PRELOAD);
#   5. python3: its sqlite3 module, then the bundled plugin through ctypes
#      (RTLD_LOCAL): the module's 200 queries counted, the plugin works.
. "$(dirname "$0")/lib.sh"
need_prog bundled_host
command -v gcc >/dev/null || skip "gcc not installed"
src=$(cd "$(dirname "$0")/../fixtures" && pwd)/bundled_plugin.c
cd "$TMP" || exit 1
syslib=$(ldconfig -p | awk '/libsqlite3\.so\.0 .*x86-64/ {print $NF; exit}')
[ -n "$syslib" ] || skip "no libsqlite3.so.0 found by ldconfig"

# The bundled copy: the system library with its soname renamed in place
# (same length, so the ELF stays valid).
"$PYTHON" - "$syslib" <<'PY' || fail "could not make the renamed copy"
import sys
d = open(sys.argv[1], 'rb').read()
assert d.count(b'libsqlite3.so.0\0') == 1
open('libsqlite9.so.0', 'wb').write(d.replace(b'libsqlite3.so.0\0', b'libsqlite9.so.0\0'))
PY
gcc -shared -fPIC -O1 -g -DPLUGIN_NAME='"sys"' -o plug_sys.so "$src" -lsqlite3 ||
	fail "building plug_sys.so"
gcc -shared -fPIC -O1 -g -DPLUGIN_NAME='"own"' -o plug_own.so "$src" -L. -l:libsqlite9.so.0 \
	-Wl,-rpath,'$ORIGIN' || fail "building plug_own.so"
readelf -d plug_own.so | grep -q 'libsqlite9.so.0' || fail "plug_own.so does not need libsqlite9.so.0"

host=$PROGS/bundled_host
count_of() { # profile fingerprint -> total executions
	sqlite3 "$1" "SELECT coalesce(sum(count), 0) FROM queries WHERE fingerprint = '$2'"
}

run_case() { # name, plugins...
	local name=$1
	shift
	"$host" 300 "$@" >"$name.plain" 2>&1 || fail "$name without sqlprof: $(cat "$name.plain")"
	"$SQLPROF" record -o "$name.db" -- "$host" 300 "$@" >"$name.out" 2>"$name.err"
	rc=$?
	[ "$rc" = 0 ] || fail "$name under sqlprof exited $rc: $(cat "$name.out" "$name.err")"
	same_file "$name: output" "$name.plain" "$name.out"
	# only LD_PRELOAD, no collector
	LD_PRELOAD=$BUILD/lib/libsqlprof.so "$host" 300 "$@" >"$name.nocoll" 2>&1 ||
		fail "$name preloaded without a collector: $(cat "$name.nocoll")"
	same_file "$name: output without a collector" "$name.plain" "$name.nocoll"
	echo "$name: $(tr '\n' ' ' <"$name.out")"
}

run_case sys_own "$TMP/plug_sys.so" "$TMP/plug_own.so"
n=$(count_of sys_own.db 'INSERT INTO tsys VALUES (?)')
[ "$n" = 300 ] || fail "sys_own: the system plugin's insert counted $n, not 300"
n=$(count_of sys_own.db 'INSERT INTO town VALUES (?)')
[ "$n" = 0 ] || fail "sys_own: the bundled plugin's insert counted $n (it is passed through)"
grep -q "warning: 1 process called a second SQLite library, not profiled" sys_own.err ||
	fail "sys_own: no warning about the second library: $(cat sys_own.err)"
grep -q "statically" sys_own.err && fail "sys_own: the warning speaks of static linking: $(cat sys_own.err)"

run_case own "$TMP/plug_own.so"
n=$(count_of own.db 'INSERT INTO town VALUES (?)')
[ "$n" = 300 ] || fail "own: the bundled plugin's insert counted $n, not 300"
grep -q "statically\|second SQLite" own.err && fail "own: unexpected warning: $(cat own.err)"

run_case own_sys "$TMP/plug_own.so" "$TMP/plug_sys.so"
n=$(count_of own_sys.db 'INSERT INTO town VALUES (?)')
[ "$n" = 300 ] || fail "own_sys: the bundled plugin's insert counted $n, not 300"
n=$(count_of own_sys.db 'INSERT INTO tsys VALUES (?)')
[ "$n" = 0 ] || fail "own_sys: the system plugin's insert counted $n (it is passed through)"

command -v python3 >/dev/null || exit 0
cat >py.py <<'PY'
import ctypes, sqlite3, sys
c = sqlite3.connect(':memory:')
for i in range(200):
    c.execute('SELECT ? + 1', (i,)).fetchone()
lib = ctypes.CDLL(sys.argv[1])
buf = ctypes.create_string_buffer(256)
rc = lib.plugin_run(300, buf, 256)
print(rc, buf.value.decode())
PY
python3 py.py "$TMP/plug_own.so" >py.plain 2>&1 || fail "python without sqlprof: $(cat py.plain)"
"$SQLPROF" record -o py.db -- python3 py.py "$TMP/plug_own.so" >py.out 2>py.err ||
	fail "python under sqlprof: $(cat py.out py.err)"
same_file "python: output" py.plain py.out
n=$(count_of py.db 'SELECT ? + ?')
[ "$n" = 200 ] || fail "python: its sqlite3 module's query counted $n, not 200"
echo "python: $(cat py.out); module's query counted $n"
exit 0
