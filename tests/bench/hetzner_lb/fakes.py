"""The Python side of the hetzner_lb benches (fakes.sh starts the fakes):
clients of prismlb-fake-kube (TLS with the client certificate of DIR/tls)
and of the admin APIs of both fakes, nodes made Ready, and the daemon's
memory and CPU from /proc."""
import http.client
import json
import os
import ssl
import urllib.parse


def plain(url):
    p = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(p.hostname, p.port)


def _call(conn, method, path, body, ctype):
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers={"Content-Type": ctype})
    r = conn.getresponse()
    d = r.read()
    if r.status >= 300:
        raise SystemExit("%s %s: %d %s" % (method, path, r.status, d[:300]))
    return json.loads(d or b"{}")


class Kube:
    """The fake API server at url, credentials in tls_dir; its admin API at admin."""

    def __init__(self, tls_dir, url, admin=None):
        ctx = ssl.create_default_context(cafile=tls_dir + "/ca.crt")
        ctx.load_cert_chain(tls_dir + "/client.crt", tls_dir + "/client.key")
        ctx.check_hostname = False
        u = urllib.parse.urlparse(url)
        self.conn = http.client.HTTPSConnection(u.hostname, u.port, context=ctx)
        self.admin_conn = plain(admin) if admin else None

    def k(self, method, path, body=None, ctype="application/json"):
        return _call(self.conn, method, path, body, ctype)

    def admin(self, method, path, body=None):
        return _call(self.admin_conn, method, path, body, "application/json")

    def bulk(self, **kw):
        return self.admin("POST", "/bulk", kw)

    def ready_node(self, name, ip):
        """Node name, Ready with InternalIP ip (create drops a status: patched after)."""
        st = {"status": {"conditions": [{"type": "Ready", "status": "True"}],
                         "addresses": [{"type": "InternalIP", "address": ip}]}}
        self.k("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                          "metadata": {"name": name}})
        self.k("PATCH", "/api/v1/nodes/%s/status" % name, st, "application/merge-patch+json")

    def services_with_ingress(self, ns="default"):
        svcs = self.k("GET", "/api/v1/namespaces/%s/services" % ns)["items"]
        return sum(1 for s in svcs if s.get("status", {}).get("loadBalancer", {}).get("ingress"))


class Hetzner:
    """The admin API of prismlb-fake-hcloud at base (the URL without /v1)."""

    def __init__(self, base):
        self.conn = plain(base)

    def admin(self, method, path, body=None):
        return _call(self.conn, method, path, body, "application/json")


def memory(pid):
    """VmRSS, RssAnon (the heap, stacks) and RssFile (the binary's and shared
    libraries' pages) of pid, KiB."""
    f = dict(x.split(":", 1) for x in open("/proc/%s/status" % pid) if ":" in x)
    return tuple(int(f[key].split()[0]) for key in ("VmRSS", "RssAnon", "RssFile"))


def cpu_seconds(pid):
    """User + system CPU time of pid so far."""
    st = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
