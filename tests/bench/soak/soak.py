#!/usr/bin/env python3
"""Soak runs of prismlb's two roles (a command of tests/bench: not meson test).

proxy       endpoint_watch (static upstreams), tcp_proxy and metrics in front
            of UPSTREAMS echo servers, one of which goes down or comes back
            every FLAP_S seconds (its listener and every connection of it
            closed), while CLIENTS clients connect, echo a line and close in
            a loop.
reconciler  hetzner_lb and metrics against prismlb-fake-kube and
            prismlb-fake-hcloud, with Services of type LoadBalancer created
            and deleted and nodes cordoned and uncordoned, while every
            FAULT_S seconds one fault is set: a run of Hetzner 5xx, 423 or
            429 answers, Kubernetes 5xx answers, or every watch dropped.

Every SAMPLE_S seconds a line gives the daemon's open descriptors, RSS,
anonymous memory and the connection gauges (proxy: prismlb_connections_active
and the clients' successes and failures; reconciler: its TCP sockets and the
balancers it knows). At the end the load stops, the faults are cleared, the
state is left to settle, and the first sample after warm-up is compared with
the last: the run fails (exit 1) when descriptors grew by more than
FD_SLACK, RSS by more than RSS_SLACK_MIB, the daemon died, or (proxy) a
connection was left open once the clients stopped, or (reconciler) the
balancers do not match the Services once the faults are cleared.

Usage: tests/bench/soak/run.sh proxy|reconciler [MINUTES] [BUILD_DIR]
Knobs (environment): CLIENTS=200 UPSTREAMS=4 FLAP_S=3 SERVICES=30 NODES=10
FAULT_S=5 SAMPLE_S=30 WARMUP_S=60 FD_SLACK=8 RSS_SLACK_MIB=5.
"""
import asyncio
import http.client
import json
import multiprocessing as mp
import os
import random
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request


def knob(name, default):
    return type(default)(os.environ.get(name, default))


BUILD = os.environ["PRISMLB_BUILD_ROOT"]
SAMPLE_S = knob("SAMPLE_S", 30)
WARMUP_S = knob("WARMUP_S", 60)
FD_SLACK = knob("FD_SLACK", 8)
RSS_SLACK_MIB = knob("RSS_SLACK_MIB", 5.0)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def proc_figures(pid):
    """Open descriptors, their sockets, RSS and anonymous memory (KiB)."""
    fds = os.listdir("/proc/%d/fd" % pid)
    socks = 0
    for fd in fds:
        try:
            socks += os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
        except OSError:
            pass
    status = open("/proc/%d/status" % pid).read()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
    anon = int(re.search(r"RssAnon:\s+(\d+)", status).group(1))
    return len(fds), socks, rss, anon


def scrape(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        return r.read().decode()


def series_sum(text, family):
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith(family + "{") or line.startswith(family + " "):
            total += float(line.rsplit(" ", 1)[1])
            seen = True
    return total if seen else None


class Daemon:
    def __init__(self, work, conf, env):
        self.log = open(os.path.join(work, "prismlb.log"), "wb")
        path = os.path.join(work, "prismlb.conf")
        with open(path, "w") as f:
            f.write(conf)
        e = dict(os.environ)
        e.update(env)
        self.p = subprocess.Popen([os.path.join(BUILD, "core/prismlb"), "--config", path],
                                  stdout=self.log, stderr=subprocess.STDOUT, env=e)

    def alive(self):
        return self.p.poll() is None

    def stop(self):
        if self.alive():
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode


def wait_metrics(port, daemon, what):
    end = time.time() + 30
    while time.time() < end:
        if not daemon.alive():
            sys.exit("soak: the daemon exited before %s" % what)
        try:
            return scrape(port)
        except OSError:
            time.sleep(0.2)
    sys.exit("soak: /metrics never answered")


# ---------------------------------------------------------------- proxy


def upstreams_main(ports, flap_s, stop):
    """Echo servers on ports; every flap_s one goes down or comes back."""

    async def run():
        conns = {p: set() for p in ports}
        servers = {}

        async def start(port):
            async def handle(r, w):
                conns[port].add(w)
                try:
                    while True:
                        data = await r.read(4096)
                        if not data:
                            break
                        w.write(data)
                        await w.drain()
                except (ConnectionError, asyncio.CancelledError):
                    pass
                finally:
                    conns[port].discard(w)
                    w.close()

            servers[port] = await asyncio.start_server(handle, "127.0.0.1", port,
                                                       reuse_address=True)

        for p in ports:
            await start(p)
        rnd = random.Random(1)
        while not stop.is_set():
            await asyncio.sleep(flap_s)
            down = [p for p in ports if p not in servers]
            if down and (len(down) == len(ports) - 1 or rnd.random() < 0.5):
                await start(rnd.choice(down))
            else:
                p = rnd.choice(list(servers))
                servers.pop(p).close()
                for w in list(conns[p]):
                    w.transport.abort()

    asyncio.run(run())


def clients_main(port, n, ok, failed, stop):
    line = b"x" * 63 + b"\n"

    async def client():
        while not stop.is_set():
            try:
                r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
                w.write(line)
                got = await asyncio.wait_for(r.readexactly(len(line)), 5)
                w.close()
                with ok.get_lock():
                    ok.value += got == line
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
                with failed.get_lock():
                    failed.value += 1
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.1)

    async def run():
        await asyncio.gather(*(client() for _ in range(n)))

    asyncio.run(run())


def soak_proxy(work, seconds):
    n_up = knob("UPSTREAMS", 4)
    ports = [free_port() for _ in range(n_up)]
    lport, mport = free_port(), free_port()
    eps = ", ".join('"127.0.0.1:%d"' % p for p in ports)
    conf = """log_level = "warn";
instances = (
  { module = "endpoint_watch"; name = "upstreams"; endpoints = [ %s ];
    enable_discovery = false; },
  { module = "tcp_proxy"; name = "proxy"; upstreams = [ "upstreams" ];
    bind_address = "127.0.0.1"; bind_port = %d;
    health_interval = "2s"; health_timeout = "1s"; drain_timeout = "2s"; },
  { module = "metrics"; name = "metrics"; bind_address = "127.0.0.1"; port = %d; }
);
""" % (eps, lport, mport)
    stop = mp.Event()
    ok, failed = mp.Value("l", 0), mp.Value("l", 0)
    ups = mp.Process(target=upstreams_main, args=(ports, knob("FLAP_S", 3.0), stop))
    ups.start()
    d = Daemon(work, conf, {"PRISMLB_MODULE_PATH": os.path.join(BUILD, "modules")})
    wait_metrics(mport, d, "the load")
    idle_fds = proc_figures(d.p.pid)[0]
    cl = mp.Process(target=clients_main, args=(lport, knob("CLIENTS", 200), ok, failed, stop))
    cl.start()

    def sample(t0):
        fds, socks, rss, anon = proc_figures(d.p.pid)
        m = scrape(mport)
        return {"t": round(time.time() - t0), "fds": fds, "sockets": socks, "rss_kib": rss,
                "anon_kib": anon, "conns_active": series_sum(m, "prismlb_connections_active"),
                "upstreams_active": series_sum(m, "prismlb_upstreams_active"),
                "clients_ok": ok.value, "clients_failed": failed.value}

    samples = run_samples(d, seconds, sample)
    stop.set()
    cl.join(30)
    # Settled: the clients are gone; every connection must be closed.
    end = time.time() + 30
    while time.time() < end and (series_sum(scrape(mport), "prismlb_connections_active") or 0):
        time.sleep(0.5)
    final = sample(samples[0]["t0"])
    ups.join(30)
    final["idle_fds_before"] = idle_fds
    problems = compare(samples, final, idle_fds)
    if final["conns_active"]:
        problems.append("%d connection(s) still open 30 s after the clients stopped"
                        % final["conns_active"])
    return d, samples, final, problems


# ----------------------------------------------------------- reconciler


class Fakes:
    def __init__(self, work, services, nodes):
        with open(os.path.join(work, "seed.json"), "w") as f:
            json.dump({"tokens": ["tok"], "max_load_balancers": 2 * services,
                       "networks": [{"id": 7, "name": "k8s", "ip_range": "10.0.0.0/16",
                                     "subnets": [{"type": "cloud", "ip_range": "10.0.0.0/22"},
                                                 {"type": "vswitch", "ip_range": "10.0.8.0/22",
                                                  "vswitch_id": 1}]}]}, f)
        fk = os.path.join(BUILD, "tests/fakes")
        self.hz = subprocess.Popen(
            [os.path.join(fk, "hetzner/prismlb-fake-hcloud"), "--listen", "127.0.0.1:0",
             "--port-file", os.path.join(work, "hz.url"), "--seed",
             os.path.join(work, "seed.json"), "--rate-bucket", "1000000",
             "--rate-refill-per-s", "1000"],
            stdout=open(os.path.join(work, "hz.log"), "wb"), stderr=subprocess.STDOUT)
        os.mkdir(os.path.join(work, "tls"))
        state = os.path.join(work, "kube.state")
        self.kube = subprocess.Popen(
            [os.path.join(fk, "kube/prismlb-fake-kube"), "--tls-dir",
             os.path.join(work, "tls"), "--state-file", state],
            stdout=open(os.path.join(work, "kube.log"), "wb"), stderr=subprocess.STDOUT)
        end = time.time() + 30
        while time.time() < end:
            try:
                s = open(state).read()
                u = open(os.path.join(work, "hz.url")).read().strip()
                if "ready" in s and u:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        self.hz_url = u
        self.hz_base = u[:-3] if u.endswith("/v1") else u
        self.kube_url = re.search(r"^server 0 (\S+)", s, re.M).group(1)
        self.admin = re.search(r"^admin (\S+)", s, re.M).group(1)
        tls = os.path.join(work, "tls")
        self.ctx = ssl.create_default_context(cafile=os.path.join(tls, "ca.crt"))
        self.ctx.load_cert_chain(os.path.join(tls, "client.crt"), os.path.join(tls, "client.key"))
        self.ctx.check_hostname = False
        self.kubeconfig = os.path.join(work, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            f.write("""apiVersion: v1
kind: Config
clusters:
- cluster: {certificate-authority: %s/ca.crt, server: "%s"}
  name: fake
contexts:
- context: {cluster: fake, user: me}
  name: fake
current-context: fake
users:
- name: me
  user: {client-certificate: %s/client.crt, client-key: %s/client.key}
""" % (tls, self.kube_url, tls, tls))

    def kube_req(self, method, path, body=None, ctype="application/json"):
        u = urllib.parse.urlparse(self.kube_url)
        c = http.client.HTTPSConnection(u.hostname, u.port, context=self.ctx, timeout=30)
        c.request(method, path, json.dumps(body) if body is not None else None,
                  {"Content-Type": ctype} if body is not None else {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def hz_admin(self, method, path, body=None):
        req = urllib.request.Request(self.hz_base + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"null")

    def kube_admin(self, method, path, body=None):
        req = urllib.request.Request(self.admin + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read()

    def stop(self):
        for p in (self.hz, self.kube):
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


def node(name, ip):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"addresses": [{"type": "InternalIP", "address": ip}],
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def service(name, port):
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": "LoadBalancer", "selector": {"app": name},
                     "ports": [{"name": "http", "port": 80, "protocol": "TCP",
                                "nodePort": port}]}}


def soak_reconciler(work, seconds):
    n_svc, n_nodes = knob("SERVICES", 30), knob("NODES", 10)
    fk = Fakes(work, n_svc, n_nodes)
    try:
        return soak_reconciler_with(work, seconds, fk, n_svc, n_nodes)
    finally:
        fk.stop()


def soak_reconciler_with(work, seconds, fk, n_svc, n_nodes):
    for i in range(n_nodes):
        n = node("n%d" % i, "10.0.8.%d" % (10 + i))
        st, _ = fk.kube_req("POST", "/api/v1/nodes", n)
        assert st == 201, st
        # The status is not written by a create, as on a real API server.
        st, _ = fk.kube_req("PATCH", "/api/v1/nodes/n%d/status" % i, {"status": n["status"]},
                            "application/merge-patch+json")
        assert st == 200, st
    mport = free_port()
    conf = """log_level = "warn";
instances = (
  { module = "hetzner_lb"; name = "hz"; hcloud_endpoint = "%s"; kubeconfig = "%s";
    resync_interval = "20s"; refused_recheck_interval = "5s"; default_network = "k8s";
    resync_budget_percent = 100; },
  { module = "metrics"; name = "metrics"; bind_address = "127.0.0.1"; port = %d; }
);
""" % (fk.hz_url, fk.kubeconfig, mport)
    d = Daemon(work, conf, {"PRISMLB_MODULE_PATH": os.path.join(BUILD, "modules"),
                            "ROBOTLB_HCLOUD_TOKEN": "tok"})
    wait_metrics(mport, d, "the load")
    live = set()
    rnd = random.Random(2)
    port = [30000]

    def churn():
        # Between n_svc/2 and n_svc Services: create one, or delete one.
        if len(live) < n_svc and (len(live) < n_svc // 2 or rnd.random() < 0.6):
            port[0] += 1
            name = "svc-%d" % port[0]
            st, _ = fk.kube_req("POST", "/api/v1/namespaces/default/services",
                                service(name, 30000 + port[0] % 2000))
            if st == 201:
                live.add(name)
        elif len(live) > n_svc // 2:
            name = rnd.choice(sorted(live))
            st, _ = fk.kube_req("DELETE", "/api/v1/namespaces/default/services/" + name)
            if st in (200, 404):
                live.discard(name)
        n = "n%d" % rnd.randrange(n_nodes)
        fk.kube_req("PATCH", "/api/v1/nodes/" + n,
                    {"spec": {"unschedulable": rnd.random() < 0.3}},
                    "application/merge-patch+json")

    def fault():
        k = rnd.randrange(5)
        if k == 0:
            fk.hz_admin("POST", "/_admin/faults",
                        {"fail_requests": {"count": rnd.randrange(1, 20),
                                           "status": rnd.choice([500, 502, 503])}})
        elif k == 1:
            fk.hz_admin("POST", "/_admin/faults",
                        {"fail_requests": {"count": rnd.randrange(1, 10), "status": 423,
                                           "code": "locked"}})
        elif k == 2:
            fk.hz_admin("POST", "/_admin/faults",
                        {"fail_requests": {"count": rnd.randrange(1, 20), "status": 429,
                                           "code": "rate_limit_exceeded"}})
        elif k == 3:
            fk.kube_admin("POST", "/faults", {"fail_count": rnd.randrange(1, 10),
                                              "fail_status": rnd.choice([500, 503])})
        else:
            fk.kube_admin("POST", "/watches/close?mode=drop")

    last = {"fault": 0.0}
    fault_s = knob("FAULT_S", 5.0)

    def sample(t0):
        now = time.time()
        if now - last["fault"] >= fault_s:
            fault()
            last["fault"] = now
        churn()
        fds, socks, rss, anon = proc_figures(d.p.pid)
        m = scrape(mport)
        return {"t": round(now - t0), "fds": fds, "sockets": socks, "rss_kib": rss,
                "anon_kib": anon, "balancers": series_sum(m, "prismlb_hetzner_lb_balancers"),
                "services": len(live)}

    samples = run_samples(d, seconds, sample, tick=1.0,
                          ready=lambda s: (s["balancers"] or 0) > 0)
    # Faults cleared; the balancers must come to match the Services.
    fk.hz_admin("DELETE", "/_admin/faults")
    fk.kube_admin("DELETE", "/faults")
    def uids():
        st, body = fk.kube_req("GET", "/api/v1/namespaces/default/services")
        items = json.loads(body)["items"] if st == 200 else []
        svcs = {i["metadata"]["uid"]: i["metadata"]["name"] for i in items
                if i["spec"].get("type") == "LoadBalancer"}
        lbs = {(lb.get("labels") or {}).get("robotlb/service-uid")
               for lb in fk.hz_admin("GET", "/_admin/state")["load_balancers"]}
        return svcs, lbs

    end = time.time() + 120
    while time.time() < end:
        svcs, lbs = uids()
        if set(svcs) == lbs:
            break
        time.sleep(1)
    want, have = len(svcs), len(lbs)
    missing = sorted(svcs[u] for u in set(svcs) - lbs)
    extra = len(lbs - set(svcs))
    final = {"t": round(time.time() - samples[0]["t0"])}
    fds, socks, rss, anon = proc_figures(d.p.pid)
    final.update({"fds": fds, "sockets": socks, "rss_kib": rss, "anon_kib": anon,
                  "balancers": have, "services": want})
    problems = compare(samples, final)
    if missing or extra:
        problems.append("120 s after the faults were cleared: no balancer for %s; %d balancer(s)"
                        " of no Service" % (", ".join(missing) or "none", extra))
    return d, samples, final, problems


# ---------------------------------------------------------------- common


def run_samples(d, seconds, sample, tick=None, ready=lambda s: True):
    """Sample every SAMPLE_S (calling sample every tick seconds when set, for
    the load it drives); keep the samples taken after WARMUP_S once ready(s)
    holds (the daemon at work: its pools and caches at their size)."""
    t0 = time.time()
    kept = []
    next_print = t0 + min(WARMUP_S, seconds)
    while time.time() - t0 < seconds:
        if not d.alive():
            sys.exit("soak: the daemon exited (status %s)" % d.p.returncode)
        s = sample(t0)
        if not kept and not ready(s):
            next_print = max(next_print, time.time())
        elif time.time() >= next_print:
            s["t0"] = t0
            kept.append(s)
            print(json.dumps({k: v for k, v in s.items() if k != "t0"}), flush=True)
            next_print += SAMPLE_S
        time.sleep(tick if tick else SAMPLE_S / 10)
    if not kept:
        sys.exit("soak: shorter than its warm-up (%d s, and the daemon at work)" % WARMUP_S)
    return kept


def compare(samples, final, idle_fds=None):
    """Problems of final against the first sample after warm-up (and, for
    descriptors, against idle_fds: those of the same daemon before the load,
    when the load's own connections make the samples' counts move)."""
    first = samples[0]
    problems = []
    base = idle_fds if idle_fds is not None else first["fds"]
    if final["fds"] - base > FD_SLACK:
        problems.append("descriptors %d -> %d" % (base, final["fds"]))
    if (final["rss_kib"] - first["rss_kib"]) / 1024.0 > RSS_SLACK_MIB:
        problems.append("RSS %.1f -> %.1f MiB" % (first["rss_kib"] / 1024.0,
                                                 final["rss_kib"] / 1024.0))
    return problems


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    minutes = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
    if mode not in ("proxy", "reconciler"):
        sys.exit(__doc__)
    work = tempfile.mkdtemp(prefix="prismlb-soak-")
    run = soak_proxy if mode == "proxy" else soak_reconciler
    d, samples, final, problems = run(work, minutes * 60)
    status = d.stop()
    if status != 0:
        problems.append("the daemon's stop ended with status %s" % status)
    first = {k: v for k, v in samples[0].items() if k != "t0"}
    print("start (after warm-up): " + json.dumps(first))
    print("end (load stopped, settled): " + json.dumps(final))
    if problems:
        print("soak %s: UNSTABLE: %s (logs in %s)" % (mode, "; ".join(problems), work))
        sys.exit(1)
    print("soak %s: stable over %.0f min" % (mode, minutes))
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
