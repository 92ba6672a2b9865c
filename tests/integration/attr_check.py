#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""attr_check.py - assertions on sqlprof's per-site attribution of the
attribution fixture (tests/fixtures/attr), for tests/integration/t_attr_*.sh.

usage:
  attr_check.py sites MODE REPORT.json MARKERS EXPECT [options]
      Compare the "sites" of every query listed in EXPECT (the fixture's
      expected.tsv) with the expected function, file:line (from MARKERS,
      build.sh's markers.txt) and module.  MODE:
        exact     every execution sampled (--rate 1): exactly the expected
                  sites, samples == est_count == count, nothing unattributed
        forced    --rate 0: exactly the sites with forced > 0, samples ==
                  forced (first execution of each text, failures)
        sampled   every reported site is an expected one; for sites with at
                  least --min-count executions, |est_count - count| / count
                  <= --tolerance
        stripped  no debug info: a site is unattributed, or in the expected
                  module with function "??" or the expected name (only if
                  the module exports it, see --dynsym) and file:line "??:0"
                  or the expected one; never another function or line
      options:
        --variant NAME      use EXPECT's rows for that report variant: plain
                            (default), wrap (--skip db_query), inl (--skip
                            inl_static --skip ai_query)
        --others MARKER:FN  (exact) every query not in EXPECT that has
                            executions must be attributed entirely to FN at
                            MARKER (the statements SQLite runs inside the
                            fixture's sqlite3_exec call)
        --tolerance X       (sampled) default 0.2
        --min-count N       (sampled) default 10000
        --dynsym MOD=FILE   (stripped) names MOD exports, one per line
        --table             print the comparison table

  attr_check.py stacks TABLE.txt MARKERS FINGERPRINT FRAME...
      In `sqlprof report --stacks` output, the stack under FINGERPRINT's
      site must start (after frames of libsqlite3/libsqlprof) with FRAME...,
      each "[inlined:]FUNCTION@MARKER" (MARKER empty: any line).

  attr_check.py errors TABLE.txt PROFILE.db MARKERS ERR...
      Each ERR is "FINGERPRINT|COUNT|RC|MESSAGE|FUNCTION|MARKER": the
      "# failed executions" section of the table must list it, with its
      count, rc and message, and a backtrace whose first frame outside
      libsqlite3/libsqlprof is FUNCTION at MARKER's line; the profile's
      errors and frames tables must say the same.

  attr_check.py frames PROFILE.db DIR MOD=FILE...
      (stripped copies) every frame in a module under DIR has file "??",
      line 0 and function "??" or a name the module exports (FILE lists
      them).

  attr_check.py oracle PROFILE.db DIR
      Every distinct pc of the profile's stacks that lies in a module under
      DIR must be symbolized like `eu-addr2line -f -i -C` does at pc-1:
      the same inline chain of functions and lines (exit 77 without
      eu-addr2line).

  attr_check.py python REPORT.json FINGERPRINT=COUNT@LINE...
      Each query has COUNT executions, all attributed to one Python site
      (module "python3.X") at LINE of attr_py_workload.py; nothing
      unattributed.

Exits 1 with every mismatch printed (FAIL: ...), 0 otherwise.
"""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys

MODULE_OF = {  # source file -> module that holds its code
    "attr_main.c": "attr_main",
    "attr_cxx.cc": "attr_main",
    "attr_lib.c": "libattr_lib.so",
    "attr_mod.c": "attr_mod.so",
}
BUILTIN_SKIP = ("libsqlite3.so", "libsqlprof.so")

errors = []


def fail(msg):
    errors.append(msg)


def done():
    for e in errors:
        print("FAIL: " + e, file=sys.stderr)
    return 1 if errors else 0


def load_markers(path):
    m = {}
    with open(path) as f:
        for line in f:
            src, name, lineno = line.split()
            m[name] = (src, int(lineno))
    return m


class Site:
    def __init__(self, kind, fp, function, marker, count, forced, markers):
        if marker not in markers:
            raise SystemExit("attr_check.py: unknown marker %r" % marker)
        self.kind, self.fp, self.function, self.marker = kind, fp, function, marker
        self.count, self.forced = int(count), int(forced)
        self.file, self.line = markers[marker]
        self.module = MODULE_OF[self.file]

    def name(self):
        return "%s (%s:%d) [%s]" % (self.function, self.file, self.line, self.module)


def load_expect(path, markers, variant):
    groups = {}
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            kind, fp, fn, marker, count, forced, when = line.rstrip("\n").split("\t")
            if when != "*" and variant not in when.split(","):
                continue
            groups.setdefault((kind, fp), []).append(
                Site(kind, fp, fn, marker, count, forced, markers))
    return groups


def base(p):
    return os.path.basename(p) if p else p


def site_key(s):
    """(function, file basename, line, module basename) of a JSON site."""
    if s.get("unattributed"):
        return None
    return (s["function"], base(s["file"]), s["line"], base(s["module"]))


def fmt_key(k):
    return "(unattributed)" if k is None else "%s (%s:%d) [%s]" % k


def find_row(doc, kind, fp):
    rows = [r for r in doc["queries"] if r["kind"] == kind and r["fingerprint"] == fp]
    if len(rows) != 1:
        fail("%s %r: %d rows in the report, expected 1" % (kind, fp, len(rows)))
        return None
    return rows[0]


def read_names(spec):
    mod, _, path = spec.partition("=")
    with open(path) as f:
        return mod, {l.strip() for l in f if l.strip()}


def cmd_sites(argv):
    mode, report, markers_path, expect_path = argv[:4]
    opts = argv[4:]
    variant = "plain"
    table = False
    others = None
    tol, min_count = 0.2, 10000
    dynsym = {}
    i = 0
    while i < len(opts):
        o = opts[i]
        if o == "--variant":
            i += 1
            variant = opts[i]
        elif o == "--table":
            table = True
        elif o == "--others":
            i += 1
            others = opts[i].split(":", 1)
        elif o == "--tolerance":
            i += 1
            tol = float(opts[i])
        elif o == "--min-count":
            i += 1
            min_count = int(opts[i])
        elif o == "--dynsym":
            i += 1
            mod, names = read_names(opts[i])
            dynsym[mod] = names
        else:
            raise SystemExit("attr_check.py: unknown option %r" % o)
        i += 1
    if mode not in ("exact", "forced", "sampled", "stripped", "honest"):
        raise SystemExit("attr_check.py: unknown mode %r" % mode)
    markers = load_markers(markers_path)
    groups = load_expect(expect_path, markers, variant)
    if not groups:
        raise SystemExit("attr_check.py: no rows of %s for variant %r" % (expect_path, variant))
    with open(report) as f:
        doc = json.load(f)
    lines = []

    if mode in ("exact", "sampled") and doc.get("unattributed", 0) != 0:
        fail("top-level unattributed is %s, expected 0" % doc["unattributed"])

    for (kind, fp), exp in groups.items():
        row = find_row(doc, kind, fp)
        if row is None:
            continue
        total = sum(s.count for s in exp)
        if row["count"] != total:
            fail("%s %r: count %d, expected %d" % (kind, fp, row["count"], total))
        got, listed = {}, set()
        for s in row.get("sites", []):
            k = site_key(s)
            # a frame without symbols is a site per offset in its module
            if (k, s.get("offset")) in listed:
                fail("%s %r: site %s listed twice" % (kind, fp, fmt_key(k)))
            listed.add((k, s.get("offset")))
            if k in got:
                merged = dict(got[k])
                for f in ("samples", "est_count"):
                    merged[f] = merged[f] + s[f]
                s = merged
            got[k] = s
        want = {(e.function, e.file, e.line, e.module): e for e in exp}

        if mode == "stripped":
            check_stripped(kind, fp, row, exp, got, dynsym, lines)
            continue
        if mode == "honest":
            # every site is right, or an honest loss (?? or line 0 in the
            # right module), never another function or line
            for k, s in got.items():
                if k in want:
                    verdict = "right"
                elif k is None:
                    verdict = "degraded (unattributed)"
                else:
                    fn, src, line, mod = k
                    fits = [e for e in exp if mod == e.module and fn in ("??", e.function) and
                            (src, line) in (("??", 0), (e.file, e.line))]
                    verdict = "degraded" if fits else "WRONG"
                    if not fits:
                        fail("%s %r: site %s; allowed: %s, or ?? / line 0 in its module" %
                             (kind, fp, fmt_key(k), " or ".join(e.name() for e in exp)))
                lines.append((kind, fp, fmt_key(k), row["count"], s["samples"], s["est_count"],
                              verdict))
            continue
        for k, e in want.items():
            s = got.get(k)
            samples = s["samples"] if s else 0
            est = s["est_count"] if s else 0
            verdict = "ok"
            if mode == "exact":
                if samples != e.count or est != e.count:
                    verdict = "WRONG"
                    fail("%s %r at %s: samples %d, est_count %s, expected %d both" %
                         (kind, fp, e.name(), samples, est, e.count))
                lines.append((kind, fp, e.name(), e.count, samples, est, verdict))
            elif mode == "forced":
                if samples != e.forced:
                    verdict = "WRONG"
                    fail("%s %r at %s: %d samples at --rate 0, expected %d (first execution"
                         " of each text + failures)" % (kind, fp, e.name(), samples, e.forced))
                lines.append((kind, fp, e.name(), e.forced, samples, est, verdict))
            else:  # sampled
                err = (est - e.count) / e.count
                if e.count >= min_count:
                    if s is None:
                        verdict = "MISSING"
                        fail("%s %r: no site %s (%d executions)" % (kind, fp, e.name(), e.count))
                    elif abs(err) > tol:
                        verdict = "OFF"
                        fail("%s %r at %s: est_count %s, %d executions: error %+.1f%% beyond"
                             " +-%.0f%%" % (kind, fp, e.name(), est, e.count, 100 * err, 100 * tol))
                else:
                    verdict = "(not checked)"
                lines.append((kind, fp, e.name(), e.count, samples, est,
                              "%+.1f%% %s" % (100 * err, verdict)))
        for k, s in got.items():
            if k in want:
                continue
            if mode == "forced" and s["samples"] == 0:
                continue
            fail("%s %r: unexpected site %s with %d samples (expected only %s)" %
                 (kind, fp, fmt_key(k), s["samples"], ", ".join(e.name() for e in exp)))
            lines.append((kind, fp, "UNEXPECTED " + fmt_key(k), 0, s["samples"], s["est_count"],
                          "WRONG"))

    if others:
        marker, fn = others
        src, lineno = markers[marker]
        mod = MODULE_OF[src]
        for r in doc["queries"]:
            if (r["kind"], r["fingerprint"]) in groups or r["count"] == 0:
                continue
            ok = True
            sites = r.get("sites", [])
            for s in sites:
                if site_key(s) != (fn, src, lineno, mod):
                    ok = False
                    fail("%s %r (run inside sqlite3_exec): site %s, expected %s (%s:%d)" %
                         (r["kind"], r["fingerprint"], fmt_key(site_key(s)), fn, src, lineno))
            if sum(s["samples"] for s in sites) != r["count"]:
                ok = False
                fail("%s %r (run inside sqlite3_exec): %d samples for %d executions" %
                     (r["kind"], r["fingerprint"], sum(s["samples"] for s in sites), r["count"]))
            lines.append((r["kind"], r["fingerprint"], "%s (%s:%d) [%s]" % (fn, src, lineno, mod),
                          r["count"], sum(s["samples"] for s in sites),
                          sum(s["est_count"] for s in sites), "ok" if ok else "WRONG"))

    if table:
        head = {"exact": "EXPECTED", "forced": "FORCED", "sampled": "COUNT",
                "stripped": "COUNT", "honest": "COUNT"}[mode]
        last = "EST_ERR" if mode == "sampled" else "RESULT"
        print("%-4s  %-32s  %-58s %8s %8s %9s  %s" %
              ("KIND", "FINGERPRINT", "SITE", head, "SAMPLES", "EST_COUNT", last))
        for kind, fp, site, n, samples, est, verdict in lines:
            print("%-4s  %-32s  %-58s %8d %8d %9.0f  %s" %
                  (kind, fp[:32], site, n, samples, est, verdict))
    return done()


def check_stripped(kind, fp, row, exp, got, dynsym, lines):
    """A stripped copy may lose names and lines, never invent them."""
    for k, s in got.items():
        verdict = "ok (unattributed)"
        if k is not None:
            fn, src, line, mod = k
            fits = []
            for e in exp:
                if mod != e.module:
                    continue
                names = {"??"} | ({e.function} & dynsym.get(e.module, set()))
                if fn in names and (src, line) in (("??", 0), (e.file, e.line)):
                    fits.append(e)
            if fits:
                verdict = "ok"
            else:
                verdict = "WRONG"
                fail("%s %r: stripped copy reports site %s; allowed: %s, with function ?? or its"
                     " exported name, line 0 or the right line" %
                     (kind, fp, fmt_key(k), " or ".join(e.name() for e in exp)))
        lines.append((kind, fp, fmt_key(k), row["count"], s["samples"], s["est_count"], verdict))
    if row["count"] and not got:
        fail("%s %r: no sites at all (executions lost from attribution)" % (kind, fp))


FRAME_RE = re.compile(r"^\s+#(\d+)\s+(\(inlined\) )?(.*) \((.*):(-?\d+)\) \[(.*)\]$")
# COUNT, seven times ("1.23 us": TOTAL, PREPARE, MEAN, P50, P95, P99, MAX), ROWS,
# then the SQL (the header line does not match).
ROW_RE = re.compile(r"^\s*\d+(?:\s+[0-9.]+ [a-z]+){7}\s+\d+  (.*)$")
SITE_RE = re.compile(r"^\s+-> .* at (.*) \((.*):(-?\d+)\) \[(\d+) samples?\]$")


def parse_table(path):
    """Query rows of a table report: [(fingerprint, [(site, [frames])])]."""
    rows = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# failed executions"):
                break
            m = FRAME_RE.match(line)
            if m and rows and rows[-1][1]:
                rows[-1][1][-1][1].append(
                    (bool(m.group(2)), m.group(3), base(m.group(4)), int(m.group(5)), m.group(6)))
                continue
            m = SITE_RE.match(line)
            if m and rows:
                rows[-1][1].append(((m.group(1), base(m.group(2)), int(m.group(3))), []))
                continue
            if line.startswith("#") or not line.strip():
                continue
            m = ROW_RE.match(line)
            if m:
                sql = m.group(1)
                if sql.startswith("[exec] "):
                    sql = sql[7:]
                rows.append((sql, []))
    return rows


def user_frames(frames):
    return [f for f in frames if not base(f[4]).startswith(BUILTIN_SKIP)]


def frame_matches(f, spec, markers):
    inlined = spec.startswith("inlined:")
    if inlined:
        spec = spec[len("inlined:"):]
    fn, _, marker = spec.rpartition("@")
    if f[0] != inlined or f[1] != fn:
        return False
    if marker:
        src, line = markers[marker]
        return f[2] == src and f[3] == line
    return True


def fmt_frame(f):
    return "%s%s (%s:%d) [%s]" % ("(inlined) " if f[0] else "", f[1], f[2], f[3], f[4])


def cmd_stacks(argv):
    table, markers_path, fp = argv[:3]
    specs = argv[3:]
    markers = load_markers(markers_path)
    rows = [r for r in parse_table(table) if r[0] == fp]
    if len(rows) != 1:
        fail("--stacks output: %d rows for %r, expected 1" % (len(rows), fp))
        return done()
    sites = rows[0][1]
    if not sites:
        fail("--stacks output: %r has no site" % fp)
        return done()
    for site, frames in sites:
        uf = user_frames(frames)
        if not uf:
            fail("--stacks output: no stack printed under %r's site %s" % (fp, site))
            continue
        for i, spec in enumerate(specs):
            if i >= len(uf) or not frame_matches(uf[i], spec, markers):
                fail("--stacks output for %r: frame %d (after libsqlite3/libsqlprof) is %s,"
                     " expected %s; stack:\n    %s" %
                     (fp, i, fmt_frame(uf[i]) if i < len(uf) else "missing", spec,
                      "\n    ".join(fmt_frame(f) for f in frames)))
                break
        else:
            print("stack of %r: %s" % (fp, " <- ".join(fmt_frame(f) for f in uf[:len(specs)])))
    return done()


ERR_RE = re.compile(r"^\s+(\d+) x rc=(-?\d+) (.*)$")


def cmd_errors(argv):
    table, profile, markers_path = argv[:3]
    markers = load_markers(markers_path)
    # The table's "# failed executions" section.
    listed = []  # (count, rc, "message: sql", [frames])
    with open(table) as f:
        section = False
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# failed executions"):
                section = True
                continue
            if not section:
                continue
            m = ERR_RE.match(line)
            if m:
                listed.append((int(m.group(1)), int(m.group(2)), m.group(3), []))
                continue
            m = FRAME_RE.match(line)
            if m and listed:
                listed[-1][3].append(
                    (bool(m.group(2)), m.group(3), base(m.group(4)), int(m.group(5)), m.group(6)))
    if not listed:
        fail("the table report has no \"# failed executions\" section")
    db = sqlite3.connect("file:%s?mode=ro" % profile, uri=True)
    for spec in argv[3:]:
        fp, count, rc, msg, fn, marker = spec.split("|")
        count, rc = int(count), int(rc)
        src, line = markers[marker]
        text = "%s: %s" % (msg, fp)
        hits = [e for e in listed if e[2] == text]
        if not hits:
            fail("failed executions: no entry %r; listed: %r" % (text, [e[2] for e in listed]))
        else:
            n = sum(e[0] for e in hits)
            if n != count:
                fail("failed executions %r: %d listed, expected %d" % (text, n, count))
            for e in hits:
                if e[1] != rc:
                    fail("failed executions %r: rc=%d, expected %d" % (text, e[1], rc))
                uf = user_frames(e[3])
                if not uf:
                    fail("failed executions %r: no backtrace with a frame outside"
                         " libsqlite3/libsqlprof" % text)
                elif (uf[0][1], uf[0][2], uf[0][3]) != (fn, src, line):
                    fail("failed executions %r: first frame %s, expected %s (%s:%d)" %
                         (text, fmt_frame(uf[0]), fn, src, line))
                else:
                    print("%d x rc=%d %s\n    first frame: %s" % (e[0], e[1], text,
                                                                  fmt_frame(uf[0])))
        # The same from the profile's own tables.
        got = db.execute(
            "SELECT e.rc, e.message, e.count, e.pid, e.stack_id FROM errors e"
            " JOIN queries q ON q.fp_id = e.fp_id AND q.kind = 'stmt' WHERE q.fingerprint = ?",
            (fp,)).fetchall()
        if sum(g[2] for g in got) != count:
            fail("errors table, %r: %d failures, expected %d" % (fp, sum(g[2] for g in got), count))
        for erc, emsg, _, pid, stack_id in got:
            if erc != rc or emsg != msg:
                fail("errors table, %r: rc=%d %r, expected rc=%d %r" % (fp, erc, emsg, rc, msg))
            frames = db.execute(
                "SELECT inlined, function, file, line, module FROM frames"
                " WHERE pid = ? AND stack_id = ? ORDER BY idx", (pid, stack_id)).fetchall()
            uf = user_frames([(bool(a), b, base(c), d, e) for a, b, c, d, e in frames])
            if not uf or (uf[0][1], uf[0][2], uf[0][3]) != (fn, src, line):
                fail("errors table, %r: first attributed frame %s, expected %s (%s:%d)" %
                     (fp, fmt_frame(uf[0]) if uf else "none", fn, src, line))
    return done()


def cmd_frames(argv):
    profile, moddir = argv[:2]
    names = dict(read_names(a) for a in argv[2:])
    moddir = os.path.realpath(moddir)
    db = sqlite3.connect("file:%s?mode=ro" % profile, uri=True)
    n = 0
    for mod, fn, src, line, inl in db.execute(
            "SELECT DISTINCT module, function, file, line, inlined FROM frames"):
        if os.path.dirname(os.path.realpath(mod)) != moddir:
            continue
        n += 1
        ok_names = {"??"} | names.get(base(mod), set())
        if fn not in ok_names or src != "??" or line != 0 or inl:
            fail("frame in stripped %s: %s%s (%s:%d); with no debug info it can only be"
                 " ?? or an exported name, at ??:0" %
                 (base(mod), "(inlined) " if inl else "", fn, src, line))
    if n == 0:
        fail("no frame of the profile lies in a module under %s" % moddir)
    else:
        print("%d distinct frames in %s checked" % (n, moddir))
    return done()


def cmd_oracle(argv):
    profile, moddir = argv[:2]
    moddir = os.path.realpath(moddir)
    tool = shutil.which("eu-addr2line")
    if not tool:
        print("skip: no eu-addr2line (elfutils) for the oracle check")
        return 77
    db = sqlite3.connect("file:%s?mode=ro" % profile, uri=True)
    biases = {}
    for pid, path, bias in db.execute("SELECT pid, path, bias FROM modules"):
        biases[(pid, path)] = bias & 0xFFFFFFFFFFFFFFFF
    chains = {}  # (module, address) -> [(function, line)] innermost first
    cur = None
    for pid, sid, pc, mod, fn, line in db.execute(
            "SELECT pid, stack_id, pc, module, function, line FROM frames"
            " ORDER BY pid, stack_id, idx"):
        if os.path.dirname(os.path.realpath(mod)) != moddir:
            cur = None
            continue
        pc &= 0xFFFFFFFFFFFFFFFF
        if (pid, mod) not in biases:
            fail("module %s of pid %d is not in the modules table" % (mod, pid))
            continue
        key = (pid, sid, pc)
        if cur != key:
            cur = key
            chain = []
            chains.setdefault((mod, pc - biases[(pid, mod)]), []).append(chain)
        chain.append((fn, line))
    by_mod = {}
    for (mod, addr), lst in chains.items():
        by_mod.setdefault(mod, {})[addr] = lst[0]
        for other in lst[1:]:
            if other != lst[0]:
                fail("%s+%#x symbolized two ways: %r and %r" % (base(mod), addr, lst[0], other))
    n = 0
    for mod, addrs in by_mod.items():
        order = sorted(addrs)
        out = subprocess.run([tool, "-a", "-f", "-i", "-C", "-e", mod] +
                             ["%#x" % (a - 1) for a in order],
                             capture_output=True, text=True).stdout.splitlines()
        blocks, i = [], 0
        while i < len(out):
            if out[i].startswith("0x"):
                blocks.append([])
                i += 1
                continue
            fn = out[i].split(" inlined at ")[0]
            loc = out[i + 1] if i + 1 < len(out) else "??:0"
            m = re.match(r"^(.*?):(\d+)(?::\d+)?$", loc)
            blocks[-1].append((fn, int(m.group(2)) if m else 0))
            i += 2
        if len(blocks) != len(order):
            fail("eu-addr2line gave %d answers for %d addresses in %s" %
                 (len(blocks), len(order), mod))
            continue
        for addr, want in zip(order, blocks):
            n += 1
            got = addrs[addr]
            if got != want:
                fail("%s+%#x: sqlprof says %s; eu-addr2line -i says %s" % (
                    base(mod), addr, " <- ".join("%s:%d" % g for g in got),
                    " <- ".join("%s:%d" % w for w in want)))
    if n == 0:
        fail("no frame of the profile lies in a module under %s" % moddir)
    else:
        print("%d distinct pcs in %s compared with eu-addr2line -f -i -C" % (n, moddir))
    return done()


def cmd_python(argv):
    report = argv[0]
    with open(report) as f:
        doc = json.load(f)
    print("%-40s %6s  %s" % ("FINGERPRINT", "COUNT", "SITES (est_count)"))
    for spec in argv[1:]:
        fp, _, rest = spec.rpartition("=")
        count, _, line = rest.partition("@")
        row = find_row(doc, "stmt", fp)
        if row is None:
            continue
        if row["count"] != int(count):
            fail("%r: count %d, expected %s" % (fp, row["count"], count))
        sites = row.get("sites", [])
        inmod = sum(s["est_count"] for s in sites
                    if (s.get("module") or "").startswith("python")
                    and (s.get("file") or "").endswith("attr_py_workload.py")
                    and s.get("line") == int(line))
        print("%-40s %6d  %s" % (fp[:40], row["count"], "; ".join(
            "%s %.0f" % (fmt_key(site_key(s)), s["est_count"]) for s in sites)))
        if round(inmod) != row["count"]:
            fail("%r: %.0f of %d executions attributed to attr_py_workload.py:%s;"
                 " sites: %s" % (fp, inmod, row["count"], line, "; ".join(
                     "%s = %.0f" % (fmt_key(site_key(s)), s["est_count"]) for s in sites)))
    if doc.get("unattributed", 0) != 0:
        fail("top-level unattributed is %s, expected 0" % doc["unattributed"])
    return done()


def main(argv):
    cmds = {"sites": (cmd_sites, 4), "stacks": (cmd_stacks, 4), "errors": (cmd_errors, 4),
            "frames": (cmd_frames, 3), "oracle": (cmd_oracle, 2), "python": (cmd_python, 2)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 < cmds[argv[1]][1]:
        print(__doc__, file=sys.stderr)
        return 2
    return cmds[argv[1]][0](argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
