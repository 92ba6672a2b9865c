#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""expect.py - assertions on a `sqlprof report --format json` document.

usage: expect.py REPORT.json [-t KEY=VALUE...] [-q KIND FINGERPRINT KEY=VALUE...]...
                             [-a KIND FINGERPRINT] [--dump]

  -t KEY=VALUE ...                top-level fields (lost, executions, ...)
  -q KIND FINGERPRINT KEY=VALUE   the row of that kind ("stmt", "exec") and
                                  exact fingerprint must exist (once) and
                                  have these fields
  -a KIND FINGERPRINT             no such row may exist
  --dump                          print the rows (fingerprint, kind, count)

Values are compared as integers when both sides are integers, else as
strings. Every mismatch is printed; exits 1 if any, 0 otherwise.
"""
import json
import sys


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        doc = json.load(f)
    rows = doc.get("queries", [])
    errors = []

    def same(want, got):
        try:
            return int(want) == int(got)
        except (TypeError, ValueError):
            return str(want) == str(got)

    def check(where, obj, kv):
        key, _, want = kv.partition("=")
        if key not in obj:
            errors.append("%s: no field %r" % (where, key))
        elif not same(want, obj[key]):
            errors.append("%s: %s expected %s, got %s" % (where, key, want, obj[key]))

    def find(kind, fp):
        return [r for r in rows if r.get("kind") == kind and r.get("fingerprint") == fp]

    i = 2
    while i < len(argv):
        a = argv[i]
        if a == "--dump":
            for r in rows:
                print("%-4s count=%-6s errors=%s %s" % (r["kind"], r["count"], r["errors"], r["fingerprint"]))
            i += 1
        elif a == "-t":
            i += 1
            while i < len(argv) and not argv[i].startswith("-"):
                check("report", doc, argv[i])
                i += 1
        elif a in ("-q", "-a"):
            kind, fp = argv[i + 1], argv[i + 2]
            i += 3
            found = find(kind, fp)
            where = "%s %r" % (kind, fp)
            if a == "-a":
                if found:
                    errors.append("%s: unexpected row (count %s)" % (where, found[0]["count"]))
                continue
            if len(found) != 1:
                errors.append("%s: %d rows, expected 1" % (where, len(found)))
            while i < len(argv) and not argv[i].startswith("-"):
                if len(found) == 1:
                    check(where, found[0], argv[i])
                i += 1
        else:
            print("expect.py: unknown argument %r" % a, file=sys.stderr)
            return 2
    for e in errors:
        print("FAIL: " + e, file=sys.stderr)
    if errors:
        print("rows in the report:", file=sys.stderr)
        for r in rows:
            print("  %-4s count=%s errors=%s %r" % (r["kind"], r["count"], r["errors"], r["fingerprint"]),
                  file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
