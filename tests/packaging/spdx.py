"""Checks of an image's SPDX SBOM (packaging/container/sbom.py), for images.py.

No Debian or npm package carries the SPDX 2.3 JSON schema, so the document
is checked against SPDX 2.3's rules field by field here: the required
fields of the document, its creation info, packages, files and
relationships, their formats (SPDX identifiers, checksums, suppliers,
download locations, purposes, reference categories, relationship types),
that every identifier is unique and every reference resolves, that every
LicenseRef used is defined, and every license expression parses with
spdx-expression-parse (Debian's node-spdx-expression-parse, against the
SPDX license and exception lists). Then against the image: every regular
file is listed with its checksums, and every shared object that is not
prismlb's own is contained by a Debian package whose version, architecture
and license are given and agree with dpkg on this host.
"""
import hashlib
import json
import os
import re
import subprocess

SELF = "usr/share/doc/prismlb/sbom.spdx.json"
ID = re.compile(r"^SPDXRef-[A-Za-z0-9.-]+$")
REF = re.compile(r"^LicenseRef-[A-Za-z0-9.-]+$")
CREATED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
CREATOR = re.compile(r"^(Person|Organization|Tool): \S")
SUPPLIER = re.compile(r"^(NOASSERTION|(Person|Organization): \S.*)$")
DOWNLOAD = re.compile(r"^(NONE|NOASSERTION|[a-z][a-z0-9+.-]*://\S+|git\+\S+)$")
HEX = {"SHA1": 40, "SHA224": 56, "SHA256": 64, "SHA384": 96, "SHA512": 128, "MD5": 32}
PURPOSES = {"APPLICATION", "FRAMEWORK", "LIBRARY", "CONTAINER", "OPERATING-SYSTEM", "DEVICE",
            "FIRMWARE", "SOURCE", "ARCHIVE", "FILE", "INSTALL", "OTHER"}
CATEGORIES = {"SECURITY", "PACKAGE-MANAGER", "PACKAGE_MANAGER", "PERSISTENT-ID", "OTHER"}
RELATIONSHIPS = {
    "DESCRIBES", "DESCRIBED_BY", "CONTAINS", "CONTAINED_BY", "DEPENDS_ON", "DEPENDENCY_OF",
    "DEPENDENCY_MANIFEST_OF", "BUILD_DEPENDENCY_OF", "DEV_DEPENDENCY_OF", "OPTIONAL_DEPENDENCY_OF",
    "PROVIDED_DEPENDENCY_OF", "TEST_DEPENDENCY_OF", "RUNTIME_DEPENDENCY_OF", "EXAMPLE_OF", "GENERATES",
    "GENERATED_FROM", "ANCESTOR_OF", "DESCENDANT_OF", "VARIANT_OF", "DISTRIBUTION_ARTIFACT",
    "PATCH_FOR", "PATCH_APPLIED", "COPY_OF", "FILE_ADDED", "FILE_DELETED", "FILE_MODIFIED",
    "EXPANDED_FROM_ARCHIVE", "DYNAMIC_LINK", "STATIC_LINK", "DATA_FILE_OF", "TEST_CASE_OF",
    "BUILD_TOOL_OF", "DEV_TOOL_OF", "TEST_OF", "TEST_TOOL_OF", "DOCUMENTATION_OF",
    "OPTIONAL_COMPONENT_OF", "METAFILE_OF", "PACKAGE_OF", "AMENDS", "PREREQUISITE_FOR",
    "HAS_PREREQUISITE", "REQUIREMENT_DESCRIPTION_FOR", "SPECIFICATION_FOR", "OTHER"}
PARSE_JS = """
const parse = require('spdx-expression-parse');
const bad = [];
for (const e of JSON.parse(require('fs').readFileSync(0, 'utf8'))) {
  try { parse(e); } catch (err) { bad.push(e + ': ' + err.message); }
}
process.stdout.write(JSON.stringify(bad));
"""


def need(cond, msg, errors):
    if not cond:
        errors.append(msg)


def structure(doc):
    """SPDX 2.3's rules; the list of what breaks them, and the expressions."""
    e = []
    need(doc.get("spdxVersion") == "SPDX-2.3", "spdxVersion is not SPDX-2.3", e)
    need(doc.get("dataLicense") == "CC0-1.0", "dataLicense is not CC0-1.0", e)
    need(doc.get("SPDXID") == "SPDXRef-DOCUMENT", "the document's SPDXID", e)
    need(isinstance(doc.get("name"), str) and doc["name"], "no document name", e)
    ns = doc.get("documentNamespace", "")
    need(re.match(r"^[a-z][a-z0-9+.-]*://\S+$", ns) and "#" not in ns, f"documentNamespace {ns!r}", e)
    ci = doc.get("creationInfo") or {}
    need(CREATED.match(ci.get("created", "")), "creationInfo.created", e)
    need(ci.get("creators") and all(CREATOR.match(c) for c in ci["creators"]), "creationInfo.creators", e)
    ids, exprs = {"SPDXRef-DOCUMENT"}, []
    files = doc.get("files") or []
    for f in files:
        need(ID.match(f.get("SPDXID", "")), f"file SPDXID {f.get('SPDXID')!r}", e)
        need(f.get("SPDXID") not in ids, f"SPDXID {f.get('SPDXID')} twice", e)
        ids.add(f.get("SPDXID"))
        need(str(f.get("fileName", "")).startswith("./"), f"fileName {f.get('fileName')!r}", e)
        sums = {c.get("algorithm"): c.get("checksumValue", "") for c in f.get("checksums") or []}
        need("SHA1" in sums, f"{f.get('fileName')}: no SHA1", e)
        for a, v in sums.items():
            need(a in HEX and re.match(f"^[0-9a-f]{{{HEX.get(a, 0)}}}$", v), f"{f.get('fileName')}: {a} {v!r}", e)
    file_ids = {f.get("SPDXID") for f in files}
    for p in doc.get("packages") or []:
        pid = p.get("SPDXID", "")
        need(ID.match(pid), f"package SPDXID {pid!r}", e)
        need(pid not in ids, f"SPDXID {pid} twice", e)
        ids.add(pid)
        need(isinstance(p.get("name"), str) and p["name"], f"{pid}: no name", e)
        need(DOWNLOAD.match(p.get("downloadLocation", "")), f"{pid}: downloadLocation", e)
        need(SUPPLIER.match(p.get("supplier", "NOASSERTION")), f"{pid}: supplier", e)
        need(p.get("primaryPackagePurpose", "OTHER") in PURPOSES, f"{pid}: primaryPackagePurpose", e)
        need(isinstance(p.get("filesAnalyzed", True), bool), f"{pid}: filesAnalyzed", e)
        if p.get("filesAnalyzed", True):
            code = (p.get("packageVerificationCode") or {}).get("packageVerificationCodeValue", "")
            need(re.match(r"^[0-9a-f]{40}$", code), f"{pid}: packageVerificationCode", e)
        else:
            need(not p.get("hasFiles"), f"{pid}: hasFiles with filesAnalyzed false", e)
        need(all(h in file_ids for h in p.get("hasFiles") or []), f"{pid}: hasFiles names no file", e)
        for r in p.get("externalRefs") or []:
            need(r.get("referenceCategory") in CATEGORIES and r.get("referenceType") and
                 r.get("referenceLocator"), f"{pid}: externalRef {r}", e)
        for k in ("licenseConcluded", "licenseDeclared"):
            need(k in p or k == "licenseConcluded", f"{pid}: no {k}", e)
            if k in p:
                exprs.append(p[k])
        exprs += p.get("licenseInfoFromFiles") or []
    for r in doc.get("relationships") or []:
        need(r.get("relationshipType") in RELATIONSHIPS, f"relationshipType {r.get('relationshipType')}", e)
        for k in ("spdxElementId", "relatedSpdxElement"):
            v = r.get(k, "")
            need(v in ids or v in ("NONE", "NOASSERTION"), f"relationship {k} {v!r} names nothing", e)
    need(any(r.get("spdxElementId") == "SPDXRef-DOCUMENT" and r.get("relationshipType") == "DESCRIBES"
             for r in doc.get("relationships") or []), "the document DESCRIBES nothing", e)
    defined = set()
    for x in doc.get("hasExtractedLicensingInfos") or []:
        need(REF.match(x.get("licenseId", "")), f"licenseId {x.get('licenseId')!r}", e)
        need(isinstance(x.get("extractedText"), str) and x["extractedText"], f"{x.get('licenseId')}: no text", e)
        defined.add(x.get("licenseId"))
    exprs = sorted({x for x in exprs if x not in ("NONE", "NOASSERTION")})
    for x in exprs:
        for ref in re.findall(r"LicenseRef-[A-Za-z0-9.-]+", x):
            need(ref in defined, f"{ref} used but not defined", e)
    return e, exprs


def parse_expressions(exprs):
    env = dict(os.environ, NODE_PATH="/usr/share/nodejs")
    r = subprocess.run(["node", "-e", PARSE_JS], input=json.dumps(exprs), capture_output=True,
                       text=True, env=env, timeout=60)
    if r.returncode:
        return [f"spdx-expression-parse did not run: {r.stderr[-2000:]}"]
    return json.loads(r.stdout)


def check(rootfs, arch, doc=None):
    """The SBOM in rootfs (or doc, in its place); raises AssertionError
    naming what is wrong. Returns (files, Debian packages) counted."""
    path = os.path.join(rootfs, SELF)
    assert os.path.isfile(path), f"no /{SELF} in the image"
    if doc is None:
        doc = json.load(open(path))
    errors, exprs = structure(doc)
    errors += parse_expressions(exprs)
    assert not errors, "the SBOM breaks SPDX 2.3:\n  " + "\n  ".join(errors[:40])

    listed = {f["fileName"][2:]: f for f in doc["files"]}
    owner = {}
    for p in doc["packages"]:
        for fid in p.get("hasFiles") or []:
            owner[fid] = p
    seen = 0
    for d, _, fs in os.walk(rootfs):
        for name in fs:
            full = os.path.join(d, name)
            rel = os.path.relpath(full, rootfs)
            if rel == SELF or os.path.islink(full):
                continue
            seen += 1
            f = listed.get(rel)
            assert f, f"/{rel} is not in the SBOM"
            sha1 = hashlib.sha1(open(full, "rb").read()).hexdigest()
            sums = {c["algorithm"]: c["checksumValue"] for c in f["checksums"]}
            assert sums["SHA1"] == sha1, f"/{rel}: SHA1 {sums['SHA1']} in the SBOM, {sha1} in the image"
            p = owner.get(f["SPDXID"])
            assert p, f"/{rel}: no package contains it"
            if ".so" not in name or rel.startswith("usr/lib/prismlb/"):
                continue
            # A shared object from Debian: package, version, license.
            assert p.get("supplier") == "Organization: Debian", f"/{rel}: in {p['name']}, not a Debian package"
            purl = next(r["referenceLocator"] for r in p["externalRefs"] if r["referenceType"] == "purl")
            assert f"?arch={arch}&" in purl, f"/{rel}: {purl} is not of {arch}"
            assert p.get("licenseDeclared") not in (None, "NOASSERTION", "NONE"), f"/{rel}: {p['name']} has no license"
            q = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", f"{p['name']}:{arch}"],
                               capture_output=True, text=True)
            assert q.returncode == 0 and q.stdout == p["versionInfo"], \
                f"/{rel}: {p['name']} {p['versionInfo']} in the SBOM, dpkg has {q.stdout!r}"
    assert seen == len(listed), f"the SBOM lists {len(listed)} files, the image has {seen}"
    return seen, sum(1 for p in doc["packages"] if p.get("supplier") == "Organization: Debian")


def check_refuses(rootfs, arch):
    """check() refuses an SBOM with a broken rule or one that does not match
    the image: each of these changes of the image's own SBOM must fail it."""
    good = json.load(open(os.path.join(rootfs, SELF)))

    def libpkg(d):
        return next(p for p in d["packages"] if p.get("supplier") == "Organization: Debian" and
                    p["name"].startswith("libssl"))

    def drop_file(d):
        d["files"].pop()

    def bad_license(d):
        libpkg(d)["licenseDeclared"] = "Not-A-License-1.0"

    def no_license(d):
        libpkg(d)["licenseDeclared"] = "NOASSERTION"

    def bad_checksum(d):
        d["files"][0]["checksums"][0]["checksumValue"] = "0" * 40

    def bad_version(d):
        libpkg(d)["versionInfo"] += "x"

    def dangling(d):
        d["relationships"].append({"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "CONTAINS",
                                   "relatedSpdxElement": "SPDXRef-nothing"})

    def old_spec(d):
        d["spdxVersion"] = "SPDX-2.2"

    for change in (drop_file, bad_license, no_license, bad_checksum, bad_version, dangling, old_spec):
        doc = json.loads(json.dumps(good))
        change(doc)
        try:
            check(rootfs, arch, doc)
        except AssertionError:
            continue
        raise AssertionError(f"the SBOM check passed an SBOM changed by {change.__name__}")
