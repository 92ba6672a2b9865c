#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_embedded_go.sh - a Go program with SQLite compiled in through cgo
# (tests/fixtures/embed_go, linked with the amalgamation's object as
# upstream go-sqlite3 builds it), ending with os.Exit(4): a raw exit_group,
# neither libc's exit nor _exit, so no goodbye. Under record: its output
# and exit status 4 unchanged, its 300 inserts counted exactly at their C
# line (EMBED_GO_SITE) (before: 0 executions), and the process is not
# reported dead. Skips without Go (apt-get install golang-go).
# test-timeout: 600
. "$(dirname "$0")/lib.sh"
command -v go >/dev/null || skip "go not installed (apt-get install golang-go)"
command -v gcc >/dev/null || skip "gcc not installed"
need_amalgamation
cp -r "$(dirname "$0")/../fixtures/embed_go" "$TMP/src" || fail "copying the fixture"
cd "$TMP/src" || exit 1
export GOCACHE=$BUILD/gocache GOPATH=$TMP/gopath GOFLAGS=-mod=mod GOTOOLCHAIN=local
# an archive: cgo passes its flags to more than one link, an object would
# be defined twice
ar rcs "$TMP/libsqlite3emb.a" "$AMALG_OBJ" || fail "ar"
CGO_ENABLED=1 CGO_CFLAGS="-I$AMALG_DIR -g -O1" CGO_LDFLAGS="-L$TMP -lsqlite3emb -lm -ldl -lpthread" \
	timeout 500 go build -o "$TMP/embgo" . >"$TMP/build.log" 2>&1 || fail "go build: $(cat "$TMP/build.log")"
cd "$TMP" || exit 1
./embgo 300 >plain.out 2>&1
rc=$?
[ "$rc" = 4 ] || fail "exit status $rc without sqlprof (expected 4): $(cat plain.out)"
"$SQLPROF" record -o g.db -- ./embgo 300 >rec.out 2>rec.err
rc=$?
[ "$rc" = 4 ] || fail "exit status $rc under sqlprof: $(cat rec.out rec.err)"
same_file "output" plain.out rec.out
grep -q "warning" rec.err && fail "unexpected warning: $(cat rec.err)"
report_json g.db g.json
expect g.json -t died=[] -t exit_status=4 -q stmt 'INSERT INTO t VALUES (?)' count=300
line=$(grep -n "// EMBED_GO_SITE$" src/main.go | cut -d: -f1)
"$SQLPROF" report g.db | grep -q "300 execs, .* at insert (main.go:$line)" ||
	fail "the inserts are not at main.go:$line: $("$SQLPROF" report g.db)"
echo "go: $(cat rec.out); 300 inserts at main.go:$line; exit 4, not dead"
exit 0
