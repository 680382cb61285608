#!/usr/bin/python3
"""An SPDX 2.3 JSON SBOM of one image's root filesystem, on stdout.

Usage: sbom.py ROOTFS NAME VERSION ARCH REVISION CREATED HOSTFILES

Every regular file under ROOTFS is an SPDX file with its SHA1 and SHA256
(the SBOM's own path, usr/share/doc/prismlb/sbom.spdx.json, excepted: a
document cannot hold its own checksum). HOSTFILES lists, one a line, the
absolute paths build.sh copied from this host into the image (the loader,
the shared objects, the CA bundle); each one's Debian package is asked from
dpkg (dpkg-query -S, then the package's version, source and architecture),
and the file in the image must be the packaged file byte for byte. The
package's license is read from its /usr/share/doc/PKG/copyright: a
machine-readable (DEP-5) file gives the License fields of its Files
paragraphs, as SPDX identifiers where Debian's short name has one and as a
LicenseRef with the license paragraph's text where it has not; any other
copyright file becomes one LicenseRef whose text is the whole file.
Every other file (the daemon, the modules, the config, /etc/passwd ...) is
prismlb's own. The image is the described package; it CONTAINS each
package, and each package CONTAINS its files.
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import uuid

SELF = "usr/share/doc/prismlb/sbom.spdx.json"
# update-ca-certificates writes the bundle from this package's certificates.
GENERATED = {"/etc/ssl/certs/ca-certificates.crt": "ca-certificates"}

# Debian copyright-format short names with an SPDX identifier.
SHORT = {
    "apache-2": "Apache-2.0", "apache-2.0": "Apache-2.0", "artistic": "Artistic-1.0", "openldap-2.8": "OLDAP-2.8",
    "bsd-2-clause": "BSD-2-Clause", "bsd-3-clause": "BSD-3-Clause", "bsd-4-clause": "BSD-4-Clause",
    "bsd-4-clause-uc": "BSD-4-Clause-UC", "bsl-1.0": "BSL-1.0", "beerware": "Beerware",
    "cc0-1.0": "CC0-1.0", "curl": "curl", "expat": "MIT", "mit": "MIT", "isc": "ISC",
    "x11": "X11", "zlib": "Zlib", "fsful": "FSFUL", "fsfullr": "FSFULLR", "latex2e": "Latex2e",
    "oldap-2.8": "OLDAP-2.8", "mpl-1.1": "MPL-1.1", "mpl-2.0": "MPL-2.0", "openssl": "OpenSSL",
    "psf-2": "PSF-2.0", "unicode-dfs-2016": "Unicode-DFS-2016",
}
GNU = re.compile(r"^(l?gpl|gfdl)-(\d(?:\.\d)?)(\+?)$", re.I)
EXCEPTIONS = {"libtool exception": "Libtool-exception", "bison exception": "Bison-exception-2.2"}


def sh(*argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def digest(path, algo):
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


def spdx_id(text):
    return re.sub(r"[^A-Za-z0-9.-]", "-", text)


def owners(paths, arch):
    """{path: package:arch} of the paths dpkg lists a package for (each
    path's merged-/usr spellings and its symbolic link's target tried too),
    with one dpkg-query run."""
    cands = {}
    for path in paths:
        spell = [path, os.path.realpath(path)]
        spell += ["/usr" + p if not p.startswith("/usr/") else p[4:] for p in list(spell)]
        cands[path] = spell
    everything = sorted({c for spell in cands.values() for c in spell})
    r = subprocess.run(["dpkg-query", "-S"] + everything, capture_output=True, text=True)
    listed = {}
    for line in r.stdout.splitlines():
        if line.startswith("diversion "):
            continue
        pkgs, _, where = line.partition(": ")
        for pkg in pkgs.split(", "):
            if pkg.endswith(":" + arch) or ":" not in pkg:
                listed.setdefault(where, pkg if ":" in pkg else f"{pkg}:{arch}")
    return {path: next((listed[c] for c in spell if c in listed), None) for path, spell in cands.items()}


def paragraphs(text):
    """DEP-5 paragraphs as lists of (field, first line, continuation text)."""
    out = []
    for block in re.split(r"\n[ \t]*\n", text):
        fields, cur = [], None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and cur is not None:
                body = line[1:]
                cur[2].append("" if body.strip() == "." else body)
            elif ":" in line and not line.startswith("#"):
                k, _, v = line.partition(":")
                cur = [k.strip().lower(), v.strip(), []]
                fields.append(cur)
        if fields:
            out.append(fields)
    return out


class Licenses:
    """The document's LicenseRefs, one per distinct text."""

    def __init__(self):
        self.refs = {}  # text -> (id, name)

    def ref(self, name, text):
        if text not in self.refs:
            self.refs[text] = (f"LicenseRef-{spdx_id(name)}-{hashlib.sha1(text.encode()).hexdigest()[:8]}", name)
        return self.refs[text][0]

    def term(self, term, texts, pkg):
        """One Debian license (no 'and'/'or') as an SPDX expression."""
        t = term.strip()
        base, _, exc = t.partition(" with ")
        spdx = SHORT.get(base.strip().lower())
        m = GNU.match(base.strip())
        if m:
            kind, num, plus = m.group(1).upper(), m.group(2), m.group(3)
            num = num if "." in num else num + ".0"
            spdx = f"{kind}-{num}-{'or-later' if plus else 'only'}"
        if spdx and exc:
            e = EXCEPTIONS.get(exc.strip().lower())
            spdx = f"{spdx} WITH {e}" if e else None
        if spdx:
            return spdx
        text = texts.get(t.lower()) or texts.get(base.strip().lower()) or \
            f"The license Debian's copyright file of {pkg} names \"{t}\" without its text."
        return self.ref(f"Debian-{t}", text)

    def package(self, pkg, copyright_path):
        """The declared license of a package from its copyright file."""
        try:
            text = open(copyright_path, encoding="utf-8", errors="replace").read()
        except OSError:
            return "NOASSERTION", f"{copyright_path} is missing"
        if not re.match(r"^Format:\s*\S", text):
            return self.ref(f"Debian-copyright-{pkg}", text), \
                f"{copyright_path} is not machine-readable: the LicenseRef's text is that whole file"
        paras = paragraphs(text)
        texts, used = {}, []
        for p in paras:
            keys = [f[0] for f in p]
            for k, v, body in p:
                if k == "license":
                    if "files" not in keys and body:
                        texts[v.lower()] = "\n".join(body).strip()
                    elif "files" in keys or "format" in keys:
                        used.append((v, "\n".join(body).strip()))
        exprs = []
        for v, body in used:
            if not v:
                continue
            local = dict(texts)
            if body:
                local[v.lower()] = body
            alts = []
            for alt in re.split(r"\s+or\s+", v, flags=re.I):
                parts = [self.term(x, local, pkg) for x in re.split(r"\s+and\s+", alt, flags=re.I)]
                alts.append(parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")")
            e = alts[0] if len(alts) == 1 else "(" + " OR ".join(alts) + ")"
            if e not in exprs:
                exprs.append(e)
        if not exprs:
            return "NOASSERTION", f"{copyright_path} names no license"
        return " AND ".join(exprs), f"from the License fields of {copyright_path}"


def main():
    rootfs, name, version, arch, revision, created, hostfiles = sys.argv[1:8]
    hosts = [l.strip() for l in open(hostfiles) if l.strip()]
    lic = Licenses()
    owned = owners(hosts, arch)
    files, pkgfiles, pkginfo = [], {}, {}
    for d, _, fs in sorted(os.walk(rootfs)):
        for f in sorted(fs):
            full = os.path.join(d, f)
            rel = os.path.relpath(full, rootfs)
            if rel == SELF or os.path.islink(full) or not os.path.isfile(full):
                continue
            sha1, sha256 = digest(full, "sha1"), digest(full, "sha256")
            path = "/" + rel
            pkg = None
            if path in GENERATED:
                pkg = GENERATED[path] + ":all"
            elif path in hosts:
                pkg = owned.get(path)
                if pkg is None:
                    sys.exit(f"sbom.py: no Debian package owns {path}")
                if digest(path, "sha1") != sha1:
                    sys.exit(f"sbom.py: {rel} in the image differs from {path} of {pkg}")
            fid = "SPDXRef-File-" + spdx_id(rel)
            entry = {"fileName": "./" + rel, "SPDXID": fid,
                     "checksums": [{"algorithm": "SHA1", "checksumValue": sha1},
                                   {"algorithm": "SHA256", "checksumValue": sha256}]}
            if path in GENERATED:
                entry["comment"] = f"written by update-ca-certificates from the certificates of {GENERATED[path]}"
            files.append(entry)
            pkgfiles.setdefault(pkg, []).append((fid, sha1))
    missing = [h for h in hosts if not os.path.isfile(os.path.join(rootfs, h.lstrip("/")))]
    if missing:
        sys.exit(f"sbom.py: copied from the host but not in the image: {missing}")

    packages, rels = [], []
    image_id = "SPDXRef-Image-" + spdx_id(name)
    packages.append({
        "name": name, "SPDXID": image_id, "versionInfo": version, "primaryPackagePurpose": "CONTAINER",
        "supplier": "Organization: prismlb", "downloadLocation": "NOASSERTION", "filesAnalyzed": False,
        "licenseConcluded": "NOASSERTION", "licenseDeclared": "NOASSERTION", "copyrightText": "NOASSERTION",
        "comment": f"OCI image for linux/{arch}, built from revision {revision}",
        "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                          "referenceLocator": f"pkg:oci/{name}@{version}?arch={arch}"}]})
    rels.append({"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
                 "relatedSpdxElement": image_id})
    for pkg in sorted(pkgfiles, key=lambda p: (p is not None, p or "")):
        members = pkgfiles[pkg]
        code = hashlib.sha1("".join(sorted(s for _, s in members)).encode()).hexdigest()
        if pkg is None:
            p = {"name": "prismlb", "SPDXID": "SPDXRef-Package-prismlb", "versionInfo": version,
                 "supplier": "Organization: prismlb", "downloadLocation": "https://github.com/prismlb/prismlb",
                 "licenseDeclared": "BSD-2-Clause", "licenseConcluded": "BSD-2-Clause",
                 "copyrightText": "NOASSERTION", "primaryPackagePurpose": "APPLICATION",
                 "comment": f"the daemon, its modules and its configuration, built from revision {revision}"}
        else:
            pname, _, parch = pkg.partition(":")
            q = sh("dpkg-query", "-W", "-f", "${Version}\t${source:Package}\t${source:Version}\t${Homepage}",
                   pkg if parch != "all" else pname)
            if not q:
                sys.exit(f"sbom.py: dpkg-query knows no {pkg}")
            ver, src, srcver, home = (q.split("\t") + [""] * 4)[:4]
            decl, why = lic.package(pname, f"/usr/share/doc/{pname}/copyright")
            p = {"name": pname, "SPDXID": "SPDXRef-Package-deb-" + spdx_id(pkg), "versionInfo": ver,
                 "supplier": "Organization: Debian", "downloadLocation": "NOASSERTION",
                 "licenseDeclared": decl, "licenseConcluded": "NOASSERTION", "licenseComments": why,
                 "copyrightText": "NOASSERTION", "primaryPackagePurpose": "LIBRARY",
                 "sourceInfo": f"built from the Debian source package {src} {srcver}",
                 "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                                   "referenceLocator": f"pkg:deb/debian/{pname}@{ver}?arch={parch}&distro=debian-12"}]}
            if home:
                p["homepage"] = home
        p["filesAnalyzed"] = True
        p["packageVerificationCode"] = {"packageVerificationCodeValue": code}
        p["licenseInfoFromFiles"] = ["NOASSERTION"]
        p["hasFiles"] = [fid for fid, _ in members]
        packages.append(p)
        rels.append({"spdxElementId": image_id, "relationshipType": "CONTAINS", "relatedSpdxElement": p["SPDXID"]})
        for fid, _ in members:
            rels.append({"spdxElementId": p["SPDXID"], "relationshipType": "CONTAINS", "relatedSpdxElement": fid})

    doc = {
        "spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"{name}-{version}-{arch}",
        "documentNamespace": f"https://github.com/prismlb/prismlb/sbom/{name}-{version}-{arch}-"
                             + str(uuid.uuid5(uuid.NAMESPACE_URL, f"{name}/{arch}/{revision}/{created}")),
        "creationInfo": {"created": created, "creators": ["Tool: prismlb-packaging-container-sbom.py",
                                                          "Organization: prismlb"]},
        "comment": f"every regular file of the image except {SELF}, this document",
        "documentDescribes": [image_id],
        "packages": packages, "files": files, "relationships": rels,
    }
    if lic.refs:
        doc["hasExtractedLicensingInfos"] = [{"licenseId": i, "name": n, "extractedText": t}
                                             for t, (i, n) in lic.refs.items()]
    json.dump(doc, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
