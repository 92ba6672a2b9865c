#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_ruby.sh - issue 26: an ActiveRecord program (Debian's Ruby 3.1,
# ruby-activerecord 6.1, ruby-sqlite3; tests/fixtures/interp/rb_app, in a
# project folder) is attributed to its own lines in lib/store.rb, with
# default options and at --rate 1: every execution of each query at the
# line marked in store.rb, module "ruby" (before: 100% at
# `?? (sqlite3_native.so+0x77fe)`); the JSON's library_site is
# ActiveRecord's or the driver's frame; the Ruby frames sqlprof read for
# `SELECT bt()` equal Ruby's own caller_locations taken inside that query
# (a SQL function); output unchanged; SQLPROF_PY_FRAMES=0 gives the
# native site back; 4 Ruby threads and a forked child (threads.rb) are
# attributed to their own line too.
. "$(dirname "$0")/lib.sh"

command -v ruby >/dev/null || skip "ruby not installed (scripts/install-deps.sh: ruby)"
ruby -e 'require "sqlite3"' 2>/dev/null || skip "ruby's sqlite3 gem missing (ruby-sqlite3)"
ruby -e 'require "active_record"' 2>/dev/null || skip "ActiveRecord missing (ruby-activerecord)"
native=$(ruby -e 'require "sqlite3"; puts $LOADED_FEATURES.grep(/sqlite3_native/).first')
ldd "$native" 2>/dev/null | grep -q 'libsqlite3\.so' ||
	skip "$native does not link libsqlite3.so dynamically"

app="$TMP/my project/shop"
mkdir -p "$(dirname "$app")"
cp -r "$ITDIR/../fixtures/interp/rb_app" "$app"
store="$app/lib/store.rb"
N=60
specs=('INSERT INTO "posts"("title", "n") VALUES (?, ?)='$N'@add'
	'SELECT count(*) FROM "posts" WHERE "posts"."title" = ?='$((N / 2))'@count'
	'UPDATE "posts" SET n = n + ? WHERE "posts"."n" = ?=1@bump'
	'SELECT bt()=1@bt')

ruby "$app/app.rb" "$TMP/plain.sqlite" $N "$TMP/bt0.json" >"$TMP/plain.out" 2>&1 ||
	fail "ruby without sqlprof: $(cat "$TMP/plain.out")"
n=0
for opts in "" "--rate 1"; do
	n=$((n + 1))
	echo "== record $opts"
	# shellcheck disable=SC2086
	"$SQLPROF" record -q $opts -o "$TMP/rb$n.db" -- ruby "$app/app.rb" "$TMP/rb$n.sqlite" $N \
		"$TMP/bt$n.json" >"$TMP/rb$n.out" 2>"$TMP/rb$n.err" ||
		fail "sqlprof record $opts exited $?: $(cat "$TMP/rb$n.err")"
	same_file "output under sqlprof $opts" "$TMP/plain.out" "$TMP/rb$n.out"
	[ -s "$TMP/rb$n.err" ] && fail "record $opts warned: $(cat "$TMP/rb$n.err")"
	report_json "$TMP/rb$n.db" "$TMP/rb$n.json"
	"$PYTHON" "$ITDIR/interp_check.py" sites "$TMP/rb$n.json" ruby "$store" "${specs[@]}" ||
		fail "record $opts: sites (above)"
	"$PYTHON" "$ITDIR/interp_check.py" oracle "$TMP/rb$n.db" ruby 'SELECT bt()' "$TMP/bt$n.json" ||
		fail "record $opts: Ruby frames differ from caller_locations (above)"
done

# the library site (JSON, --all-frames): ActiveRecord's or the driver's
"$PYTHON" - "$TMP/rb2.json" <<'PY' || fail "library_site (above)"
import json, sys
doc = json.load(open(sys.argv[1]))
q = [r for r in doc["queries"] if r["fingerprint"].startswith('INSERT INTO "posts"')][0]
lib = q["sites"][0].get("library_site") or {}
print("library_site:", lib)
sys.exit(0 if lib.get("module") == "ruby" and (lib.get("file") == "<cfunc>" or
         "/sqlite3/" in lib.get("file", "") or "active" in lib.get("file", "")) else 1)
PY

# Ruby frames off: the site is the driver's native frame again
SQLPROF_PY_FRAMES=0 "$SQLPROF" record -q --rate 1 -o "$TMP/off.db" -- ruby "$app/app.rb" \
	"$TMP/off.sqlite" $N "$TMP/btoff.json" >"$TMP/off.out" 2>&1 || fail "record, frames off"
"$SQLPROF" report "$TMP/off.db" >"$TMP/off.txt" || fail "report, frames off"
grep -q 'VALUES (?, ?)' "$TMP/off.txt" && grep -A1 'INSERT INTO "posts"' "$TMP/off.txt" | grep -q 'sqlite3_native.so' ||
	fail "frames off: the INSERT's site is not the driver's: $(grep -A1 'INSERT INTO "posts"' "$TMP/off.txt")"

# Ruby threads and a forked child (its own numbers, read again after fork)
mkdir -p "$TMP/thr"
"$SQLPROF" record -q --rate 1 -o "$TMP/thr.db" -- ruby "$app/threads.rb" "$TMP/thr" 50 \
	>"$TMP/thr.out" 2>"$TMP/thr.err" || fail "threads.rb: $(cat "$TMP/thr.err")"
grep -qx 'done 0' "$TMP/thr.out" || fail "threads.rb printed $(cat "$TMP/thr.out")"
report_json "$TMP/thr.db" "$TMP/thr.json"
"$PYTHON" "$ITDIR/interp_check.py" sites "$TMP/thr.json" ruby "$app/threads.rb" \
	'INSERT INTO t VALUES (?, ?)=200@thread' 'INSERT INTO c VALUES (?)=50@child' ||
	fail "threads.rb: sites (above)"
exit 0
