#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_attr_go_stack.sh - issue 26: a Go program's queries are at its own
# main.go lines. tests/fixtures/go_sqlite (database/sql + mattn/go-sqlite3,
# every query a cgo call whose C code runs past runtime.asmcgocall on the
# system stack) built twice: against Debian's go-sqlite3 (the system
# libsqlite3, the shims) and with the SQLite amalgamation compiled in
# (embed.c's hooks). Under record with default options: output and exit
# status 3 unchanged, not reported dead, 300 inserts and 100 counts
# exactly, at main.insert (main.go:GO_INSERT) and main.main
# (main.go:GO_SELECT) (before: the driver's C line, sqlite3.go:115, or
# cgo-gcc-prolog: the walk ended at runtime.asmcgocall); at --rate 1
# every sampled stack of both reaches that line. Skips without Go or
# Debian's go-sqlite3 (apt-get install golang-go
# golang-github-mattn-go-sqlite3-dev). A driver in GOPATH/src next to the
# program (GOPATH mode) is not told from the program's own code: the
# second build vendors it, as module-mode programs keep it in the module
# cache (GOPATH/pkg/mod/...@vX, check_inapp_go).
# test-timeout: 900
. "$(dirname "$0")/lib.sh"
command -v go >/dev/null || skip "go not installed (apt-get install golang-go)"
DRV=/usr/share/gocode/src/github.com/mattn/go-sqlite3
[ -f "$DRV/sqlite3.go" ] || skip "go-sqlite3 not installed (apt-get install golang-github-mattn-go-sqlite3-dev)"
command -v sqlite3 >/dev/null || skip "the sqlite3 shell not installed"
export GOCACHE=$BUILD/gocache GO111MODULE=off GOFLAGS= GOPROXY=off GOTOOLCHAIN=local
FIX=$(cd "$ITDIR/../fixtures/go_sqlite" && pwd) || fail "no fixture"
ins=$(grep -n "// GO_INSERT$" "$FIX/main.go" | cut -d: -f1)
sel=$(grep -n "// GO_SELECT$" "$FIX/main.go" | cut -d: -f1)
cd "$TMP" || exit 1

# check NAME BINARY: record it with default options, then at --rate 1
check() {
	local name=$1 bin=$2 rc out
	"$bin" >"$name.plain" 2>&1
	rc=$?
	[ "$rc" = 3 ] || fail "$name: exit status $rc without sqlprof (expected 3): $(cat "$name.plain")"
	"$SQLPROF" record -o "$name.db" -- "$bin" >"$name.out" 2>"$name.err"
	rc=$?
	[ "$rc" = 3 ] || fail "$name: exit status $rc under sqlprof: $(cat "$name.out" "$name.err")"
	same_file "$name: output" "$name.plain" "$name.out"
	grep -q "warning" "$name.err" && fail "$name: unexpected warning: $(cat "$name.err")"
	report_json "$name.db" "$name.json"
	expect "$name.json" -t died=[] -t exit_status=3 \
		-q stmt 'INSERT INTO t VALUES (?)' count=300 \
		-q stmt 'SELECT count(*) FROM t WHERE x < ?' count=100
	"$SQLPROF" report "$name.db" >"$name.rep" || fail "$name: report"
	grep -q "300 execs, .* at main.insert (main.go:$ins)" "$name.rep" ||
		fail "$name: the inserts are not at main.insert (main.go:$ins): $(cat "$name.rep")"
	grep -q "100 execs, .* at main.main (main.go:$sel)" "$name.rep" ||
		fail "$name: the counts are not at main.main (main.go:$sel): $(cat "$name.rep")"
	# every stack at --rate 1: each execution's own walk reaches the line
	"$SQLPROF" record -q --rate 1 -o "$name.r1.db" -- "$bin" >/dev/null 2>&1
	[ $? = 3 ] || fail "$name: --rate 1 run failed"
	"$SQLPROF" report -f json "$name.r1.db" >"$name.r1.json" || fail "$name: report --rate 1"
	"$PYTHON" - "$name.r1.json" "$ins" "$sel" <<'PY' || fail "$name: --rate 1 sites"
import json, sys
d = json.load(open(sys.argv[1]))
want = {"INSERT INTO t VALUES (?)": ("main.insert", int(sys.argv[2]), 300),
        "SELECT count(*) FROM t WHERE x < ?": ("main.main", int(sys.argv[3]), 100)}
bad = 0
for q in d["queries"]:
    if q["fingerprint"] not in want:
        continue
    fn, line, n = want[q["fingerprint"]]
    sites = [(s["function"], s["file"].rsplit("/", 1)[-1], s["line"], s["samples"]) for s in q["sites"]]
    if q["samples"] != n or sites != [(fn, "main.go", line, n)]:
        print("  %s: %d samples at %s (expected %d at %s main.go:%d)" % (q["fingerprint"], q["samples"], sites, n, fn, line))
        bad = 1
print("  %s unattributed" % d["unattributed"])
sys.exit(bad or d["unattributed"] != 0)
PY
	echo "$name: $(cat "$name.out"); 300 at main.insert (main.go:$ins), 100 at main.main (main.go:$sel); exit 3, not dead"
}

# 1. Debian's go-sqlite3: the system libsqlite3
mkdir -p gopath/src/goapp && cp "$FIX/main.go" gopath/src/goapp/ || fail "copying the fixture"
(cd gopath/src/goapp && GOPATH=$TMP/gopath:/usr/share/gocode timeout 600 go build -o "$TMP/goapp" .) \
	>build.log 2>&1 || fail "go build: $(cat build.log)"
check dynamic "$TMP/goapp"

# 2. the amalgamation compiled in, as upstream go-sqlite3 builds by default,
# from the program's vendor/ directory (offline: a copy of Debian's, its
# link line pointed at the amalgamation's object)
need_amalgamation
V=emb/src/goapp/vendor/github.com/mattn
mkdir -p "$V" && cp -r "$DRV" "$V/" && cp "$FIX/main.go" emb/src/goapp/ || fail "copying go-sqlite3"
chmod -R u+w emb
ar rcs "$V/go-sqlite3/libsqlite3emb.a" "$AMALG_OBJ" || fail "ar"
sed -i 's|^#cgo linux LDFLAGS: -lsqlite3$|#cgo linux LDFLAGS: -L${SRCDIR} -lsqlite3emb -lm -ldl -lpthread|' \
	"$V/go-sqlite3/sqlite3_libsqlite3.go"
grep -q lsqlite3emb "$V/go-sqlite3/sqlite3_libsqlite3.go" || fail "go-sqlite3's LDFLAGS line not found"
(cd emb/src/goapp && GOPATH=$TMP/emb CGO_CFLAGS="-I$AMALG_DIR -g -O2" timeout 600 go build -o "$TMP/goemb" .) \
	>build-emb.log 2>&1 || fail "go build (amalgamation): $(cat build-emb.log)"
ldd "$TMP/goemb" | grep -q libsqlite3 && fail "goemb links libsqlite3: $(ldd "$TMP/goemb")"
check embedded "$TMP/goemb"
exit 0
