#!/usr/bin/env node
// The fleet's wrangler configuration: the benchmark worker once per placement region
// (crates/core/fleet-regions.json, the one list), one wrangler environment each —
// `[placement] region`, the same vars, compatibility flags and the same KV namespace, D1
// database, R2 bucket and Durable Object namespace as the main worker (read from its deploy
// config, which scripts/resources.mjs writes with the resources' ids), no cron, no probes of its
// own. `npm run deploy` writes it and deploys each environment; it is also what
// `wrangler deploy --dry-run` checks offline.
//
// Usage: node scripts/fleet.mjs [--from .fleet/kvbench.jsonc] [--out .fleet/wrangler.jsonc]
//                               [--regions all|none|N|region,region,...]
// Prints one line per member: `<env> <region> <worker name>`.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const REGIONS = JSON.parse(fs.readFileSync(path.join(ROOT, "crates/core/fleet-regions.json"), "utf8")).regions;

function fail(message) {
  console.error(`[kvbench] error: ${message}`);
  process.exit(2);
}

/** A FLEET_REGIONS (or --regions) that selects no list of members; its message names the variable. */
export class RegionsError extends Error {}

/** The regions `spec` selects: all, none (or 0), the first N spread over the continents in turn,
 * or a comma list of region ids — each in the list, each once (a region is one worker name: a
 * duplicate would be deployed twice and listed twice in FLEET). Anything else throws a
 * RegionsError naming `name`. */
export function selectRegions(spec, name = "FLEET_REGIONS") {
  const s = String(spec ?? "all").trim();
  const shown = JSON.stringify(s.length > 80 ? `${s.slice(0, 79)}…` : s);
  const refuse = (why) => {
    throw new RegionsError(`${name}=${shown}: ${why}`);
  };
  if (s === "all" || s === "") return REGIONS;
  if (s === "none" || s === "0") return [];
  if (/^\d+$/.test(s)) {
    const n = Number(s);
    if (n > REGIONS.length) refuse(`a count is 1 to ${REGIONS.length} (the regions of crates/core/fleet-regions.json)`);
    const byContinent = new Map();
    for (const r of REGIONS) byContinent.set(r.continent, [...(byContinent.get(r.continent) ?? []), r]);
    const out = [];
    while (out.length < n) for (const list of byContinent.values()) if (list.length && out.length < n) out.push(list.shift());
    return out;
  }
  const ids = s.split(",").map((id) => id.trim());
  if (!ids.every((id) => /^[a-z0-9]+:[a-z0-9-]+$/.test(id))) {
    refuse(`expected all, none, a count from 1 to ${REGIONS.length}, or a comma list of region ids like aws:us-east-1`);
  }
  const seen = new Set();
  return ids.map((id) => {
    if (seen.has(id)) refuse(`${id} is listed twice (one member per region)`);
    seen.add(id);
    const r = REGIONS.find((x) => x.region === id);
    if (!r) refuse(`${id} is not in crates/core/fleet-regions.json (known: ${REGIONS.map((x) => x.region).join(", ")})`);
    return r;
  });
}

/** The environment name and worker name of a region: `aws:us-east-1` → `aws-us-east-1`. */
export const envName = (region) => region.replace(/[^a-z0-9]+/g, "-");

/** The fleet's configuration (a wrangler JSON config) for `regions`, from the main worker's raw
 * config `main` (as wrangler parsed it, from the file `from`); `outDir` is where the file will
 * live (paths are relative to it). */
export function fleetConfig(main, regions, outDir, from = "the main worker's config") {
  const rel = (p) => path.relative(outDir, path.join(ROOT, p)) || ".";
  const kv = (main.kv_namespaces ?? []).map((n) => {
    if (!n.id) fail(`the KV namespace ${n.binding} has no id in ${from}: find or create the resources first (scripts/resources.mjs; npm run deploy does)`);
    return { binding: n.binding, id: n.id };
  });
  const d1 = (main.d1_databases ?? []).map((d) => {
    if (!d.database_id) fail(`the D1 database ${d.binding} has no database_id in ${from}: find or create the resources first (scripts/resources.mjs; npm run deploy does)`);
    return { binding: d.binding, database_name: d.database_name, database_id: d.database_id };
  });
  const r2 = (main.r2_buckets ?? []).map((b) => ({ binding: b.binding, bucket_name: b.bucket_name }));
  // The hyperdrive store's configuration (npm run deploy makes it when POSTGRES_URL is given).
  const hyperdrive = (main.hyperdrive ?? []).map((h) => ({ binding: h.binding, id: h.id }));
  // The `do` store's namespace and the run archive are the main worker's (their classes and
  // migrations live there): a run sent to a member is kept where the main worker reads it.
  const durable = (main.durable_objects?.bindings ?? [])
    .filter((b) => b.name === "BENCH_DO" || b.name === "BENCH_RUNS")
    .map((b) => ({ name: b.name, class_name: b.class_name, script_name: main.name }));
  const env = {};
  for (const r of regions) {
    const name = envName(r.region);
    env[name] = {
      name: `${main.name}-${name}`,
      workers_dev: true,
      placement: { region: r.region },
      vars: { ...(main.vars ?? {}), FLEET_REGION: r.region },
      kv_namespaces: kv,
      d1_databases: d1,
      r2_buckets: r2,
      ...(hyperdrive.length ? { hyperdrive } : {}),
      durable_objects: { bindings: durable },
      triggers: { crons: [] },
    };
  }
  return {
    name: `${main.name}-fleet`,
    // The member build (scripts/build.sh member): /test without the operations plane.
    main: rel("build-member/index.js"),
    compatibility_date: main.compatibility_date,
    ...(main.compatibility_flags ? { compatibility_flags: main.compatibility_flags } : {}),
    workers_dev: false,
    env,
  };
}

// Run as a script (not imported). Compared as paths: the URL is percent-encoded, so a checkout
// under a path with a space would never match `file://${argv[1]}`.
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const { values } = parseArgs({
    options: {
      from: { type: "string", default: path.join(ROOT, ".fleet/kvbench.jsonc") },
      out: { type: "string", default: path.join(ROOT, ".fleet/wrangler.jsonc") },
      regions: { type: "string", default: process.env.FLEET_REGIONS ?? "all" },
    },
  });
  const { experimental_readRawConfig } = await import("wrangler");
  const { rawConfig } = experimental_readRawConfig({ config: values.from });
  if (!rawConfig?.name) fail(`${values.from}: no worker name`);
  let regions;
  try {
    regions = selectRegions(values.regions, process.env.FLEET_REGIONS === values.regions ? "FLEET_REGIONS" : "--regions");
  } catch (e) {
    if (e instanceof RegionsError) fail(e.message);
    throw e;
  }
  const out = path.resolve(values.out);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const header = "// Generated by scripts/fleet.mjs from the main worker's deploy config and crates/core/fleet-regions.json;\n// do not edit: npm run deploy writes it anew.\n";
  fs.writeFileSync(out, `${header}${JSON.stringify(fleetConfig(rawConfig, regions, path.dirname(out), path.basename(values.from)), null, 2)}\n`);
  for (const r of regions) console.log(`${envName(r.region)} ${r.region} ${rawConfig.name}-${envName(r.region)}`);
}
