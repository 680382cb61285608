// Validates the objects written to the fake API server against the
// Kubernetes OpenAPI schemas, with the npm package kubernetes-models.
// Usage: node validate_writes.mjs NODE_MODULES_DIR WRITES.json
// WRITES.json: a JSON array of {"id": N, "object": {...}}; each object
// carries apiVersion and kind (the fake fills them in as the API server
// does before it logs a write).
// Prints a JSON array of {"id", "errors": [{"path", "message"}]}, one per
// object the schema refuses or no schema is known for; exits 0 when the
// validation ran, whatever it found (conformance.py judges), 2 on misuse.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, file] = process.argv.slice(2);
if (!modules || !file) {
  console.error("usage: node validate_writes.mjs NODE_MODULES_DIR WRITES.json");
  process.exit(2);
}

const models = new Map();
async function modelFor(apiVersion, kind) {
  const key = `${apiVersion}/${kind}`;
  if (!models.has(key)) {
    const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
    const path = join(modules, "kubernetes-models", group, version, `${kind}.js`);
    models.set(key, existsSync(path) ? (await import(pathToFileURL(path).href))[kind] : null);
  }
  return models.get(key);
}

const out = [];
for (const { id, object } of JSON.parse(readFileSync(file, "utf8"))) {
  const Model = await modelFor(object?.apiVersion ?? "", object?.kind ?? "");
  if (!Model) {
    out.push({ id, errors: [{ path: "", message: `no schema for ${object?.apiVersion} ${object?.kind}` }] });
    continue;
  }
  try {
    new Model(object).validate();
  } catch (e) {
    const errors = (e.errors ?? []).map((x) => ({
      path: x.instancePath.replace(/^\//, "").replace(/\//g, "."),
      message: `${x.message}${x.params?.allowedValues ? ` (${x.params.allowedValues.join(", ")})` : ""}`,
    }));
    out.push({ id, errors: errors.length ? errors : [{ path: "", message: e.message }] });
  }
}
process.stdout.write(JSON.stringify(out) + "\n");
