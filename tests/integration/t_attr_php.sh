#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_php.sh - issue 26: a PHP program using PDO and ext/sqlite3
# (Debian's php8.2 CLI; tests/fixtures/interp/php_app, in a project
# folder) is attributed to its own lines in src/Repo.php, with default
# options and at --rate 1: every execution of each query at the line
# marked in Repo.php, module "php" (before: at `?? (pdo_sqlite.so+0x5eea)`
# and `?? (sqlite3.so+...)`); the PHP frames sqlprof read for
# `SELECT bt()` through PDO and through SQLite3 equal PHP's own
# debug_backtrace() taken inside that query (a SQL function); a Composer
# vendor/ package between the user's code and PDO is passed over; output
# unchanged; SQLPROF_PY_FRAMES=0 gives the native site back; a wrong
# layout (SQLPROF_PHP_EG_OFFSET) is caught, warned about once, harmless;
# `php -r` code is a user frame ("Command line code:1"), no warning.
. "$(dirname "$0")/lib.sh"

command -v php >/dev/null || skip "php not installed (scripts/install-deps.sh: php-cli)"
php -r 'exit(class_exists("PDO") && in_array("sqlite", PDO::getAvailableDrivers()) && class_exists("SQLite3") ? 0 : 1);' ||
	skip "php has no pdo_sqlite or sqlite3 extension (php-sqlite3)"
ver=$(php -r 'echo PHP_MAJOR_VERSION . "." . PHP_MINOR_VERSION . (PHP_ZTS ? " ZTS" : "");')
[ "$ver" = "8.2" ] || skip "php $ver: sqlprof reads the frames of PHP 8.2 (non-ZTS) only"

app="$TMP/my project/site"
mkdir -p "$(dirname "$app")"
cp -r "$ITDIR/../fixtures/interp/php_app" "$app"
repo="$app/src/Repo.php"
N=60
specs=("INSERT INTO posts(title) VALUES (?)=$N@add"
	"SELECT count(*) FROM posts WHERE title = ?=$((N / 2))@count"
	"INSERT INTO log(n) VALUES (?)=$N@log"
	"[exec] CREATE TABLE posts(id integer PRIMARY KEY, title text)=1@setup"
	"[exec] CREATE TABLE log(n integer)=1@s3setup"
	"SELECT bt() AS via_pdo=1@btpdo"
	"[exec] SELECT bt() AS via_sqlite3=1@bts3"
	"SELECT title FROM posts WHERE id = ?=$N@vendor")

php "$app/index.php" "$TMP/plain.sqlite" $N "$TMP/bp0.json" "$TMP/bs0.json" >"$TMP/plain.out" 2>&1 ||
	fail "php without sqlprof: $(cat "$TMP/plain.out")"
n=0
for opts in "" "--rate 1"; do
	n=$((n + 1))
	echo "== record $opts"
	# shellcheck disable=SC2086
	"$SQLPROF" record -q $opts -o "$TMP/php$n.db" -- php "$app/index.php" "$TMP/php$n.sqlite" $N \
		"$TMP/bp$n.json" "$TMP/bs$n.json" >"$TMP/php$n.out" 2>"$TMP/php$n.err" ||
		fail "sqlprof record $opts exited $?: $(cat "$TMP/php$n.err")"
	same_file "output under sqlprof $opts" "$TMP/plain.out" "$TMP/php$n.out"
	[ -s "$TMP/php$n.err" ] && fail "record $opts warned: $(cat "$TMP/php$n.err")"
	report_json "$TMP/php$n.db" "$TMP/php$n.json"
	"$PYTHON" "$ITDIR/interp_check.py" sites "$TMP/php$n.json" php "$repo" "${specs[@]}" ||
		fail "record $opts: sites (above)"
	"$PYTHON" "$ITDIR/interp_check.py" oracle "$TMP/php$n.db" php 'SELECT bt() AS via_pdo' \
		"$TMP/bp$n.json" || fail "record $opts: PDO: PHP frames differ from debug_backtrace (above)"
	"$PYTHON" "$ITDIR/interp_check.py" oracle "$TMP/php$n.db" php \
		'[exec] SELECT bt() AS via_sqlite3' "$TMP/bs$n.json" ||
		fail "record $opts: SQLite3: PHP frames differ from debug_backtrace (above)"
done

# PHP frames off: the site is the extension's native frame again
SQLPROF_PY_FRAMES=0 "$SQLPROF" record -q --rate 1 -o "$TMP/off.db" -- php "$app/index.php" \
	"$TMP/off.sqlite" $N "$TMP/bpoff.json" "$TMP/bsoff.json" >"$TMP/off.out" 2>&1 ||
	fail "record, frames off"
"$SQLPROF" report "$TMP/off.db" >"$TMP/off.txt" || fail "report, frames off"
grep -A1 'INSERT INTO posts(title)' "$TMP/off.txt" | grep -q 'pdo_sqlite.so' ||
	fail "frames off: the INSERT's site is not pdo_sqlite's: $(grep -A1 'INSERT INTO posts' "$TMP/off.txt")"

# a wrong layout (current_execute_data read at another offset of
# executor_globals) is caught by the first stacks' check against the
# engine: one warning, native sites, the program's output and counts
# unchanged, never a crash
for off in 0 8 480 496 1000; do
	rm -f "$TMP/sk.sqlite"*
	SQLPROF_PHP_EG_OFFSET=$off "$SQLPROF" record --rate 1 -o "$TMP/sk$off.db" -- php "$app/index.php" \
		"$TMP/sk.sqlite" $N "$TMP/bpsk.json" "$TMP/bssk.json" >"$TMP/sk.out" 2>"$TMP/sk.err" ||
		fail "offset $off: record exited $?: $(cat "$TMP/sk.err")"
	same_file "offset $off: output" "$TMP/plain.out" "$TMP/sk.out"
	[ "$(grep -c "could not read their interpreter's frames" "$TMP/sk.err")" = 1 ] ||
		fail "offset $off: no warning: $(cat "$TMP/sk.err")"
	"$SQLPROF" report "$TMP/sk$off.db" >"$TMP/sk.txt" || fail "offset $off: report"
	grep -A1 'INSERT INTO posts(title)' "$TMP/sk.txt" | grep -q "^ *$N .*INSERT INTO posts" ||
		fail "offset $off: INSERT not counted $N times: $(grep -A1 'INSERT INTO posts' "$TMP/sk.txt")"
	grep -A1 'INSERT INTO posts(title)' "$TMP/sk.txt" | grep -q 'pdo_sqlite.so' ||
		fail "offset $off: INSERT's site not native: $(grep -A1 'INSERT INTO posts' "$TMP/sk.txt")"
	echo "offset $off: caught, native sites, output unchanged"
done

# `php -r` code (an op_array of type ZEND_EVAL_CODE, as eval's): read as a
# user frame, at "Command line code:1", no warning (before: the check found
# no user frame where the engine had one and turned PHP frames off with
# "could not read their interpreter's frames")
"$SQLPROF" record --rate 1 -o "$TMP/r.db" -- php -r \
	'$d = new SQLite3(":memory:"); for ($i = 0; $i < 5; $i++) $d->query("SELECT $i");' \
	>"$TMP/r.out" 2>"$TMP/r.err" || fail "php -r: record exited $?: $(cat "$TMP/r.err")"
grep -q "interpreter's frames" "$TMP/r.err" && fail "php -r: $(cat "$TMP/r.err")"
"$SQLPROF" report "$TMP/r.db" >"$TMP/r.txt" || fail "php -r: report"
grep -q -- '-> 5 execs, .* at {main} (Command line code:1)' "$TMP/r.txt" ||
	fail "php -r: not at Command line code:1: $(cat "$TMP/r.txt")"
exit 0
