#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_robust_secrets.sh - privacy and escaping (tests/progs/robust_params.c).
# 1. Bound parameter values are never recorded: marker values bound to
#    INSERT/SELECT/UPDATE/LIKE statements and to a failing INSERT, at
#    --rate 1, appear nowhere in the profile file's bytes nor in any report
#    or export format.
# 2. SQL text is escaped in structured output: texts with quotes,
#    backslashes, newlines, control characters, HTML metacharacters, CSV
#    separators, UTF-8 and a non-UTF-8 byte come back byte for byte from
#    the CSV report, and from the JSON report, which must be valid JSON
#    (strict UTF-8); a byte that is not UTF-8 may only be replaced.
. "$(dirname "$0")/lib.sh"
need_prog robust_params
errors=0

"$SQLPROF" record -q --rate 1 -o "$TMP/p.db" -- "$PROGS/robust_params" "$TMP/texts" \
	>"$TMP/rec.out" 2>"$TMP/rec.err"
rc=$?
[ "$rc" -eq 0 ] || fail "sqlprof record exited $rc: $(cat "$TMP/rec.err")"
n=$(sqlite3 "$TMP/p.db" "SELECT count(*) FROM queries WHERE errors > 0 AND fingerprint LIKE 'INSERT INTO t%'")
[ "$n" = 1 ] || fail "the failing INSERT was not recorded as failed ($n rows)"

# Every output we can produce from the profile.
outs=()
out() { # out NAME ARGS...: run sqlprof ARGS, keep stdout as $TMP/out.NAME
	local name=$1
	shift
	if "$SQLPROF" "$@" >"$TMP/out.$name" 2>"$TMP/out.$name.err"; then
		outs+=("$TMP/out.$name")
	else
		echo "FAIL: sqlprof $* exited $?: $(head -3 "$TMP/out.$name.err")" >&2
		errors=$((errors + 1))
	fi
}
out table report -w 0 "$TMP/p.db"
out stacks report -w 0 --stacks "$TMP/p.db"
out json report --format json "$TMP/p.db"
out csv report --format csv "$TMP/p.db"
out site_json report --by site --format json "$TMP/p.db"
out func_csv report --by function --format csv "$TMP/p.db"
if "$SQLPROF" report --help | grep -q -- --plans; then
	out plans report -w 0 --plans "$TMP/p.db"
fi
if "$SQLPROF" export --help >/dev/null 2>&1; then
	for f in $("$SQLPROF" export --help | sed -n 's/^ \{25\}\([a-z]\+\) .*/\1/p'); do
		out "export_$f" export -f "$f" "$TMP/p.db"
	done
fi
echo "checked: $(basename -a "${outs[@]}" | tr '\n' ' ')"
[ "${#outs[@]}" -ge 6 ] || fail "only ${#outs[@]} outputs produced"
for secret in SQLPROF_SECRET_TEXT_7f3a9c SQLPROF_SECRET_BLOB_51e2 9137428851234 27182.818 \
	$(printf 'SQLPROF_SECRET_BLOB_51e2' | od -An -tx1 | tr -d ' \n'); do
	for f in "$TMP/p.db" "${outs[@]}"; do
		if grep -a -i -q -- "$secret" "$f"; then
			echo "FAIL: bound value '$secret' found in $(basename "$f")" >&2
			errors=$((errors + 1))
		fi
	done
done

"$PYTHON" - "$TMP/texts" "$TMP/out.json" "$TMP/out.csv" <<'EOF_PY' || errors=$((errors + 1))
import csv, io, json, sys
texts = open(sys.argv[1], "rb").read().split(b"\0")[:-1]
raw_json = open(sys.argv[2], "rb").read()
raw_csv = open(sys.argv[3], "rb").read()
bad = []
if len(texts) != 8:
    bad.append("%d texts written by robust_params, expected 8" % len(texts))
try:
    doc = json.loads(raw_json.decode("utf-8"))  # strict: JSON text is UTF-8
except (UnicodeDecodeError, ValueError) as e:
    bad.append("the JSON report is not valid JSON: %s" % e)
    doc = json.loads(raw_json.decode("utf-8", "surrogateescape"))
jsql = [r["sql"] for r in doc["queries"]]
rows = list(csv.reader(io.StringIO(raw_csv.decode("utf-8", "surrogateescape"), newline="")))
col = rows[0].index("sql")
csql = {r[col].encode("utf-8", "surrogateescape") for r in rows[1:]}
for t in texts:
    if t not in csql:
        bad.append("CSV: text %r does not come back" % t)
    try:
        want = t.decode("utf-8")
    except UnicodeDecodeError:
        # Not UTF-8: JSON cannot carry it as is; the valid parts must survive.
        if not any("not utf-8: " in s for s in jsql):
            bad.append("JSON: the text with a non-UTF-8 byte is missing")
        continue
    if want not in jsql:
        bad.append("JSON: text %r does not come back" % t)
for b in bad:
    print("FAIL: " + b, file=sys.stderr)
print("escaping: %d texts checked in JSON and CSV" % len(texts))
sys.exit(1 if bad else 0)
EOF_PY
[ "$errors" -eq 0 ] || fail "$errors problem(s)"
exit 0
