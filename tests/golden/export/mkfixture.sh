#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# mkfixture.sh OUT.db [EXTRA.sql...] - write the export fixture profile: an
# empty profile recorded by the current sqlprof (so its schema is current),
# then fixture.sql and any EXTRA files applied with the sqlite3 shell.
# Deterministic: no value of the result depends on the recording. Needs
# SQLPROF (default build/bin/sqlprof) and sqlite3.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$1
shift
: "${SQLPROF:=$here/../../../build/bin/sqlprof}"
rm -f "$out"
"$SQLPROF" record -q -o "$out" -- true
cat "$here/fixture.sql" "$@" | sqlite3 -bail "$out"
