#!/usr/bin/python3
"""The images of packaging/container/build.sh, run from their OCI archives.

Each archive holds an image index naming an amd64 and an arm64 image
(`skopeo inspect --raw` shows both platforms). Each architecture's image is
unpacked (index, manifest, config, layers) into a root filesystem apart
from the build tree, its SPDX SBOM is checked (spdx.py), and its ENTRYPOINT
runs there as UID 65534 (setpriv, then bwrap in a user namespace of that
UID: a read-only bind of the root filesystem, no capabilities, no new
privileges), with the test's config and credentials bound read-only as a
ConfigMap and a Secret would be. The arm64 image runs the same way under
qemu-user: qemu-aarch64-static is bound read-only into the sandbox and runs
the ENTRYPOINT, resolving the loader and the libraries in the image's root
(what a binfmt_misc handler with the F flag does, without kernel support).
The fakes and the clients run natively:

- prismlb-proxy: three fake API servers behind the `kubernetes`
  EndpointSlices, one of them static; kubectl's requests through the
  image's 127.0.0.1 listener reach all three, and /readyz answers 200.
- prismlb-reconciler: a Service applied with kubectl gets a balancer that
  `hcloud load-balancer list` shows, labelled with the Service's UID.

Usage: images.py SOURCE_ROOT BUILD_ROOT [IMAGES_DIR]
IMAGES_DIR holds the archives (default: build.sh is run into
BUILD_ROOT/images first).
"""
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

import spdx

SRC, BUILD = sys.argv[1], sys.argv[2]
KUBECTL = os.path.join(SRC, ".tools", "bin", "kubectl")
ARCHES = ("amd64", "arm64")
# How this host runs a program of each architecture: natively, or the
# qemu-user program and where the sandbox has it.
QEMU = {"arm64": ("/usr/bin/qemu-aarch64-static", "/usr/libexec/qemu-aarch64-static")}
NATIVE = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine())
procs = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_for(what, cond, timeout, proc=None, log=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.2)
    text = open(log).read() if log and os.path.exists(log) else ""
    raise AssertionError(f"timed out waiting for {what}\n--- log:\n{text[-6000:]}")


def unpack(archive, dest, arch):
    """Unpack the arch image of an OCI archive's image index into dest;
    return its config."""
    with tarfile.open(archive) as t:
        def blob(digest):
            return t.extractfile("blobs/" + digest.replace(":", "/")).read()
        index = json.loads(t.extractfile("index.json").read())
        assert len(index["manifests"]) == 1, f"{archive}: {len(index['manifests'])} entries in index.json"
        top = index["manifests"][0]
        assert top["mediaType"] == "application/vnd.oci.image.index.v1+json", top["mediaType"]
        entries = json.loads(blob(top["digest"]))["manifests"]
        mine = [m for m in entries if m.get("platform", {}).get("architecture") == arch]
        assert len(mine) == 1, f"{archive}: {len(mine)} {arch} images in the index"
        manifest = json.loads(blob(mine[0]["digest"]))
        config = json.loads(blob(manifest["config"]["digest"]))
        assert config["architecture"] == arch and config["os"] == "linux", \
            f"{archive}: the {arch} entry's config says {config['os']}/{config['architecture']}"
        for layer in manifest["layers"]:
            path = os.path.join(dest, ".layer")
            with open(path, "wb") as f:
                f.write(blob(layer["digest"]))
            with tarfile.open(path) as lt:
                lt.extractall(dest)
            os.unlink(path)
    os.chmod(dest, 0o755)
    return config


def sandbox(rootfs, config, binds, env, log, arch):
    """Start the image's ENTRYPOINT in rootfs as its USER (under qemu-user
    when arch is not this host's)."""
    wrap = []
    if arch != NATIVE:
        host, inside = QEMU[arch]
        binds = binds + [(host, inside)]
        wrap = [inside]
        # A file mount point, as a runtime would make it in its own layer.
        path = os.path.join(rootfs, inside.lstrip("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "a").close()
    # Mount points, as a container runtime makes them in its own layer.
    for inside in ["/proc", "/dev"] + [i for _, i in binds]:
        path = os.path.join(rootfs, inside.lstrip("/"))
        if not os.path.lexists(path):
            os.makedirs(path, exist_ok=True)
    user = config["config"]["User"]
    uid, gid = (int(x) for x in user.split(":"))
    argv = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs",
            "bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--die-with-parent", "--uid", str(uid), "--gid", str(gid),
            "--ro-bind", rootfs, "/", "--proc", "/proc", "--dev", "/dev", "--cap-drop", "ALL",
            "--clearenv"]
    for k, v in env.items():
        argv += ["--setenv", k, v]
    for host, inside in binds:
        argv += ["--ro-bind", host, inside]
    argv += ["--"] + wrap + config["config"]["Entrypoint"] + (config["config"].get("Cmd") or [])
    f = open(log, "w")
    p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
    procs.append(p)
    return p


def stop_entrypoint(p, timeout):
    """SIGTERM the image's process (a descendant of setpriv/bwrap, found by
    walking /proc's children lists from p: prismlb, or the qemu-user process
    running it, which hands the signal on) and return bwrap's exit status,
    which is that process's."""
    names = {"prismlb"} | {os.path.basename(h)[:15] for h, _ in QEMU.values()}
    todo, found = [p.pid], []
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() in names:
                    found.append(pid)
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            continue
    assert found, "the image's prismlb process is gone"
    for pid in found:
        os.kill(pid, 15)
    return p.wait(timeout)


def start(argv, state, log):
    f = open(log, "w")
    p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
    procs.append(p)
    wait_for(f"{argv[0]} ready", lambda: os.path.exists(state) and "ready" in open(state).read(), 20, p, log)
    return p


def kubeconfig(path, server, tls, name_override=None):
    extra = f"    tls-server-name: {name_override}\n" if name_override else ""
    with open(path, "w") as f:
        f.write(f"apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n"
                f"    server: {server}\n    certificate-authority: {tls}/ca.crt\n{extra}"
                f"users:\n- name: admin\n  user:\n    client-certificate: {tls}/client.crt\n"
                f"    client-key: {tls}/client.key\ncontexts:\n- name: fake\n  context: "
                f"{{cluster: fake, user: admin}}\ncurrent-context: fake\n")


def kubectl(kc, cache, *args, stdin=None):
    p = subprocess.run([KUBECTL, "--kubeconfig", kc, "--cache-dir", cache] + list(args),
                       capture_output=True, text=True, input=stdin, timeout=60)
    if p.returncode:
        raise AssertionError(f"kubectl {' '.join(args)}: {p.stdout}{p.stderr}")
    return p.stdout


def shared_tls(tmp, fake_dir):
    """The fake's CA and client credentials, readable by UID 65534."""
    d = os.path.join(tmp, "secrets")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    for n in ("ca.crt", "client.crt", "client.key"):
        shutil.copy(os.path.join(fake_dir, n), os.path.join(d, n))
        os.chmod(os.path.join(d, n), 0o644)
    return d


def check_image(rootfs, config, name, arch):
    labels = config["config"].get("Labels", {})
    for k in ("title", "description", "version", "revision", "created", "licenses", "source"):
        assert "org.opencontainers.image." + k in labels, f"{name}: label {k} missing"
    assert config["config"]["User"] == "65534:65534", config["config"]["User"]
    assert config["config"]["Entrypoint"] == ["/usr/sbin/prismlb", "--config", "/etc/prismlb/prismlb.conf"]
    for banned in ("bin/sh", "usr/bin/sh", "usr/bin/dpkg", "usr/bin/apt", "bin/busybox"):
        assert not os.path.lexists(os.path.join(rootfs, banned)), f"{name}: {banned} in the image"
    for f in ("etc/passwd", "etc/group", "etc/prismlb/prismlb.conf", "usr/sbin/prismlb"):
        assert os.path.exists(os.path.join(rootfs, f)), f"{name}: no /{f}"
    assert "nobody:x:65534:65534" in open(os.path.join(rootfs, "etc/passwd")).read()
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(rootfs) for f in fs
               if not os.path.islink(os.path.join(d, f)))
    print(f"{name} {arch}: {size} bytes ({size / 1048576:.2f} MiB) uncompressed")
    assert size <= 20 * 1048576, f"{name} {arch}: {size} bytes, over 20 MiB"
    nfiles, npkgs = spdx.check(rootfs, arch)
    print(f"{name} {arch}: the SBOM is valid SPDX 2.3 and lists all {nfiles} files, "
          f"the shared objects' {npkgs} Debian packages with version and license")


def test_proxy(images, tmp, arch):
    rootfs = os.path.join(tmp, "rootfs-proxy")
    os.makedirs(rootfs)
    config = unpack(os.path.join(images, "prismlb-proxy.oci.tar"), rootfs, arch)
    check_image(rootfs, config, "prismlb-proxy", arch)
    if arch == ARCHES[0]:
        # What the check refuses does not depend on the architecture: once.
        spdx.check_refuses(rootfs, arch)
        print(f"prismlb-proxy {arch}: the SBOM check refuses each of 7 broken or mismatched SBOMs")

    fk = os.path.join(tmp, "fake-kube")
    os.makedirs(fk)
    state = os.path.join(fk, "state")
    start([os.path.join(BUILD, "tests/fakes/kube/prismlb-fake-kube"), "--servers", "3",
           "--tls-dir", fk, "--state-file", state], state, os.path.join(fk, "log"))
    lines = open(state).read().split("\n")
    servers = [l.split()[2] for l in lines if l.startswith("server ")]
    admin = next(l.split()[1] for l in lines if l.startswith("admin "))
    ports = [int(s.rsplit(":", 1)[1]) for s in servers]
    sec = shared_tls(tmp, fk)
    cache = os.path.join(tmp, "kcache")
    direct = os.path.join(tmp, "kubeconfig-direct")
    kubeconfig(direct, servers[0], sec)
    # The API servers as the kubernetes Service's EndpointSlices publish them.
    for i, p in enumerate(ports):
        kubectl(direct, cache, "apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"kubernetes-{i}", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": p, "protocol": "TCP"}]}))

    lport, mport = free_port(), free_port()
    kubeconfig(os.path.join(sec, "kubeconfig"), servers[0], "/var/run/secrets/prismlb")
    conf = os.path.join(tmp, "proxy.conf")
    with open(conf, "w") as f:
        f.write(f"""instances = (
  {{ module = "endpoint_watch"; name = "apiservers"; endpoints = [ "127.0.0.1:{ports[0]}" ];
    kubeconfig = "/var/run/secrets/prismlb/kubeconfig";
    server = "https://127.0.0.1:{lport}"; tls_server_name = "kubernetes.default.svc"; }},
  {{ module = "tcp_proxy"; name = "kubeprism"; upstreams = [ "apiservers" ];
    bind_address = "127.0.0.1"; bind_port = {lport}; health_interval = "2s"; health_timeout = "1s"; }},
  {{ module = "metrics"; bind_address = "127.0.0.1"; port = {mport}; }}
);
""")
    os.chmod(conf, 0o644)
    log = os.path.join(tmp, "proxy.log")
    p = sandbox(rootfs, config, [(conf, "/etc/prismlb/prismlb.conf"), (sec, "/var/run/secrets/prismlb")],
                {}, log, arch)

    def upstreams():
        try:
            body = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=2).read().decode()
        except OSError:
            return False
        return any(l.startswith("prismlb_upstreams_active") and l.split()[-1] == "3" for l in body.splitlines())
    wait_for("three healthy upstreams, two found by discovery", upstreams, 120, p, log)
    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/readyz", timeout=5) as r:
        assert r.status == 200, r.status
    print(f"prismlb-proxy {arch}: /readyz 200 with 3 upstreams")

    urllib.request.urlopen(urllib.request.Request(admin + "/requests", method="DELETE"), timeout=5)
    via = os.path.join(tmp, "kubeconfig-proxy")
    kubeconfig(via, f"https://127.0.0.1:{lport}", sec, "kubernetes.default.svc")

    def hits():
        items = json.load(urllib.request.urlopen(admin + "/requests", timeout=5))["items"]
        per = {i: 0 for i in range(3)}
        for e in items:
            if e["userAgent"].startswith("kubectl"):
                per[e["server"]] += 1
        return per
    # A new connection each: random picks over three upstreams, until each
    # API server has had one (about 6 on average; 60 at most, where missing
    # one by chance has odds of 3 x (2/3)^60, below 1e-10).
    sent, per = 0, {}
    while sent < 60:
        kubectl(via, cache, "get", "--raw", "/api/v1/namespaces/default")
        sent += 1
        per = hits()
        if all(per.values()):
            break
    print(f"prismlb-proxy {arch}: kubectl's requests per API server: {per} ({sent} sent)")
    assert all(per.values()), f"an API server got none of kubectl's {sent} requests: {per}"
    assert stop_entrypoint(p, 30) == 0, open(log).read()


def test_reconciler(images, tmp, arch):
    rootfs = os.path.join(tmp, "rootfs-reconciler")
    os.makedirs(rootfs)
    config = unpack(os.path.join(images, "prismlb-reconciler.oci.tar"), rootfs, arch)
    check_image(rootfs, config, "prismlb-reconciler", arch)
    assert os.path.getsize(os.path.join(rootfs, "etc/ssl/certs/ca-certificates.crt")) > 0

    fk = os.path.join(tmp, "fake-kube-r")
    os.makedirs(fk)
    state = os.path.join(fk, "state")
    start([os.path.join(BUILD, "tests/fakes/kube/prismlb-fake-kube"), "--tls-dir", fk,
           "--state-file", state], state, os.path.join(fk, "log"))
    server = next(l.split()[2] for l in open(state).read().split("\n") if l.startswith("server 0 "))
    hz = os.path.join(tmp, "hz")
    os.makedirs(hz)
    seed = os.path.join(hz, "seed.json")
    with open(seed, "w") as f:
        json.dump({"tokens": ["tok-a"], "networks": [{"id": 7, "name": "k8s", "ip_range": "10.0.0.0/16",
                   "subnets": [{"type": "cloud", "ip_range": "10.0.0.0/24"},
                               {"type": "vswitch", "ip_range": "10.0.1.0/24", "vswitch_id": 4242}]}]}, f)
    urlf = os.path.join(hz, "url")
    hzlog = os.path.join(hz, "log")
    hp = subprocess.Popen([os.path.join(BUILD, "tests/fakes/hetzner/prismlb-fake-hcloud"), "--seed", seed,
                           "--port-file", urlf], stdout=open(hzlog, "w"), stderr=subprocess.STDOUT)
    procs.append(hp)
    wait_for("the fake Hetzner API", lambda: os.path.exists(urlf) and open(urlf).read().strip(), 20, hp, hzlog)
    hurl = open(urlf).read().strip()

    sec = shared_tls(tmp, fk)
    kubeconfig(os.path.join(sec, "kubeconfig"), server, "/var/run/secrets/prismlb")
    mport = free_port()
    conf = os.path.join(tmp, "reconciler.conf")
    with open(conf, "w") as f:
        f.write(f"""instances = (
  {{ module = "leader"; name = "leader"; lease_namespace = "kube-system"; lease_name = "prismlb-reconciler";
    kubeconfig = "/var/run/secrets/prismlb/kubeconfig"; }},
  {{ module = "hetzner_lb"; name = "hetzner"; gate = "leader"; hcloud_endpoint = "{hurl}";
    kubeconfig = "/var/run/secrets/prismlb/kubeconfig"; default_network = "k8s"; }},
  {{ module = "metrics"; bind_address = "127.0.0.1"; port = {mport}; }}
);
""")
    os.chmod(conf, 0o644)
    log = os.path.join(tmp, "reconciler.log")
    p = sandbox(rootfs, config, [(conf, "/etc/prismlb/prismlb.conf"), (sec, "/var/run/secrets/prismlb")],
                {"ROBOTLB_HCLOUD_TOKEN": "tok-a"}, log, arch)

    cache = os.path.join(tmp, "kcache-r")
    direct = os.path.join(tmp, "kubeconfig-r")
    kubeconfig(direct, server, sec)
    docs = []
    for n in ("n1", "n2"):
        docs.append({"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}}, "spec": {}})
    docs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
                 "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
                          "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]}})
    kubectl(direct, cache, "apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in docs))
    for n, ip in (("n1", "10.0.1.21"), ("n2", "10.0.1.22")):
        kubectl(direct, cache, "patch", "node", n, "--subresource=status", "--type=merge", "-p",
                json.dumps({"status": {"conditions": [{"type": "Ready", "status": "True"}],
                                       "addresses": [{"type": "InternalIP", "address": ip}]}}))
    uid = kubectl(direct, cache, "get", "service", "web", "-n", "default", "-o", "jsonpath={.metadata.uid}")
    home = os.path.join(tmp, "home")
    os.makedirs(home)
    henv = dict(os.environ, HCLOUD_ENDPOINT=hurl, HCLOUD_TOKEN="tok-a", HOME=home,
                HCLOUD_CONFIG=os.path.join(home, "cli.toml"))
    found = {}

    def listed():
        r = subprocess.run(["hcloud", "load-balancer", "list", "-o", "json"], capture_output=True,
                           text=True, env=henv, timeout=30)
        if r.returncode:
            return False
        for lb in json.loads(r.stdout or "[]") or []:
            if lb.get("labels", {}).get("robotlb/service-uid") == uid and len(lb.get("targets") or []) == 2:
                found.update(lb)
                return True
        return False
    wait_for("hcloud load-balancer list to show the Service's balancer", listed, 120, p, log)
    print(f"prismlb-reconciler {arch}: hcloud load-balancer list shows {found['name']} "
          f"(robotlb/service-uid={uid}, {len(found['targets'])} targets)")
    assert stop_entrypoint(p, 60) == 0, open(log).read()


def main():
    images = sys.argv[3] if len(sys.argv) > 3 else None
    for tool in ("buildah", "skopeo", "bwrap", "setpriv", "hcloud", "node") + tuple(h for h, _ in QEMU.values()):
        if not shutil.which(tool):
            print(f"SKIP: {tool} missing (sh tests/setup.sh test)")
            return 77
    if not images:
        images = os.path.join(BUILD, "images")
        r = subprocess.run(["sh", os.path.join(SRC, "packaging", "container", "build.sh"), images])
        if r.returncode:
            print("FAIL: build.sh")
            return 1
    for name in ("prismlb-proxy", "prismlb-reconciler"):
        # What a user pushes with `skopeo copy --all oci-archive:... docker://...`.
        ref = "oci-archive:" + os.path.join(images, name + ".oci.tar")
        r = subprocess.run(["skopeo", "inspect", "--raw", ref], capture_output=True, text=True, timeout=60)
        plats = sorted(f"{m['platform']['os']}/{m['platform']['architecture']}"
                       for m in json.loads(r.stdout or "{}").get("manifests", [])) if not r.returncode else []
        if plats != [f"linux/{a}" for a in ARCHES]:
            print(f"FAIL: skopeo inspect --raw {name}: platforms {plats}: {r.stdout}{r.stderr}")
            return 1
        print(f"ok   skopeo inspect --raw oci-archive:{name}.oci.tar: an image index of {', '.join(plats)}")
        # `skopeo copy --all` carries both (into an OCI layout here, as into
        # a registry).
        with tempfile.TemporaryDirectory(prefix="pkgimg-copy-") as cp:
            dest = f"oci:{cp}:{name}"
            r = subprocess.run(["skopeo", "copy", "-q", "--all", ref, dest], capture_output=True, text=True,
                               timeout=300)
            raw = subprocess.run(["skopeo", "inspect", "--raw", dest], capture_output=True, text=True,
                                 timeout=60) if not r.returncode else r
            copied = sorted(m["platform"]["architecture"] for m in json.loads(raw.stdout or "{}").get(
                "manifests", [])) if not raw.returncode else []
            if copied != sorted(ARCHES):
                print(f"FAIL: skopeo copy --all {name}: {copied}: {r.stderr}{raw.stderr}")
                return 1
            print(f"ok   skopeo copy --all oci-archive:{name}.oci.tar: {', '.join(copied)} copied")
        for arch in ARCHES:
            r = subprocess.run(["skopeo", "--override-arch", arch, "inspect", ref],
                               capture_output=True, text=True, timeout=60)
            got = json.loads(r.stdout) if not r.returncode else {}
            if got.get("Labels", {}).get("org.opencontainers.image.title") != name or got.get("Architecture") != arch:
                print(f"FAIL: skopeo --override-arch {arch} inspect {name}: {r.stdout}{r.stderr}")
                return 1
            print(f"ok   skopeo --override-arch {arch} inspect oci-archive:{name}.oci.tar")
    tmp = tempfile.mkdtemp(prefix="pkgimg-")
    os.chmod(tmp, 0o755)  # UID 65534 reads the root filesystems and the config
    try:
        for arch in ARCHES:
            t0 = time.monotonic()
            d = os.path.join(tmp, arch)
            os.makedirs(d)
            os.chmod(d, 0o755)
            test_proxy(images, d, arch)
            test_reconciler(images, d, arch)
            print(f"{arch}: both images ran in {time.monotonic() - t0:.1f} s")
    except AssertionError as e:
        print(f"FAIL: {e}")
        return 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("both images pass, amd64 and arm64")
    return 0


if __name__ == "__main__":
    sys.exit(main())
