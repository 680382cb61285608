// Validates Kubernetes objects against the upstream OpenAPI schemas with the
// npm package kubernetes-models (and its prometheus-operator companion for
// ServiceMonitor and PrometheusRule).
// Usage: node validate.mjs NODE_MODULES_DIR OBJECTS.json
// OBJECTS.json: a JSON array of objects (helm template output converted).
// Prints one line per object; exits 1 if any object is invalid or of a kind
// no schema is known for.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, file] = process.argv.slice(2);
if (!modules || !file) {
  console.error("usage: node validate.mjs NODE_MODULES_DIR OBJECTS.json");
  process.exit(2);
}

function modulePath(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  if (group === "monitoring.coreos.com")
    return join(modules, "@kubernetes-models/prometheus-operator", group, version, `${kind}.js`);
  return join(modules, "kubernetes-models", group, version, `${kind}.js`);
}

const objects = JSON.parse(readFileSync(file, "utf8"));
let bad = 0;
for (const obj of objects) {
  const name = `${obj.apiVersion} ${obj.kind} ${obj.metadata?.namespace ?? "-"}/${obj.metadata?.name}`;
  const path = modulePath(obj.apiVersion ?? "", obj.kind ?? "");
  if (!existsSync(path)) {
    console.log(`FAIL ${name}: no schema (${path})`);
    bad++;
    continue;
  }
  const mod = await import(pathToFileURL(path).href);
  const Model = mod[obj.kind];
  try {
    new Model(obj).validate();
    console.log(`ok   ${name}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e.message}`);
    bad++;
  }
}
console.log(`${objects.length} objects, ${bad} invalid`);
process.exit(bad ? 1 : 0);
