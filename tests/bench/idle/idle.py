#!/usr/bin/env python3
"""Idle daemon benchmark: time from exec to listening, and idle RSS.

Starts prismlb with the metrics module only (conf/metrics-only.conf on a free
loopback port), and, side by side, interleaved, nginx and HAProxy serving one
HTTP port, the way tests/bench measures everything (see BENCH.md):

  listen_ms  from just before fork+exec until a TCP connect to the port
             succeeds (polled in a tight loop, no sleeps)
  rss_kib    VmRSS of the process (/proc/PID/status) after 500 ms idle, and
             after one scrape of /metrics (prismlb) or / (peers); with its
             anonymous part (RssAnon: the process's own memory) and PSS
             (/proc/PID/smaps_rollup: shared library pages divided among the
             processes mapping them)
  cpu_ms     CPU time the process used from exec until it listened
             (/proc/PID/schedstat, read right after the first connect): what
             start-up costs whatever the machine's load, where listen_ms
             includes waiting for a CPU
  --version  for prismlb, the wall and CPU time of `prismlb --version` too:
             loading its shared libraries and initialising them, with no
             config, module or socket; and `curl --version` (the same
             libcurl, OpenSSL and their dependencies) for reference

Each process is stopped by its PID. Prints a table of medians and min-max.
Usage: tests/bench/idle/run.sh [BUILD_DIR] [RUNS]
"""
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def vmrss_kib(pid):
    return status_kib(pid, "VmRSS")


def cpu_ms(pid):
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e6
    except (OSError, ValueError, IndexError):
        return -1.0


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def wait_listen(port, proc, limit_s=10.0):
    """Tight connect loop; returns the monotonic time of the first success."""
    deadline = time.monotonic() + limit_s
    while True:
        s = socket.socket()
        try:
            s.connect(("127.0.0.1", port))
            return time.monotonic()
        except OSError:
            pass
        finally:
            s.close()
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode} before listening")
        if time.monotonic() > deadline:
            raise RuntimeError("did not listen in time")


def prismlb(build, tmp, port):
    conf = os.path.join(tmp, "prismlb.conf")
    with open(os.path.join(TOP, "conf", "metrics-only.conf")) as f:
        text = f.read().replace("port = 7446", f"port = {port}")
    if f"port = {port}" not in text:
        raise RuntimeError("conf/metrics-only.conf no longer sets port = 7446")
    with open(conf, "w") as f:
        f.write(text)
    env = dict(os.environ, PRISMLB_MODULE_PATH=os.path.join(build, "modules"))
    return [os.path.join(build, "core", "prismlb"), "--config", conf,
            "--log-level", "warn"], env, f"http://127.0.0.1:{port}/metrics"


def nginx(build, tmp, port):
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; master_process off; worker_processes 1;
pid {tmp}/nginx.pid; error_log {tmp}/nginx.err warn;
events {{ worker_connections 64; }}
http {{ access_log off; client_body_temp_path {tmp}; proxy_temp_path {tmp};
  fastcgi_temp_path {tmp}; uwsgi_temp_path {tmp}; scgi_temp_path {tmp};
  server {{ listen 127.0.0.1:{port}; location / {{ return 200 "ok\\n"; }} }} }}
""")
    return ["/usr/sbin/nginx", "-p", tmp, "-c", conf], None, f"http://127.0.0.1:{port}/"


def haproxy(build, tmp, port):
    conf = os.path.join(tmp, "haproxy.cfg")
    with open(conf, "w") as f:
        f.write(f"""global
  nbthread 1
defaults
  mode http
  timeout client 5s
  timeout server 5s
  timeout connect 5s
frontend f
  bind 127.0.0.1:{port}
  http-request return status 200 content-type text/plain string ok
""")
    return ["/usr/sbin/haproxy", "-db", "-f", conf], None, f"http://127.0.0.1:{port}/"


def timed(argv):
    """Wall and CPU milliseconds of running argv to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = (time.monotonic() - t0) * 1000.0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000.0
    return wall, cpu


def one_run(name, make, build):
    tmp = tempfile.mkdtemp(prefix=f"prismlb-bench-{name}-")
    port = free_port()
    argv, env, url = make(build, tmp, port)
    log = open(os.path.join(tmp, "out.log"), "w")
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        t1 = wait_listen(port, proc)
        cpu = cpu_ms(proc.pid)
        time.sleep(0.5)
        rss_idle = vmrss_kib(proc.pid)
        with urllib.request.urlopen(url, timeout=5) as r:
            r.read()
        rss_scraped = vmrss_kib(proc.pid)
        return ((t1 - t0) * 1000.0, rss_idle, rss_scraped, status_kib(proc.pid, "RssAnon"),
                pss_kib(proc.pid), cpu)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def fmt(values, unit):
    med = statistics.median(values)
    return f"{med:8.1f} {unit} ({min(values):.1f}-{max(values):.1f})"


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(TOP, "build"))
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    subjects = [("prismlb (metrics only)", prismlb)]
    for name, make, exe in (("nginx 1 process", nginx, "/usr/sbin/nginx"),
                            ("haproxy nbthread 1", haproxy, "/usr/sbin/haproxy")):
        if os.access(exe, os.X_OK):
            subjects.append((name, make))
        else:
            print(f"# {exe} missing: {name} skipped (tests/setup.sh bench installs it)")
    results = {name: [] for name, _ in subjects}
    version = []
    curl_version = []
    exe = os.path.join(build, "core", "prismlb")
    for i in range(runs):  # interleaved: A B C A B C ...
        for name, make in subjects:
            results[name].append(one_run(name.split()[0], make, build))
        version.append(timed([exe, "--version"]))
        if shutil.which("curl"):
            curl_version.append(timed(["curl", "--version"]))
    print(f"# idle daemons, {runs} interleaved runs each, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"median (min-max)")
    print(f"| {'subject':<24} | {'exec to listening':<24} | {'CPU until listening':<24} "
          f"| {'RSS idle':<24} "
          f"| {'RSS after one request':<24} | {'of which RssAnon':<24} | {'PSS':<24} |")
    print(f"|{'-' * 26}|{'-' * 26}|{'-' * 26}|{'-' * 26}|{'-' * 26}|{'-' * 26}|{'-' * 26}|")
    for name, _ in subjects:
        r = results[name]
        print(f"| {name:<24} | {fmt([x[0] for x in r], 'ms'):<24} "
              f"| {fmt([x[5] for x in r], 'ms'):<24} "
              f"| {fmt([x[1] / 1024 for x in r], 'MiB'):<24} "
              f"| {fmt([x[2] / 1024 for x in r], 'MiB'):<24} "
              f"| {fmt([x[3] / 1024 for x in r], 'MiB'):<24} "
              f"| {fmt([x[4] / 1024 for x in r], 'MiB'):<24} |")
    for name, r in (("prismlb --version", version), ("curl --version", curl_version)):
        if r:
            print(f"| {name:<24} | {fmt([x[0] for x in r], 'ms') + ' to exit':<24} "
                  f"| {fmt([x[1] for x in r], 'ms') + ' in all':<24} "
                  f"| {'':<24} | {'':<24} | {'':<24} | {'':<24} |")
    with open("/proc/loadavg") as f:
        print(f"# load average at the end: {' '.join(f.read().split()[:3])} "
              f"({os.cpu_count()} CPUs)")
    p = results[subjects[0][0]]
    med_ms = statistics.median([x[0] for x in p])
    med_cpu = statistics.median([x[5] for x in p])
    med_rss = statistics.median([x[2] for x in p]) / 1024
    print(f"# prismlb targets: <= 20 ms to listen ({'met' if med_ms <= 20 else 'MISSED'}: "
          f"{med_ms:.1f} ms wall, {med_cpu:.1f} ms CPU), RSS <= 4 MiB "
          f"({'met' if med_rss <= 4 else 'MISSED'}: {med_rss:.2f} MiB)")


if __name__ == "__main__":
    main()
