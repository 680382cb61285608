// Extracts the OpenAPI definitions of the kinds the fake API server validates
// from the npm package kubernetes-models, into one JSON document the fake
// loads at start (schemas.json beside this script).
//
// kubernetes-models ships each upstream definition compiled by ajv into a
// standalone validator (_schemas/NAME.js). The generated code is regular:
// one function per sub-schema, a type test, an enum list, a format, the
// required names, and a call per property, per array item or per map value.
// This script reads those pieces back into a schema tree; any construct it
// does not recognise (an inlined nested check) stops it with an error rather
// than being skipped.
//
// Usage: node extract.mjs NODE_MODULES_DIR > schemas.json
//        node extract.mjs NODE_MODULES_DIR --check schemas.json
//          (exit 1 when the file differs from what the package gives)
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

const ROOTS = {
  "v1/Namespace": "IoK8sApiCoreV1Namespace",
  "v1/Node": "IoK8sApiCoreV1Node",
  "v1/Service": "IoK8sApiCoreV1Service",
  "v1/Event": "IoK8sApiCoreV1Event",
  "discovery.k8s.io/v1/EndpointSlice": "IoK8sApiDiscoveryV1EndpointSlice",
  "coordination.k8s.io/v1/Lease": "IoK8sApiCoordinationV1Lease",
  "events.k8s.io/v1/Event": "IoK8sApiEventsV1Event",
};

const [modules, mode, checkFile] = process.argv.slice(2);
if (!modules || (mode && (mode !== "--check" || !checkFile))) {
  console.error("usage: node extract.mjs NODE_MODULES_DIR [--check schemas.json]");
  process.exit(2);
}

if (!existsSync(join(modules, "kubernetes-models/package.json"))) {
  console.error(`SKIP: ${modules} has no kubernetes-models (run tests/setup.sh test)`);
  process.exit(77);
}

function fail(msg) {
  console.error(`extract.mjs: ${msg}`);
  process.exit(1);
}

function schemaFile(name) {
  const dir = name.startsWith("IoK8sApimachinery")
    ? join(modules, "@kubernetes-models/apimachinery/_schemas")
    : join(modules, "kubernetes-models/_schemas");
  return join(dir, `${name}.js`);
}

// The end of the block opened at src[open] ('{'), skipping string literals.
function blockEnd(src, open) {
  let depth = 0;
  for (let i = open; i < src.length; i++) {
    const c = src[i];
    if (c === '"') {
      for (i++; i < src.length && src[i] !== '"'; i++) if (src[i] === "\\") i++;
    } else if (c === "{") {
      depth++;
    } else if (c === "}" && --depth === 0) {
      return i;
    }
  }
  fail("unbalanced braces");
}

// One compiled file: its functions' bodies, imports, enums, formats.
function parseFile(name) {
  const src = readFileSync(schemaFile(name), "utf8");
  const file = { name, funcs: new Map(), imports: new Map(), enums: new Map(), formats: new Map() };
  const exp = src.match(/export const validate=(validate\d+);/);
  if (!exp) fail(`${name}: no exported validator`);
  file.root = exp[1];
  for (const m of src.matchAll(/import\{validate as (validate\d+)\}from"([^"]+)"/g))
    file.imports.set(m[1], m[2].replace(/^.*\//, "").replace(/\.js$/, ""));
  for (const m of src.matchAll(/let (schema\d+_enum)=(\[[^\]]*\]);/g))
    file.enums.set(m[1], JSON.parse(m[2]));
  for (const m of src.matchAll(/let (formats\d+)=formats(?:\.([\w-]+)|\["([\w-]+)"\]);/g))
    file.formats.set(m[1], m[2] ?? m[3]);
  const fn = /function (validate\d+)\(data,\{instancePath="",parentData,parentDataProperty,rootData=data\}=\{\}\)\{/g;
  for (let m; (m = fn.exec(src)); ) {
    const open = m.index + m[0].length - 1;
    file.funcs.set(m[1], src.slice(open + 1, blockEnd(src, open)));
  }
  return file;
}

const files = new Map();
const definitions = {};

function fileOf(name) {
  if (!files.has(name)) files.set(name, parseFile(name));
  return files.get(name);
}

// The schema a call to fname in file stands for: a $ref for an import, the
// local function's schema otherwise.
function target(file, fname) {
  if (file.imports.has(fname)) {
    const ref = file.imports.get(fname);
    define(ref);
    return { $ref: ref };
  }
  if (!file.funcs.has(fname)) fail(`${file.name}: ${fname} is not defined`);
  return funcSchema(file, fname);
}

function funcSchema(file, fname) {
  const body = file.funcs.get(fname);
  const s = {};
  const where = `${file.name}/${fname}`;

  // Everything is reached through calls; an error at a deeper path would be
  // a nested check inlined into this function, which is not read.
  if (/instancePath:instancePath\+"\//.test(body.replace(/validate\d+\([^,]+,\{instancePath:instancePath\+"\/[^"]*"/g, "")))
    fail(`${where}: inlined nested check`);

  const types = [...body.matchAll(/keyword:"type",params:\{type:"(\w+)"\}/g)].map((m) => m[1]);
  if (new Set(types).size > 1) fail(`${where}: several types`);
  if (types.length) s.type = types[0];
  if (/null!==data/.test(body) && !/^let vErrors=null,errors=0;return /.test(body))
    s.nullable = true;
  const en = body.match(/params:\{allowedValues:(schema\d+_enum)\}/);
  if (en) {
    if (!file.enums.has(en[1])) fail(`${where}: enum ${en[1]} not found`);
    s.enum = file.enums.get(en[1]);
  }
  const fm = body.match(/(formats\d+)\.validate/);
  if (fm) s.format = file.formats.get(fm[1]);
  const req = [...body.matchAll(/params:\{missingProperty:"([^"]+)"\}/g)].map((m) => m[1]);
  if (req.length) s.required = req;

  if (/keyword:"oneOf"/.test(body)) {
    s.oneOf = [...body.matchAll(/(validate\d+)\(data,\{instancePath,/g)].map((m) => target(file, m[1]));
    return s;
  }
  for (const kw of ["anyOf", "allOf", "additionalProperties\"", "pattern", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "const", "not", "if"])
    if (body.includes(`keyword:"${kw.replace('"', "")}"`)) fail(`${where}: keyword ${kw} is not read`);

  const whole = body.match(/^let vErrors=null,errors=0;return (null!==data&&\()?(validate\d+)\(data,\{instancePath,/);
  if (whole) {
    if (Object.keys(s).length) fail(`${where}: a reference with checks of its own`);
    const t = target(file, whole[2]);
    return whole[1] ? { ...t, nullable: true } : t;
  }
  for (const m of body.matchAll(/(validate\d+)\(data(?:\.([A-Za-z_$][\w$]*)|\["([^"]+)"\]),\{instancePath:instancePath\+"\//g)) {
    s.properties ??= {};
    s.properties[m[2] ?? m[3]] = target(file, m[1]);
  }
  const items = body.match(/(validate\d+)\(data\[i\d+\],/);
  if (items) s.items = target(file, items[1]);
  const vals = body.match(/(validate\d+)\(data\[key\d+\],/);
  if (vals) s.additionalProperties = target(file, vals[1]);
  return s;
}

function define(name) {
  if (name in definitions) return;
  definitions[name] = null; // in progress (a cycle ends here)
  const file = fileOf(name);
  definitions[name] = funcSchema(file, file.root);
}

for (const root of Object.values(ROOTS)) define(root);

const sorted = {};
for (const k of Object.keys(definitions).sort()) sorted[k] = definitions[k];
const pkg = JSON.parse(readFileSync(join(modules, "kubernetes-models/package.json"), "utf8"));
const doc = {
  source: `kubernetes-models ${pkg.version} (generated by extract.mjs; do not edit)`,
  kinds: ROOTS,
  definitions: sorted,
};
const text = JSON.stringify(doc, null, 1) + "\n";
if (mode === "--check") {
  const have = readFileSync(checkFile, "utf8");
  if (have !== text) {
    console.error(`${checkFile} is not what extract.mjs makes from ${modules}: regenerate it with\n` +
      `  node extract.mjs ${modules} > ${checkFile}`);
    process.exit(1);
  }
  console.log(`${checkFile} is current (${Object.keys(sorted).length} definitions)`);
} else {
  process.stdout.write(text);
}
