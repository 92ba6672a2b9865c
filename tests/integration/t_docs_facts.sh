#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_docs_facts.sh - the documents say what the code does (issue 17, item
# 19): docs/profile-format.md names the format version that
# report/profile/profile.h defines and that a fresh recording's meta.format holds
# (the page said 1 while the writer wrote 2), and docs/wire-format.md
# names BYE files as preload/stream.c makes them (bye.PID.NS, written only
# when the BYE was not sent) and as serve.c (record and agent) looks for them.
. "$(dirname "$0")/lib.sh"
need_prog counts
command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
root=$ITDIR/../..
code=$(sed -n 's/^#define SP_PROFILE_FORMAT \([0-9][0-9]*\).*/\1/p' "$root/report/profile/profile.h")
[ -n "$code" ] || fail "no SP_PROFILE_FORMAT in report/profile/profile.h"
"$SQLPROF" record -q -o "$TMP/p.db" -- "$PROGS/counts" >/dev/null 2>&1
written=$(sqlite3 "$TMP/p.db" "SELECT value FROM meta WHERE key = 'format'")
[ "$written" = "$code" ] || fail "the writer wrote format $written, profile.h says $code"
doc=$root/docs/profile-format.md
grep -q "describes format version $code\." "$doc" || fail "profile-format.md does not describe format $code: $(grep -o 'format version [0-9]*' "$doc")"
grep -q "| \`format\` | \`$code\`" "$doc" || fail "profile-format.md's meta table does not give format $code"
grep -q "meta.format\` is not $code" "$doc" || fail "profile-format.md does not say readers refuse other formats than $code"
! grep -Eq "format version [0-9]" "$doc" || [ "$(grep -Eo 'format version [0-9]+' "$doc" | sort -u)" = "format version $code" ] ||
	fail "profile-format.md names another format version"

# BYE files: the name the preload writes and the prefix record reads.
grep -q 'snprintf(path, sizeof(path), "%.\*s/bye.%u.%llu"' "$root/preload/stream.c" || fail "bye_file's name changed: update this test and wire-format.md"
grep -q 'strncmp(e->d_name, "bye.", 4)' "$root/report/record/serve.c" || fail "sp_srv_read_bye_files' prefix changed"
grep -q 'if (sent < 0) {' "$root/preload/stream.c" || fail "the BYE file is no longer written only when the BYE was not sent"
wire=$root/docs/wire-format.md
grep -q '`bye.PID.NS`' "$wire" || fail "wire-format.md does not name BYE files bye.PID.NS"
grep -q 'A BYE that was sent leaves no file' "$wire" || fail "wire-format.md does not say a sent BYE leaves no file"
! grep -q 'whenever the process lost' "$wire" || fail "wire-format.md still says a process that lost records writes a BYE file"
! grep -rq '`bye\.PID`' "$root/docs" "$root/README.md" || fail "a document still names BYE files bye.PID: $(grep -rl '`bye\.PID`' "$root/docs" "$root/README.md")"
echo "format $code; BYE files bye.PID.NS"
exit 0
