#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""agent_soak.py - the agent's soak (issue 24, item 5): a service making
RATE new SQL texts a second (tests/progs/soak) and PROCS short processes a
second (tests/progs/service, 20 executions each) under one `sqlprof agent
--metrics`, for SECONDS. Measures, and prints as one JSON object:

  rss_kb            [t, VmRSS, RssAnon, RssShmem] of the agent once a second
                    (its own process: snapshot children are not counted;
                    RssShmem is the services' statistics it has read)
  scrape_s          each GET /metrics (every --scrape-every seconds)
  scrape_busy       scrapes answered with the last exposition rendered
                    while the agent's loop was busy (metrics.c: a
                    "# sqlprof: the agent was busy" first line)
  scrape_executions the sum of sqlprof_query_executions_total it answered
                    (a counter: --check fails when it goes down)
  profile_age_s     the profile's age (now - mtime) once a second
  agent_cpu_s       the agent's CPU seconds before SIGTERM: its own, its
                    snapshots' (user + system)
  load              the load average (1 minute) once a minute
  sigterm_s         SIGTERM to the agent's exit
  ran, profiled     executions the processes ran (their count files) and
                    those the final profile holds (report --format json)

It judges nothing itself unless --check is given: then it exits 1 when the
totals differ, when the executions /metrics counts go down, or when RssAnon after the first --warmup seconds grew by
more than --rss-growth-kb (the median of its last three samples against
that of its first three) (no wall-time verdict: those are for make bench to
print). Used by make bench (10 minutes) and by
tests/integration/t_agent_soak.sh (scaled down, under timeout and
ulimit -v).
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def rss_kb(pid):
    """VmRSS, RssAnon and RssShmem (the services' statistics the agent
    has mapped and read: their memory, counted in theirs too), KiB."""
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k = line.split(":")[0]
                if k in ("VmRSS", "RssAnon", "RssShmem"):
                    out[k] = int(line.split()[1])
    except OSError:
        return None
    return [out.get("VmRSS", 0), out.get("RssAnon", 0), out.get("RssShmem", 0)]


def cpu_s(pid):
    """[own, its snapshot children's] CPU seconds (user + system) of the
    agent so far (/proc/PID/stat: utime + stime, cutime + cstime)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            v = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    hz = os.sysconf("SC_CLK_TCK")
    return [round((int(v[11]) + int(v[12])) / hz, 2), round((int(v[13]) + int(v[14])) / hz, 2)]


def executions(body):
    """The sum of sqlprof_query_executions_total in an exposition."""
    n = 0
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith("sqlprof_query_executions_total"):
            n += int(float(line.rsplit(" ", 1)[1]))
    return n


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--procs", type=float, default=3)
    ap.add_argument("--interval", type=float, default=10)
    ap.add_argument("--scrape-every", type=float, default=5)
    ap.add_argument("--warmup", type=float, default=60)
    ap.add_argument("--rss-growth-kb", type=int, default=0)
    ap.add_argument("--agent-args", default="")
    ap.add_argument("--texts-per-shape", type=int, default=0,
                    help="SQLPROF_TEXTS_PER_SHAPE of the processes (default 0, no limit: every "
                    "new text reaches the agent, its worst case; -1: the preload's default, "
                    "64, which folds the soak's texts in the service itself)")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--keep", help="copy the final profile here")
    a = ap.parse_args()

    build = os.path.abspath(a.build)
    sqlprof = os.path.join(build, "bin", "sqlprof")
    lib = os.path.join(build, "lib", "libsqlprof.so")
    progs = os.path.join(build, "progs")
    tmp = tempfile.mkdtemp(prefix="sqlprof-soak.")
    os.chmod(tmp, 0o700)
    sock = os.path.join(tmp, "run", "sock")
    prof = os.path.join(tmp, "soak.db")
    port = free_port()
    err = open(os.path.join(tmp, "agent.err"), "a+")
    argv = [sqlprof, "agent", "-o", prof, "--socket", sock, "--interval", str(a.interval),
            "--metrics", "127.0.0.1:%d" % port] + a.agent_args.split()
    ag = subprocess.Popen(argv, stderr=err, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    for _ in range(500):
        err.seek(0)
        if "listening" in err.read():
            break
        if ag.poll() is not None:
            err.seek(0)
            sys.exit("agent_soak: the agent exited: " + err.read())
        time.sleep(0.02)
    env = dict(os.environ, LD_PRELOAD=lib, SQLPROF_SOCK=sock, SQLPROF_RATE="0.01")
    env.pop("SQLPROF_TEXTS_PER_SHAPE", None)
    if a.texts_per_shape >= 0:
        env["SQLPROF_TEXTS_PER_SHAPE"] = str(a.texts_per_shape)
    t0 = time.monotonic()
    main_count = os.path.join(tmp, "count.main")
    svc = subprocess.Popen([os.path.join(progs, "soak"), str(a.rate), str(int(a.seconds * 1000)),
                            main_count], env=env)
    res = {"seconds": a.seconds, "rate": a.rate, "procs_per_s": a.procs,
           "interval_s": a.interval, "rss_kb": [], "scrape_s": [], "scrape_bytes": [],
           "profile_age_s": [], "scrape_failures": 0, "scrape_busy": 0,
           "scrape_executions": [], "load": []}
    churn, counts, nproc = [], [main_count], 0
    next_proc = next_sample = next_scrape = t0
    while svc.poll() is None:
        now = time.monotonic()
        if a.procs > 0 and now >= next_proc:
            cf = os.path.join(tmp, "count.%d" % nproc)
            nproc += 1
            churn.append(subprocess.Popen([os.path.join(progs, "service"), "200", "100", cf],
                                          env=env))
            counts.append(cf)
            next_proc += 1.0 / a.procs
        churn = [p for p in churn if p.poll() is None]
        if now >= next_sample:
            r = rss_kb(ag.pid)
            if r is not None:
                res["rss_kb"].append([round(now - t0, 1)] + r)
            try:
                res["profile_age_s"].append([round(now - t0, 1),
                                             round(time.time() - os.stat(prof).st_mtime, 2)])
            except OSError:
                pass
            if int(now - t0) % 60 == 0:
                res["load"].append([round(now - t0), os.getloadavg()[0]])
            next_sample += 1
        if now >= next_scrape:
            s = time.monotonic()
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=60) as r:
                    body = r.read()
                res["scrape_s"].append([round(s - t0, 1), round(time.monotonic() - s, 4)])
                res["scrape_bytes"].append(len(body))
                res["scrape_executions"].append(executions(body))
                if body.startswith(b"# sqlprof: the agent was busy"):
                    res["scrape_busy"] += 1
            except Exception:
                res["scrape_failures"] += 1
            next_scrape += a.scrape_every
        time.sleep(0.02)
    for p in churn:
        p.wait()
    if svc.returncode != 0:
        sys.exit("agent_soak: the service exited %d" % svc.returncode)
    res["agent_cpu_s"] = cpu_s(ag.pid)
    s = time.monotonic()
    ag.send_signal(signal.SIGTERM)
    res["agent_rc"] = ag.wait()
    res["sigterm_s"] = round(time.monotonic() - s, 3)
    ran = 0
    for cf in counts:
        with open(cf) as f:
            ran += int(f.read())
    res["ran"] = ran
    out = subprocess.run([sqlprof, "report", "--format", "json", prof], capture_output=True,
                         text=True)
    d = json.loads(out.stdout) if out.returncode == 0 else {"queries": []}
    res["profiled"] = sum(q["count"] for q in d["queries"])
    res["profile_bytes"] = os.path.getsize(prof) if os.path.exists(prof) else 0
    res["processes"] = nproc + 1
    err.seek(0)
    res["agent_last_lines"] = err.read().splitlines()[-3:]
    rss = [r[2] for r in res["rss_kb"] if r[0] >= a.warmup]  # RssAnon: the agent's own
    res["rss_max_kb"] = max((r[1] for r in res["rss_kb"]), default=0)
    res["rss_anon_max_kb"] = max((r[2] for r in res["rss_kb"]), default=0)
    # growth: the median of the last three samples against that of the
    # first three after the warm-up (a scrape or a merge makes transient
    # peaks; a leak moves the medians)
    med3 = lambda xs: sorted(xs)[len(xs) // 2]
    res["rss_after_warmup_growth_kb"] = (med3(rss[-3:]) - med3(rss[:3])) if len(rss) >= 6 else 0
    res["scrape_max_s"] = max((x for _, x in res["scrape_s"]), default=0)
    res["profile_age_max_s"] = max((x for _, x in res["profile_age_s"]), default=0)
    if a.keep and os.path.exists(prof):
        subprocess.run(["cp", prof, a.keep])
        subprocess.run(["cp", os.path.join(tmp, "agent.err"), a.keep + ".agent.err"])
    print(json.dumps(res))
    subprocess.run(["rm", "-rf", tmp])
    if a.check:
        bad = []
        if res["agent_rc"] != 0:
            bad.append("the agent exited %d" % res["agent_rc"])
        if res["profiled"] != ran:
            bad.append("the profile holds %d executions, the processes ran %d" %
                       (res["profiled"], ran))
        ex = res["scrape_executions"]
        down = [(ex[i - 1], ex[i]) for i in range(1, len(ex)) if ex[i] < ex[i - 1]]
        if down:
            bad.append("the executions /metrics counted went down %d times (%d -> %d first)" %
                       (len(down), down[0][0], down[0][1]))
        if a.rss_growth_kb and res["rss_after_warmup_growth_kb"] > a.rss_growth_kb:
            bad.append("agent RssAnon grew by %d KiB after %g s (budget %d)" %
                       (res["rss_after_warmup_growth_kb"], a.warmup, a.rss_growth_kb))
        if bad:
            sys.exit("agent_soak: " + "; ".join(bad))


if __name__ == "__main__":
    main()
