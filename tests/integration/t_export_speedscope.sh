#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t_export_speedscope.sh - the speedscope export of the fixture profile
# (time and count weights) validates against speedscope's published file
# format schema, dist/release/file-format-schema.json of the npm package
# `speedscope`, with the JSON-schema validator ajv. Both packages are
# installed into the test's private directory with npm (nothing is cached
# in the repository); skips when node/npm are missing or the registry is
# unreachable. SPEEDSCOPE_VERSION pins the package (default: latest).
. "$(dirname "$0")/lib.sh"

command -v node >/dev/null || skip "node not installed (apt-get install nodejs npm)"
command -v npm >/dev/null || skip "npm not installed (apt-get install npm)"
command -v sqlite3 >/dev/null || skip "sqlite3 shell not installed"
GOLD=$ITDIR/../golden/export
SQLPROF=$SQLPROF "$GOLD/mkfixture.sh" "$TMP/fixture.db" || fail "mkfixture.sh failed"
cd "$TMP" || exit 1
mkdir npm && (cd npm && timeout "$HANG_S" npm install --silent --no-audit --no-fund --no-save \
	"speedscope@${SPEEDSCOPE_VERSION:-latest}" ajv@8 >npm.log 2>&1) ||
	skip "npm install speedscope ajv failed (registry unreachable?): $(tail -n 1 npm/npm.log)"
schema=npm/node_modules/speedscope/dist/release/file-format-schema.json
[ -f "$schema" ] || fail "speedscope package has no $schema"
"$SQLPROF" export -f speedscope -o time.json fixture.db || fail "export speedscope"
"$SQLPROF" export -f speedscope --weight count -o count.json fixture.db || fail "export count"
cat >validate.js <<'JS'
const Ajv = require("ajv");
const fs = require("fs");
const schema = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const ajv = new Ajv({ strict: false, allErrors: true });
const validate = ajv.compile({ ...schema, $ref: "#/definitions/FileFormat.File" });
let bad = 0;
for (const f of process.argv.slice(3)) {
  const doc = JSON.parse(fs.readFileSync(f, "utf8"));
  if (validate(doc)) {
    const p = doc.profiles[0];
    if (p.samples.length !== p.weights.length) { console.log(f + ": samples/weights differ"); bad = 1; }
    for (const s of p.samples) for (const i of s)
      if (!(i >= 0 && i < doc.shared.frames.length)) { console.log(f + ": bad frame " + i); bad = 1; }
    console.log(f + ": valid (" + p.samples.length + " samples, " + doc.shared.frames.length + " frames)");
  } else {
    console.log(f + ": INVALID " + JSON.stringify(validate.errors));
    bad = 1;
  }
}
process.exit(bad);
JS
NODE_PATH=npm/node_modules node validate.js "$schema" time.json count.json ||
	fail "speedscope schema validation failed"
exit 0
