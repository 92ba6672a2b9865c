#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""interp_check.py - Ruby's and PHP's frames in a profile (t_attr_ruby.sh,
t_attr_php.sh).

usage:
  interp_check.py sites REPORT.json MODULE SOURCE SPEC...
      SPEC is FINGERPRINT=COUNT@MARKER ("[exec] FINGERPRINT" for a query
      run by sqlite3_exec): the query has COUNT executions, all of them
      attributed to one site of module MODULE ("ruby", "php") in SOURCE
      (compared by base name) at the line holding "@MARKER".

  interp_check.py oracle PROFILE.db LANG FINGERPRINT BT.json
      The interpreter frames of the stack sampled for FINGERPRINT equal
      the interpreter's own backtrace taken inside that query (BT.json: a
      SQL function's Ruby caller_locations(0) as [label, path, lineno],
      or PHP's debug_backtrace()): the same functions in the same order,
      with the same file and line for frames of script code (a C method's
      or an internal function's frame is compared by name; Ruby names a
      block's frame after its method). "[exec] FINGERPRINT": the query
      run by sqlite3_exec.

Exits 1 with every mismatch printed (FAIL: ...), 0 otherwise.
"""
import json
import os
import sqlite3
import sys

failed = 0


def fail(msg):
    global failed
    failed += 1
    print("FAIL: " + msg)


def marker_line(path, marker):
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if "@" + marker in line.split("#")[-1] or "@" + marker in line.split("//")[-1]:
                return i
    raise SystemExit("no @%s in %s" % (marker, path))


def cmd_sites(report, module, source, specs):
    with open(report) as f:
        doc = json.load(f)
    base = os.path.basename(source)
    for spec in specs:
        fp, _, rest = spec.rpartition("=")
        count, _, marker = rest.partition("@")
        line = marker_line(source, marker)
        kind = "exec" if fp.startswith("[exec] ") else "stmt"
        fp = fp[7:] if kind == "exec" else fp
        rows = [r for r in doc["queries"] if r["kind"] == kind and r["fingerprint"] == fp]
        if len(rows) != 1:
            fail("%s %r: %d rows in the report, expected 1" % (kind, fp, len(rows)))
            continue
        row = rows[0]
        sites = row.get("sites", [])
        desc = "; ".join("%s (%s:%s) [%s] %.2f" % (s.get("function"), s.get("file"), s.get("line"),
                                                 s.get("module"), s["est_count"]) for s in sites)
        print("%-50s %5d  %s" % (fp[:50], row["count"], desc))
        if row["count"] != int(count):
            fail("%r: count %d, expected %s" % (fp, row["count"], count))
        good = sum(s["est_count"] for s in sites
                   if s.get("module") == module and os.path.basename(s.get("file") or "") == base
                   and s.get("line") == line)
        if abs(good - row["count"]) > 1e-6 or len(sites) != 1:
            fail("%r: %.2f of %d executions at %s:%d (module %s); sites: %s"
                 % (fp, good, row["count"], base, line, module, desc))
    return 1 if failed else 0


def ruby_frames(bt):
    # [label, path, lineno] innermost first; a C method's path and line
    # are its caller's
    return [(label, path, line) for label, path, line in bt]


def php_frames(bt):
    # debug_backtrace(): entry k names frame k's function and where frame
    # k + 1 called it; the file's own code ({main}) has no entry
    out = []
    for k, e in enumerate(bt):
        name = (e["class"] + "::" if e.get("class") else "") + e["function"]
        loc = bt[k - 1] if k else {}
        out.append((name, loc.get("file"), loc.get("line")))
    if bt:
        out.append(("{main}", bt[-1].get("file"), bt[-1].get("line")))
    return out


def cmd_oracle(profile, lang, fp, btfile):
    with open(btfile) as f:
        want = (ruby_frames if lang == "ruby" else php_frames)(json.load(f))
    db = sqlite3.connect(profile)
    kind = "exec" if fp.startswith("[exec] ") else "stmt"
    fp = fp[7:] if kind == "exec" else fp
    stacks = db.execute(
        "SELECT DISTINCT s.pid, s.stack_id FROM stack_samples s JOIN queries q"
        " ON q.fp_id = s.fp_id AND q.kind = s.kind WHERE q.fingerprint = ? AND q.kind = ?",
        (fp, kind)).fetchall()
    if len(stacks) != 1:
        fail("%r: %d sampled stacks, expected 1" % (fp, len(stacks)))
        return 1
    got = db.execute("SELECT function, file, line FROM frames WHERE pid = ? AND stack_id = ?"
                     " AND module = ? ORDER BY idx", (stacks[0][0], stacks[0][1], lang)).fetchall()
    if not got:
        fail("%r: no %s frame in its stack" % (fp, lang))
        return 1
    # the interpreter's backtrace starts inside the SQL function: the
    # profile's frames are its outer part
    off = len(want) - len(got)
    print("%s: %d %s frames in the profile, %d in the interpreter's backtrace"
          % (fp, len(got), lang, len(want)))
    if off < 0:
        fail("more frames in the profile than in the interpreter's backtrace")
        return 1
    for k, (fn, file, line) in enumerate(got):
        wfn, wfile, wline = want[off + k]
        script = not file.startswith("<")
        # Ruby 3 names a block's frame after its method ("each" for
        # "block in each", "block (2 levels) in each")
        same = fn == wfn or (lang == "ruby" and wfn.startswith("block") and
                             wfn.endswith(" in " + fn))
        ok = same and (not script or (file == wfile and line == wline))
        print("%s %-45s %s:%s   |  %s %s:%s" % (" " if ok else "X", fn[:45], file, line, wfn,
                                               wfile, wline))
        if not ok:
            fail("frame %d: %s (%s:%s), the interpreter says %s (%s:%s)"
                 % (k, fn, file, line, wfn, wfile, wline))
    return 1 if failed else 0


def main(argv):
    if len(argv) >= 6 and argv[1] == "sites":
        return cmd_sites(argv[2], argv[3], argv[4], argv[5:])
    if len(argv) == 6 and argv[1] == "oracle":
        return cmd_oracle(*argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
