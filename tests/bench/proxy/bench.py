#!/usr/bin/env python3
"""Side-by-side benchmark of TCP proxies on 127.0.0.1 (see ../../../shared
design BENCH.md): direct (no proxy), prismlb (mod_tcp_proxy) at its default
`threads` and at `threads = 1`, HAProxy `mode tcp` and nginx `stream`, each
at its defaults, interleaved over ROUNDS rounds.

Measures per path: bulk throughput (iperf3), keep-alive request rate and
p99 latency (wrk -c32 to a local nginx HTTP server), new connections per
second (wrk with Connection: close), and for the proxies the CPU time of
their own processes (user + system, from /proc) per GB of bulk, per
keep-alive request and per new connection, and their RSS idle and with
IDLE_CONNS idle connections (once, on fresh processes). After the rounds, a
separate phase counts each proxy's system calls (perf stat on the
raw_syscalls tracepoint, in the kernel, so the proxy is not slowed as under
strace) during one keep-alive and one Connection: close wrk run: system
calls per request and per new connection, with the main kinds apart.
Prints Markdown tables of medians with min-max and the ratio to HAProxy.

Environment: PRISMLB_BUILD_ROOT (default ./build), ROUNDS (5), IPERF_SECONDS
(3), WRK_SECONDS (4), IDLE_CONNS (10000; capped by RLIMIT_NOFILE, since a
proxy holds two descriptors per connection), HAPROXY_NBTHREAD (HAProxy's
default when unset), PRISMLB_THREADS (prismlb's `threads`; its default, one
per CPU, when unset; a second prismlb with `threads = 1` runs beside it),
WRK_THREADS (wrk -t, 2), SYSCALL_SECONDS (3, each wrk run of the system call
phase), MEASURE (a comma list of bulk, rps, cps, mem, sys: what to measure;
all by default). Every process is started here
and stopped by its PID; every wait is bounded.
"""
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
BUILD = os.path.abspath(os.environ.get("PRISMLB_BUILD_ROOT", os.path.join(SRC, "build")))
ROUNDS = int(os.environ.get("ROUNDS", "5"))
IPERF_S = int(os.environ.get("IPERF_SECONDS", "3"))
WRK_S = int(os.environ.get("WRK_SECONDS", "4"))
IDLE_WANT = int(os.environ.get("IDLE_CONNS", "10000"))
# HAProxy's threads: its default (one per CPU) unless set; 1 compares the
# per-thread efficiency with single-threaded prismlb.
HAPROXY_NBTHREAD = os.environ.get("HAPROXY_NBTHREAD", "")
MEASURE = set(os.environ.get("MEASURE", "bulk,rps,cps,mem,sys").split(","))
SYS_S = int(os.environ.get("SYSCALL_SECONDS", "3"))
PRISMLB_THREADS = os.environ.get("PRISMLB_THREADS", "")
WRK_THREADS = int(os.environ.get("WRK_THREADS", "2"))

procs = []  # (name, Popen) started here, stopped by PID


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def start(name, argv, **kw):
    log("start %s: %s" % (name, " ".join(argv)))
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=kw.pop("stderr", subprocess.DEVNULL),
                         start_new_session=True, **kw)
    procs.append((name, p))
    return p


def stop_all():
    for name, p in reversed(procs):
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for name, p in reversed(procs):
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=5)


def rss_kib(pids):
    total = 0
    for pid in pids:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


def children(pid):
    """pid and its descendants (nginx master + workers)."""
    out = [pid]
    try:
        kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True,
                              timeout=5).stdout.split()
    except subprocess.TimeoutExpired:
        kids = []
    for k in kids:
        out += children(int(k))
    return out


def run(argv, timeout):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


# --------------------------------------------------------------------------
# Measurements

def iperf(port, pids):
    """Gbit/s, and the proxy's CPU seconds per GB received (None without
    pids)."""
    cpu0 = cpu_seconds(pids)
    rc, out = run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(IPERF_S), "-J"],
                  IPERF_S + 30)
    if rc != 0:
        raise RuntimeError("iperf3 failed: " + out[-400:])
    cpu = cpu_seconds(pids) - cpu0
    got = json.loads(out)["end"]["sum_received"]
    per_gb = cpu / (got["bytes"] / 1e9) if pids and got["bytes"] else None
    return got["bits_per_second"] / 1e9, per_gb


def cpu_seconds(pids):
    """User + system CPU time of pids (all their threads) so far."""
    ticks = 0
    for pid in pids:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def wrk(port, close, pids, seconds=None):
    """req/s, p99 ms, and the proxy's CPU microseconds per request (None
    without pids)."""
    seconds = seconds or WRK_S
    cpu0 = cpu_seconds(pids)
    argv = ["wrk", "-t%d" % WRK_THREADS, "-c32", "-d%ds" % seconds, "--latency", "--timeout", "5s"]
    if close:
        argv += ["-H", "Connection: close"]
    argv.append("http://127.0.0.1:%d/" % port)
    rc, out = run(argv, seconds + 30)
    if rc != 0:
        raise RuntimeError("wrk failed: " + out[-400:])
    cpu = cpu_seconds(pids) - cpu0
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    done = int(re.search(r"(\d+) requests in", out).group(1))
    per_req = cpu * 1e6 / max(done, 1) if pids else None
    m = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    p99 = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errs = re.search(r"Socket errors: (.*)", out)
    if errs or socket_errs:
        log("  wrk port %d: %s %s" % (port, errs.group(0) if errs else "",
                                      socket_errs.group(0) if socket_errs else ""))
    return rps, p99, per_req, done


# System calls counted by kind in the system call phase (any other is only
# in the total); a kind sums its variants.
SYS_KINDS = {
    "epoll_wait": ("epoll_wait", "epoll_pwait", "epoll_pwait2"),
    "epoll_ctl": ("epoll_ctl",),
    "read": ("read", "recvfrom", "recvmsg", "readv"),
    "write": ("write", "sendto", "sendmsg", "writev"),
    "splice": ("splice",),
    "accept": ("accept", "accept4"),
    "sockopt": ("setsockopt", "getsockopt"),
    "socket+connect": ("socket", "connect"),
    "close+shutdown": ("close", "shutdown"),
    "futex": ("futex",),
}


def syscalls(port, close, pids):
    """The system calls of pids (every thread) per request during one wrk
    run of SYS_S seconds: {"total": n, kind: n, ...}."""
    events = ["raw_syscalls:sys_enter"] + ["syscalls:sys_enter_" + n
                                           for v in SYS_KINDS.values() for n in v]
    out = tempfile.NamedTemporaryFile(mode="r", suffix=".perf", delete=False)
    out.close()
    perf = subprocess.Popen(["perf", "stat", "-x", ",", "-o", out.name, "-e", ",".join(events),
                             "-p", ",".join(str(p) for p in pids)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        time.sleep(0.5)  # perf attaches
        if perf.poll() is not None:
            raise RuntimeError("perf stat failed: " + perf.stderr.read()[-400:])
        _, _, _, done = wrk(port, close, [], SYS_S)
    finally:
        if perf.poll() is None:
            os.kill(perf.pid, signal.SIGINT)
        try:
            perf.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(perf.pid, signal.SIGKILL)
            perf.wait(timeout=5)
    counts = {}
    with open(out.name) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) < 3 or not parts[0].replace(".", "").isdigit():
                continue
            counts[parts[2].split(":")[1].replace("sys_enter_", "")] = float(parts[0])
    os.unlink(out.name)
    if "sys_enter" not in counts:
        raise RuntimeError("perf stat counted nothing")
    per = {"total": counts["sys_enter"] / max(done, 1)}
    for kind, names in SYS_KINDS.items():
        per[kind] = sum(counts.get(n, 0.0) for n in names) / max(done, 1)
    return per


def idle_memory(port, pids, n):
    base = rss_kib(pids)
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "idle_conns.py"), str(port), str(n),
                          "120"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = ""
        end = time.monotonic() + 90
        while time.monotonic() < end and not line.startswith("ready"):
            line = p.stdout.readline()
            if not line:
                break
        got = int(line.split()[1]) if line.startswith("ready") else 0
        time.sleep(2.0)  # let the proxy finish its upstream dials
        loaded = rss_kib(pids)
    finally:
        p.stdin.close()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=5)
    time.sleep(1.0)
    return base, loaded, got


# --------------------------------------------------------------------------
# Set-up

def main():
    for tool in ("iperf3", "wrk", "haproxy", "nginx", "pgrep") + (("perf",) if "sys" in MEASURE else ()):
        if not shutil.which(tool):
            sys.exit("missing %s: run tests/setup.sh bench" % tool)
    prismlb = os.path.join(BUILD, "core", "prismlb")
    if not os.access(prismlb, os.X_OK):
        sys.exit("no %s: build first (PRISMLB_BUILD_ROOT)" % prismlb)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    idle_n = min(IDLE_WANT, (hard - 1000) // 2)
    if idle_n < IDLE_WANT:
        log("note: RLIMIT_NOFILE hard limit %d allows %d idle connections per proxy, not %d"
            % (hard, idle_n, IDLE_WANT))
    tmp = tempfile.mkdtemp(prefix="prismlb-bench-")
    try:
        return bench(tmp, prismlb, idle_n)
    finally:
        stop_all()
        shutil.rmtree(tmp, ignore_errors=True)


def start_prismlb(tmp, prismlb, name, threads, ports, paths):
    """prismlb (threads: its `threads`, "" for its default) with two
    tcp_proxy instances, one per backend, each fed by a static endpoint
    source (the lifecycle test module's `publish`); paths[name] gets its
    ports. Returns its Popen."""
    pp = {"iperf": free_port(), "http": free_port()}
    conf = os.path.join(tmp, name + ".conf")
    with open(conf, "w") as f:
        f.write(("threads = %s;\n" % threads if threads else "") + """log_level = "warn";
instances = (
  { module = "lifecycle"; name = "iperf-eps"; trace_file = "%s.trace";
    publish = ["127.0.0.1:%d"]; },
  { module = "lifecycle"; name = "http-eps"; trace_file = "%s.trace";
    publish = ["127.0.0.1:%d"]; },
  { module = "tcp_proxy"; name = "iperf"; upstreams = ["iperf-eps"];
    bind_address = "127.0.0.1"; bind_port = %d; },
  { module = "tcp_proxy"; name = "http"; upstreams = ["http-eps"];
    bind_address = "127.0.0.1"; bind_port = %d; }
);
""" % (name, ports["iperf"], name, ports["http"], pp["iperf"], pp["http"]))
    env = dict(os.environ)
    env["PRISMLB_MODULE_PATH"] = ":".join([os.path.join(BUILD, "modules", "mod_tcp_proxy"),
                                           os.path.join(BUILD, "tests", "modules")])
    p = start(name, [prismlb, "--config", conf], env=env, cwd=tmp,
              stderr=open(os.path.join(tmp, name + ".log"), "w"))
    paths[name] = pp
    return p


def bench(tmp, prismlb, idle_n):
    ports = {k: free_port() for k in ("iperf", "http")}
    # Backends: iperf3 server and an nginx HTTP server (one worker).
    start("iperf3-server", ["iperf3", "-s", "-B", "127.0.0.1", "-p", str(ports["iperf"])])
    with open(os.path.join(tmp, "backend.conf"), "w") as f:
        f.write("""worker_processes 1;
worker_rlimit_nofile 20000;
pid %(tmp)s/backend.pid;
error_log %(tmp)s/backend.err warn;
events { worker_connections 19000; }
http {
  access_log off;
  client_body_temp_path %(tmp)s; proxy_temp_path %(tmp)s; fastcgi_temp_path %(tmp)s;
  uwsgi_temp_path %(tmp)s; scgi_temp_path %(tmp)s;
  keepalive_requests 1000000;
  client_header_timeout 300s;
  server {
    listen 127.0.0.1:%(port)d backlog=4096;
    location / { return 200 "hello, world\\n"; }
  }
}
""" % {"tmp": tmp, "port": ports["http"]})
    start("nginx-backend", ["nginx", "-g", "daemon off;", "-p", tmp, "-c",
                            os.path.join(tmp, "backend.conf")])

    paths = {"direct": {"iperf": ports["iperf"], "http": ports["http"]}}
    pl = start_prismlb(tmp, prismlb, "prismlb", PRISMLB_THREADS, ports, paths)
    pl1 = start_prismlb(tmp, prismlb, "prismlb-t1", "1", ports, paths)

    hp = {"iperf": free_port(), "http": free_port()}
    with open(os.path.join(tmp, "haproxy.cfg"), "w") as f:
        # maxconn bounds its descriptors (2 per connection) by the limit.
        f.write("""global
  maxconn %d
%s
defaults
  mode tcp
  timeout connect 15s
  timeout client 1h
  timeout server 1h
frontend f_iperf
  bind 127.0.0.1:%d
  default_backend b_iperf
backend b_iperf
  server s1 127.0.0.1:%d
frontend f_http
  bind 127.0.0.1:%d
  default_backend b_http
backend b_http
  server s1 127.0.0.1:%d
""" % (idle_n + 200, ("  nbthread %s" % HAPROXY_NBTHREAD) if HAPROXY_NBTHREAD else "", hp["iperf"], ports["iperf"], hp["http"], ports["http"]))
    hap = start("haproxy", ["haproxy", "-db", "-f", os.path.join(tmp, "haproxy.cfg")])
    paths["haproxy"] = hp

    npp = {"iperf": free_port(), "http": free_port()}
    with open(os.path.join(tmp, "stream.conf"), "w") as f:
        f.write("""load_module /usr/lib/nginx/modules/ngx_stream_module.so;
worker_processes auto;
worker_rlimit_nofile 20000;
pid %(tmp)s/stream.pid;
error_log %(tmp)s/stream.err warn;
events { worker_connections 19000; }
stream {
  server { listen 127.0.0.1:%(i)d; proxy_pass 127.0.0.1:%(bi)d; }
  server { listen 127.0.0.1:%(h)d; proxy_pass 127.0.0.1:%(bh)d; }
}
""" % {"tmp": tmp, "i": npp["iperf"], "bi": ports["iperf"], "h": npp["http"],
       "bh": ports["http"]})
    ngx = start("nginx-stream", ["nginx", "-g", "daemon off;", "-p", tmp, "-c",
                                 os.path.join(tmp, "stream.conf")])
    paths["nginx"] = npp

    for name, pr in paths.items():
        for k, port in pr.items():
            if not wait_port(port):
                raise RuntimeError("%s %s port %d not listening" % (name, k, port))
    time.sleep(1.0)
    pids = {"prismlb": lambda: [pl.pid], "prismlb-t1": lambda: [pl1.pid],
            "haproxy": lambda: [hap.pid], "nginx": lambda: children(ngx.pid),
            "direct": lambda: []}

    order = ["direct", "prismlb", "prismlb-t1", "haproxy", "nginx"]
    res = {p: {k: [] for k in ("gbps", "rps", "p99", "cps", "rss_idle", "rss_loaded",
                               "per_conn", "cpu_gb", "cpu_req", "cpu_conn")} for p in order}
    sysc = {}  # (path, "req" or "conn") -> syscalls per request by kind
    # Memory first, on fresh processes: allocators keep what they got, so
    # a second measurement in the same process would see no growth.
    for p in order[1:] if "mem" in MEASURE else []:
        base, loaded, got = idle_memory(paths[p]["http"], pids[p](), idle_n)
        res[p]["rss_idle"].append(base)
        res[p]["rss_loaded"].append(loaded)
        res[p]["per_conn"].append((loaded - base) * 1024.0 / max(got, 1))
        log("  %-10s RSS idle %d KiB, with %d idle connections %d KiB (%.0f B/conn)"
            % (p, base, got, loaded, res[p]["per_conn"][-1]))
    opt = lambda v, f: "-" if v is None else f % v
    for rnd in range(ROUNDS):
        k = rnd % len(order)
        rot = order[k:] + order[:k]  # rotate the position of each path
        log("round %d/%d, order %s" % (rnd + 1, ROUNDS, " ".join(rot)))
        for p in rot if "bulk" in MEASURE else []:
            gbps, per_gb = iperf(paths[p]["iperf"], pids[p]())
            res[p]["gbps"].append(gbps)
            if per_gb is not None:
                res[p]["cpu_gb"].append(per_gb)
            log("  %-10s iperf3 %.2f Gbit/s, proxy CPU %s s/GB" % (p, gbps, opt(per_gb, "%.3f")))
        for p in rot if "rps" in MEASURE else []:
            rps, p99, per_req, _ = wrk(paths[p]["http"], False, pids[p]())
            res[p]["rps"].append(rps)
            res[p]["p99"].append(p99)
            if per_req is not None:
                res[p]["cpu_req"].append(per_req)
            log("  %-10s keep-alive %.0f req/s p99 %.2f ms, proxy CPU %s us/req"
                % (p, rps, p99, opt(per_req, "%.1f")))
        for p in rot if "cps" in MEASURE else []:
            cps, _, per_conn, _ = wrk(paths[p]["http"], True, pids[p]())
            res[p]["cps"].append(cps)
            if per_conn is not None:
                res[p]["cpu_conn"].append(per_conn)
            log("  %-10s new connections %.0f /s, proxy CPU %s us/conn"
                % (p, cps, opt(per_conn, "%.1f")))
    # System calls last, apart: counting costs the proxy a little CPU.
    for p in order[1:] if "sys" in MEASURE else []:
        for mode, close in (("req", False), ("conn", True)):
            sysc[(p, mode)] = syscalls(paths[p]["http"], close, pids[p]())
            log("  %-10s %.1f system calls per %s" % (p, sysc[(p, mode)]["total"],
                                                     "request" if mode == "req" else "connection"))
    report(res, sysc, order, idle_n)
    return 0


def fmt(vals, f):
    if not vals:
        return "—"
    return "%s (%s–%s)" % (f(statistics.median(vals)), f(min(vals)), f(max(vals)))


def report(res, sysc, order, idle_n):
    med = lambda p, k: statistics.median(res[p][k]) if res[p][k] else float("nan")
    h = "haproxy"
    g = lambda v: "%.2f" % v
    g3 = lambda v: "%.3f" % v
    i = lambda v: "%.0f" % v
    ms = lambda v: "%.2f" % v
    kib = lambda v: "%.0f" % (v / 1024.0 * 1024.0)
    print("| path | bulk Gbit/s | ×HAProxy | keep-alive req/s | ×HAProxy | p99 ms | ×HAProxy "
          "| new conn/s | ×HAProxy | RSS idle KiB | RSS with %d idle KiB | bytes/idle conn |"
          % idle_n)
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in order:
        r = lambda k: "%.2f" % (med(p, k) / med(h, k)) if res[h][k] and res[p][k] else "—"
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            p, fmt(res[p]["gbps"], g), r("gbps"), fmt(res[p]["rps"], i), r("rps"),
            fmt(res[p]["p99"], ms), r("p99"), fmt(res[p]["cps"], i), r("cps"),
            fmt(res[p]["rss_idle"], kib), fmt(res[p]["rss_loaded"], kib),
            fmt(res[p]["per_conn"], i)))
    print()
    sc = lambda p, m: "%.1f" % sysc[(p, m)]["total"] if (p, m) in sysc else "—"
    print("| proxy | CPU µs/req | ×HAProxy | ×nginx | CPU µs/new conn | ×HAProxy | ×nginx "
          "| CPU s/GB | ×HAProxy | ×nginx | syscalls/req | syscalls/new conn |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in order[1:]:
        r = lambda k, peer: ("%.2f" % (med(p, k) / med(peer, k))
                             if res[peer][k] and res[p][k] else "—")
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            p, fmt(res[p]["cpu_req"], g), r("cpu_req", h), r("cpu_req", "nginx"),
            fmt(res[p]["cpu_conn"], g), r("cpu_conn", h), r("cpu_conn", "nginx"),
            fmt(res[p]["cpu_gb"], g3), r("cpu_gb", h), r("cpu_gb", "nginx"),
            sc(p, "req"), sc(p, "conn")))
    if sysc:
        print()
        print("| proxy | per | total | " + " | ".join(SYS_KINDS) + " |")
        print("|---|---|---|" + "---|" * len(SYS_KINDS))
        for p in order[1:]:
            for m in ("req", "conn"):
                if (p, m) in sysc:
                    v = sysc[(p, m)]
                    print("| %s | %s | %.2f | %s |" % (
                        p, "request" if m == "req" else "new conn", v["total"],
                        " | ".join("%.2f" % v[k] for k in SYS_KINDS)))
    print()
    print("prismlb threads: %s, and 1 (prismlb-t1); HAProxy nbthread: %s; nginx "
          "worker_processes auto. "
          % (PRISMLB_THREADS or "default (one per CPU)", HAPROXY_NBTHREAD or "default"))
    print("Medians of %d interleaved rounds (min–max); iperf3 -t %d, wrk -t%d -c32 -d%ds; "
          "ratios are medians over the peer's (for p99 and CPU, lower is better). Memory: VmRSS "
          "(all processes of nginx) measured once on fresh processes before the rounds; "
          "bytes/idle conn = (RSS with the idle connections - RSS idle) / connections. "
          "CPU: the proxy's user + system CPU time (all its threads and processes, from "
          "/proc) during the iperf3 run over the GB received, and during the keep-alive "
          "and the Connection: close wrk runs over the requests wrk completed. System "
          "calls: perf stat on raw_syscalls:sys_enter of the proxy's processes during one "
          "wrk -d%ds run of each kind after the rounds, over the requests completed "
          "(read and write count recv/send and their vector forms)."
          % (ROUNDS, IPERF_S, WRK_THREADS, WRK_S, SYS_S))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        stop_all()
        sys.exit(130)
