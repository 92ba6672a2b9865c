#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make_corpus.py - (re)make the fuzz seed corpus from real recordings.

usage: tests/fuzz/make_corpus.py [BUILD]     (default build; run from the repo root)

stream/: messages captured from real processes. The script plays the
  collector: it listens on a SOCK_SEQPACKET socket, runs test programs with
  libsqlprof.so preloaded and SQLPROF_SOCK pointing at it, and keeps what
  they send. Seeds are single messages (the fuzzer's whole-input reading)
  and runs of consecutive messages of one connection, each prefixed by its
  length as a little-endian uint32 (its split reading). At most 50 KB each.
profile/: profiles written by `sqlprof record` of the same programs,
  VACUUMed to 512-byte pages (the same content, smaller files), behind a
  selector byte for the raw file reading; and their rows re-encoded in
  fuzz_profile.c's row format (at most 40 rows a table) behind selector
  bytes for the row reading, once for the loaders and once for a command.
  At most 50 KB each.
Seed names are content hashes, so re-running adds no duplicates.
"""
import hashlib, os, select, shutil, socket, sqlite3, struct, subprocess, sys, tempfile, time

MAXSEED = 50 * 1024
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
build = os.path.join(root, sys.argv[1] if len(sys.argv) > 1 else "build")
lib = os.path.join(build, "lib", "libsqlprof.so")
sqlprof = os.path.join(build, "bin", "sqlprof")
progs = os.path.join(build, "progs")
out = os.path.join(root, "tests", "fuzz", "corpus")
tmp = tempfile.mkdtemp(prefix="sqlprof-corpus.")

# (name, argv, extra environment)
PROGRAMS = [
    ("counts", [os.path.join(progs, "counts")], {"SQLPROF_RATE": "0.1"}),
    ("counts1", [os.path.join(progs, "counts")], {"SQLPROF_RATE": "1"}),
    ("threads", [os.path.join(progs, "threads")], {}),
    ("forker", [os.path.join(progs, "forker")], {}),
    ("params", [os.path.join(progs, "robust_params"), os.path.join(tmp, "texts")], {"SQLPROF_RATE": "1"}),
    ("tree", [os.path.join(progs, "robust_tree"), "5"], {}),
    ("exitpaths", [os.path.join(progs, "exitpaths"), "_exit"], {}),
]


def save(kind, data):
    if not data or len(data) > MAXSEED:
        return 0
    d = os.path.join(out, kind)
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, hashlib.sha1(data).hexdigest()[:16])
    if os.path.exists(p):
        return 0
    with open(p, "wb") as f:
        f.write(data)
    return 1


def capture(argv, env_extra):
    """Run argv under the preload with ourselves as the collector; return
    {connection number: [message, ...]}."""
    path = os.path.join(tmp, "s")
    if os.path.exists(path):
        os.unlink(path)
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ls.bind(path)
    ls.listen(64)
    env = dict(os.environ, LD_PRELOAD=lib, SQLPROF_SOCK=path, **env_extra)
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conns, msgs, n = {}, {}, 0
    deadline = None
    while True:
        socks = [ls] + list(conns)
        r, _, _ = select.select(socks, [], [], 0.1)
        for s in r:
            if s is ls:
                c, _ = ls.accept()
                conns[c] = n
                msgs[n] = []
                n += 1
                continue
            try:
                m = s.recv(1 << 20)
            except OSError:
                m = b""
            if not m:
                del conns[s]
                s.close()
            else:
                msgs[conns[s]].append(m)
        if child.poll() is not None:
            deadline = deadline or time.time() + 2
            if not conns or time.time() > deadline:
                break
    ls.close()
    return msgs


def stream_seeds():
    n = 0
    for name, argv, env in PROGRAMS:
        for conn, ms in capture(argv, env).items():
            for m in ms:
                n += save("stream", m)
            # runs of consecutive messages, length-prefixed
            for start in range(0, len(ms), 3):
                blob = b""
                for m in ms[start:start + 6]:
                    if len(blob) + 4 + len(m) > MAXSEED:
                        break
                    blob += struct.pack("<I", len(m)) + m
                n += save("stream", blob)
    return n


def encode_rows(db):
    """fuzz_profile.c's row format for the rows of db (odd selector first)."""
    tables = [r[0][1].decode() for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    ops = bytearray()
    for t, name in enumerate(tables):
        for row in db.execute('SELECT * FROM "%s" LIMIT 40' % name):
            ops.append(t)
            for v in row:
                if v is None:
                    ops.append(0)
                elif isinstance(v, int):
                    if -128 <= v < 128:
                        ops += struct.pack("<Bb", 1, v)
                    else:
                        ops += struct.pack("<Bq", 2, max(min(v, 2**63 - 1), -2**63))
                elif isinstance(v, float):
                    ops += struct.pack("<Bd", 3, v)
                else:
                    b = v[1] if isinstance(v, tuple) else bytes(v)
                    b = b[:255]
                    ops += struct.pack("<BB", 4 if isinstance(v, tuple) else 5, len(b)) + b
    return bytes(ops)


def profile_seeds():
    n = 0
    for i, (name, argv, env) in enumerate(PROGRAMS):
        p = os.path.join(tmp, name + ".db")
        rate = env.get("SQLPROF_RATE", "0.01")
        subprocess.run([sqlprof, "record", "-q", "--rate", rate, "-o", p, "--"] + argv,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not os.path.exists(p):
            continue
        db = sqlite3.connect(p)
        db.text_factory = lambda b: ("text", b)  # keep non-UTF-8 text as it is
        db.execute("PRAGMA page_size=512")
        db.execute("VACUUM")
        rows = encode_rows(db)
        db.close()
        data = open(p, "rb").read()
        # first byte: low 2 bits 0 = raw file, 1 = rows; the other 6 bits
        # pick the reader (< 48: the loaders, else a report/export command)
        n += save("profile", bytes([((i if i % 2 else 48 + i) << 2)]) + data)
        n += save("profile", bytes([(i << 2) | 1]) + rows[:MAXSEED - 1])
        n += save("profile", bytes([((48 + 2 * i) << 2) | 1]) + rows[:MAXSEED - 1])
    return n


def main():
    for f in [lib, sqlprof] + [a[1][0] for a in PROGRAMS]:
        if not os.path.exists(f):
            sys.exit("make_corpus: %s missing (make all progs BUILD=...)" % f)
    try:
        print("stream seeds added: %d" % stream_seeds())
        print("profile seeds added: %d" % profile_seeds())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()
