"""The Debian python3-kubernetes client lists and watches EndpointSlices on
the fake through a forced 410 and a dropped connection, as an informer
would: list, watch from the list's resourceVersion, re-list after 410,
resume from the last seen resourceVersion after a drop.

Usage: /usr/bin/python3 python_client.py SERVER_URL ADMIN_URL TLS_DIR
Exits 0 when every check holds; prints what failed otherwise.
"""
import json
import ssl
import sys
import time
import urllib.request

import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

NS = "default"


def admin(base, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"{}")


def slice_body(name, ip, labels=None):
    return client.V1EndpointSlice(
        metadata=client.V1ObjectMeta(name=name, labels=labels or {"kubernetes.io/service-name": "web"}),
        address_type="IPv4",
        endpoints=[client.V1Endpoint(addresses=[ip], conditions=client.V1EndpointConditions(ready=True))],
        ports=[client.DiscoveryV1EndpointPort(name="http", port=8080, protocol="TCP")],
    )


class Informer:
    """A cache kept by list + watch, with the apiserver's recovery rules."""

    def __init__(self, api):
        self.api = api
        self.cache = {}
        self.rv = None
        self.saw_410 = 0
        self.saw_drop = 0
        self.relists = 0
        self.errors = []

    def relist(self):
        lst = self.api.list_namespaced_endpoint_slice(NS)
        self.cache = {i.metadata.name: i.metadata.resource_version for i in lst.items}
        self.rv = lst.metadata.resource_version
        self.relists += 1

    def apply(self, ev):
        typ = ev["type"]
        raw = ev["raw_object"]
        meta = raw.get("metadata", {})
        rv = meta.get("resourceVersion")
        name = meta.get("name")
        if typ == "BOOKMARK":
            self.rv = rv
            return
        if typ == "ADDED":
            if name in self.cache:
                self.errors.append("spurious ADDED for cached %s" % name)
            self.cache[name] = rv
        elif typ == "MODIFIED":
            if name not in self.cache:
                self.errors.append("MODIFIED for unknown %s" % name)
            elif int(rv) <= int(self.cache[name]):
                self.errors.append("MODIFIED %s did not move forward" % name)
            self.cache[name] = rv
        elif typ == "DELETED":
            if name not in self.cache:
                self.errors.append("DELETED for unknown %s" % name)
            self.cache.pop(name, None)
        if int(rv) <= int(self.rv):
            self.errors.append("event %s %s at rv %s not after %s" % (typ, name, rv, self.rv))
        self.rv = rv

    def watch_once(self, seconds):
        w = watch.Watch()
        try:
            for ev in w.stream(self.api.list_namespaced_endpoint_slice, NS,
                               resource_version=self.rv, timeout_seconds=seconds,
                               allow_watch_bookmarks=True):
                self.apply(ev)
        except ApiException as e:
            if e.status != 410:
                raise
            self.saw_410 += 1
            self.relist()
        except (urllib3.exceptions.HTTPError, ssl.SSLError, OSError):
            self.saw_drop += 1


def main():
    server, admin_url, tls = sys.argv[1:4]
    cfg = client.Configuration()
    cfg.host = server
    cfg.ssl_ca_cert = tls + "/ca.crt"
    cfg.cert_file = tls + "/client.crt"
    cfg.key_file = tls + "/client.key"
    api = client.DiscoveryV1Api(client.ApiClient(cfg))
    failures = []

    for i in range(3):
        api.create_namespaced_endpoint_slice(NS, slice_body("web-%d" % i, "10.244.0.%d" % (10 + i)))
    inf = Informer(api)
    inf.relist()
    if sorted(inf.cache) != ["web-0", "web-1", "web-2"]:
        failures.append("initial list: %s" % sorted(inf.cache))

    # 1. The next watch is answered with HTTP 200 and a 410 ERROR event.
    admin(admin_url, "POST", "/faults", {"watch_gone_next": 1})
    api.create_namespaced_endpoint_slice(NS, slice_body("web-3", "10.244.0.13"))
    inf.watch_once(2)
    if inf.saw_410 != 1:
        failures.append("forced 410 was not seen as ApiException(410)")
    if "web-3" not in inf.cache:
        failures.append("re-list after 410 missed web-3")

    # 2. Watches are dropped (no terminating chunk) after two events; the
    # informer resumes from the last resourceVersion it saw.
    admin(admin_url, "POST", "/faults", {"watch_close_events": 2, "watch_close_mode": "drop"})
    api.create_namespaced_endpoint_slice(NS, slice_body("web-4", "10.244.0.14"))
    api.create_namespaced_endpoint_slice(NS, slice_body("web-5", "10.244.0.15"))
    api.patch_namespaced_endpoint_slice("web-0", NS, {"metadata": {"labels": {"color": "blue"}}})
    api.delete_namespaced_endpoint_slice("web-1", NS)
    api.create_namespaced_endpoint_slice(NS, slice_body("web-6", "10.244.0.16"))
    deadline = time.time() + 30
    while time.time() < deadline:
        inf.watch_once(2)
        truth = {i.metadata.name: i.metadata.resource_version
                 for i in api.list_namespaced_endpoint_slice(NS).items}
        if inf.cache == truth and inf.saw_drop >= 2:
            break
    admin(admin_url, "DELETE", "/faults")
    if inf.saw_drop < 2:
        failures.append("expected at least two dropped watches, saw %d" % inf.saw_drop)
    truth = {i.metadata.name: i.metadata.resource_version
             for i in api.list_namespaced_endpoint_slice(NS).items}
    if inf.cache != truth:
        failures.append("cache %s != server %s" % (inf.cache, truth))
    if inf.relists != 2:
        failures.append("expected exactly one re-list after the initial list, got %d" % (inf.relists - 1))
    failures.extend(inf.errors)

    # 3. The fake saw this client's watches.
    log = admin(admin_url, "GET", "/requests")["items"]
    watches = [r for r in log if "watch=True" in r["path"] or "watch=true" in r["path"]]
    if not any(r["userAgent"].startswith("OpenAPI-Generator") for r in watches):
        failures.append("no watch request from the Python client in the request log")

    if failures:
        for f in failures:
            print("FAIL:", f)
        return 1
    print("ok: 410 seen %d, drops seen %d, relists %d, %d objects" % (
        inf.saw_410, inf.saw_drop, inf.relists, len(inf.cache)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
