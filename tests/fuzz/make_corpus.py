#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make_corpus.py - (re)make the fuzz seed corpus from real recordings.

usage: tests/fuzz/make_corpus.py [BUILD [stream|profile]]
       (BUILD default build; both kinds by default; run from the repo root)

stream/: what real processes send and share (stream format 3). The script
  plays the collector: it listens on a SOCK_SEQPACKET socket, runs test
  programs with libsqlprof.so preloaded and SQLPROF_SOCK pointing at it,
  keeps the messages they send and the descriptors that come with them
  (rings and the statistics memfd), and reads the threads' rings as the
  collector does (advancing their tail, so that nothing waits). Seeds:
  - single messages (the fuzzer's whole-input reading) and runs of
    consecutive messages of one connection, each prefixed by its length
    as a little-endian uint32 (its split reading);
  - the records read from the rings, as messages of up to 48 records
    (sampled executions, SQL texts, stacks, errors, plans: what rings
    carry now) and as ring-* seeds (tail 0 and head at their length,
    then the records: the ring reading);
  - the statistics memfd of each image as SP_REC_STATS_COPY messages (a
    copy of the header chunk and of each chunk up to its used, one per
    message, as the preload sends them when it could not share them),
    alone and behind HELLO with BYE after them, length-prefixed;
  - stats-* seeds for the statistics reading: the writer's base address
    (8 bytes) and chunk 1 up to its used; and one header chunk alone.
  A run under tests/progs/nomemfd (memfd_create refused) adds the copies
  the preload itself sends.
profile/: profiles written by `sqlprof record` of the same programs,
  VACUUMed to 512-byte pages (the same content, smaller files), behind a
  selector byte for the raw file reading; and their rows re-encoded in
  fuzz_profile.c's row format (at most 40 rows a table) behind selector
  bytes for the row reading, once for the loaders and once for a command.
  At most 50 KB each.
Seed names are content hashes, so re-running adds no duplicates (delete
corpus/stream/ first to replace it after a wire format change).
"""
import array, hashlib, mmap, os, select, shutil, socket, sqlite3, struct, subprocess, sys, tempfile, time

MAXSEED = 50 * 1024
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
build = os.path.join(root, sys.argv[1] if len(sys.argv) > 1 else "build")
kinds = sys.argv[2:] or ["stream", "profile"]
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
# Stream only: memfd_create refused, so the preload sends its statistics
# as copies (SP_REC_STATS_COPY) before BYE.
STREAM_ONLY = [
    ("nomemfd", [os.path.join(progs, "nomemfd"), os.path.join(progs, "longrun"), "300"], {}),
]

# sp_wire.h
MAGIC, VERSION = 0x46525053, 6
REC_STATS_COPY, REC_RING, REC_STATS, REC_HELLO, REC_BYE, REC_PAD = 13, 11, 12, 1, 8, 0xFFFF
STATS_MAGIC, CHUNK = 0x54535053, 64 * 1024
STATS_HDR = 64  # sizeof(struct sp_stats_hdr)
RING_HEAD, RING_TAIL, RING_DATA = 64, 128, 192  # offsets in struct sp_ring_shared


def save(kind, data, prefix=""):
    if not data or len(data) > MAXSEED:
        return 0
    d = os.path.join(out, kind)
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, prefix + hashlib.sha1(data).hexdigest()[:16])
    if os.path.exists(p):
        return 0
    with open(p, "wb") as f:
        f.write(data)
    return 1


def records(msg):
    """(type, record bytes) of a message, or [] when it is not one."""
    if len(msg) < 32 or struct.unpack_from("<I", msg, 0)[0] != MAGIC:
        return []
    recs, off = [], 32
    while off + 8 <= len(msg):
        t, _, l = struct.unpack_from("<HHI", msg, off)
        if l < 8 or l % 8 or off + l > len(msg):
            break
        recs.append((t, msg[off:off + l]))
        off += l
    return recs


def message(pid, recs, seq=0):
    body = b"".join(recs)
    return struct.pack("<IHHIIQQ", MAGIC, VERSION, 0, pid, 32 + len(body), seq, 0) + body


class Ring:
    """A thread's ring as the collector reads it: whole records from our
    tail to the writer's head, then the tail stored (the writer waits for
    room otherwise)."""

    def __init__(self, fd, size):
        self.m = mmap.mmap(fd, RING_DATA + size)
        self.size = size
        self.pid = struct.unpack_from("<I", self.m, 8)[0]
        self.recs = []

    def drain(self):
        head = struct.unpack_from("<I", self.m, RING_HEAD)[0]
        tail = struct.unpack_from("<I", self.m, RING_TAIL)[0]
        if (head - tail) & 0xFFFFFFFF > self.size:
            return
        while tail != head:
            off = tail & (self.size - 1)
            t, _, l = struct.unpack_from("<HHI", self.m, RING_DATA + off)
            if l < 8 or l % 8 or l > self.size - off or l > ((head - tail) & 0xFFFFFFFF):
                return  # broken: stop reading it
            if t != REC_PAD:
                self.recs.append(bytes(self.m[RING_DATA + off:RING_DATA + off + l]))
            tail = (tail + l) & 0xFFFFFFFF
        struct.pack_into("<I", self.m, RING_TAIL, tail)


def capture(argv, env_extra):
    """Run argv under the preload with ourselves as the collector; return
    ({connection number: [message, ...]}, [Ring, ...], [(pid, statistics bytes), ...])."""
    path = os.path.join(tmp, "s")
    if os.path.exists(path):
        os.unlink(path)
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ls.bind(path)
    ls.listen(64)
    env = dict(os.environ, LD_PRELOAD=lib, SQLPROF_SOCK=path, **env_extra)
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conns, msgs, n = {}, {}, 0
    rings, statfds = [], []
    deadline = None
    while True:
        socks = [ls] + list(conns)
        r, _, _ = select.select(socks, [], [], 0.05)
        for s in r:
            if s is ls:
                c, _ = ls.accept()
                conns[c] = n
                msgs[n] = []
                n += 1
                continue
            try:
                m, fds, _, _ = socket.recv_fds(s, 1 << 20, 8)
            except OSError:
                m, fds = b"", []
            if not m:
                del conns[s]
                s.close()
                for fd in fds:
                    os.close(fd)
                continue
            msgs[conns[s]].append(m)
            recs = records(m)
            for fd in fds:
                for t, rec in recs:
                    if t == REC_RING and len(rec) >= 24:
                        try:
                            rings.append(Ring(fd, struct.unpack_from("<I", rec, 16)[0]))
                        except (OSError, ValueError):
                            pass
                    elif t == REC_STATS and len(rec) >= 24:
                        statfds.append((struct.unpack_from("<I", rec, 8)[0], os.dup(fd)))
                os.close(fd)  # a ring stays mapped, the statistics' memfd dup'd
        for ring in rings:
            ring.drain()
        if child.poll() is not None:
            deadline = deadline or time.time() + 2
            if not conns or time.time() > deadline:
                break
    ls.close()
    for ring in rings:
        ring.drain()
    stats = []
    for pid, fd in statfds:
        try:
            with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as m:
                if struct.unpack_from("<I", m, 0)[0] == STATS_MAGIC:
                    nch = min(struct.unpack_from("<I", m, 32)[0], len(m) // CHUNK, 64)
                    stats.append((pid, bytes(m[:nch * CHUNK])))
        except (OSError, ValueError):
            pass
        os.close(fd)
    return msgs, rings, stats


def chunk_copies(pid, buf):
    """The STATS_COPY records of a statistics buffer, as stats_copy() in
    preload/stream.c makes them."""
    recs = []
    for ci in range(len(buf) // CHUNK):
        c = buf[ci * CHUNK:(ci + 1) * CHUNK]
        used = STATS_HDR if ci == 0 else struct.unpack_from("<I", c, 4)[0]
        if used < 16 or used > CHUNK:
            continue
        data = c[:used] + b"\0" * (-used % 8)
        recs.append(struct.pack("<HHIIIII", REC_STATS_COPY, 0, 24 + len(data), pid, pid, ci, used) + data)
    return recs


def prefixed(ms):
    blob = b""
    for m in ms:
        if len(blob) + 4 + len(m) > MAXSEED:
            break
        blob += struct.pack("<I", len(m)) + m
    return blob


def stream_seeds():
    n = 0
    for name, argv, env in PROGRAMS + STREAM_ONLY:
        msgs, rings, stats = capture(argv, env)
        for conn, ms in msgs.items():
            for m in ms:
                n += save("stream", m)
            # runs of consecutive messages, length-prefixed
            for start in range(0, len(ms), 3):
                n += save("stream", prefixed(ms[start:start + 6]))
        for ring in rings[:8]:
            recs = ring.recs
            for start in range(0, min(len(recs), 480), 48):
                part = recs[start:start + 48]
                m = message(ring.pid, part)
                n += save("stream", m)
                body = b"".join(part)[:8192]
                n += save("stream", struct.pack("<II", 0, len(body)) + body, "ring-")
        for pid, buf in stats[:4]:
            base = struct.unpack_from("<Q", buf, 24)[0]
            copies = chunk_copies(pid, buf)
            hello = next((rec for ms in msgs.values() for m in ms for t, rec in records(m)
                          if t == REC_HELLO and struct.unpack_from("<I", rec, 8)[0] == pid), None)
            bye = struct.pack("<HHIIIQQQiI", REC_BYE, 0, 48, pid, pid, 0, 0, 0, 0, 0)
            for rec in copies[:3]:
                n += save("stream", message(pid, [rec]))
            if hello:
                # the HELLO without its STATS record: an image that could not share
                seq = [message(pid, [hello], 1)] + [message(pid, [r], i + 2) for i, r in enumerate(copies)]
                n += save("stream", prefixed(seq + [message(pid, [bye], len(seq) + 1)]))
            if len(buf) >= 2 * CHUNK:
                used = struct.unpack_from("<I", buf, CHUNK + 4)[0]
                if 16 <= used <= CHUNK:
                    n += save("stream", struct.pack("<Q", base) + buf[CHUNK:CHUNK + min(used, MAXSEED - 8)],
                              "stats-")
            hdr = bytearray(buf[:STATS_HDR])
            struct.pack_into("<I", hdr, 32, 1)  # nchunks: the header chunk only
            n += save("stream", bytes(hdr), "stats-")
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
    for f in [lib, sqlprof] + [a[1][0] for a in PROGRAMS + STREAM_ONLY] + [STREAM_ONLY[0][1][1]]:
        if not os.path.exists(f):
            sys.exit("make_corpus: %s missing (make all progs BUILD=...)" % f)
    try:
        if "stream" in kinds:
            print("stream seeds added: %d" % stream_seeds())
        if "profile" in kinds:
            print("profile seeds added: %d" % profile_seeds())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()
