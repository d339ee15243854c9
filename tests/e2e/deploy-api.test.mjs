// `npm run deploy` as a deployer's script or CI runs it — no terminal — with the project's pinned
// wrangler pointed at the Cloudflare API stand-in (tests/e2e/cf-api.mjs, through
// CLOUDFLARE_API_BASE_URL, CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID), and the requests it
// made checked: each resource created once and found on the next deploy; the D1 table created;
// every worker uploaded with the bindings it needs (members placed in their own region, the
// same-zone fetch flag, BENCH_TOKEN wherever there is a URL, cron and Durable Object migrations
// on the main worker only); the R2 bucket's lifecycle rule set once; the Hyperdrive configuration
// created once when POSTGRES_URL is given; no secret in anything printed; wrangler.toml never
// written to; an API error at member k stops the deploy naming it and the rerun completes. Run
// `npm run build` first (scripts/test.sh does): the main worker's upload is build/, each
// member's build-member/ (the same /test without the operations plane).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { startCfApi } from "./cf-api.mjs";
import { ROOT, freePort } from "./procs.mjs";

const REGIONS = JSON.parse(fs.readFileSync(path.join(ROOT, "crates/core/fleet-regions.json"), "utf8")).regions;
const envName = (region) => region.replace(/[^a-z0-9]+/g, "-");
const PG_PASSWORD = `deploy-pg-${crypto.randomBytes(8).toString("hex")}`;
const API_TOKEN = `cf-api-token-${crypto.randomBytes(12).toString("hex")}`;
const WRANGLER_TOML = fs.readFileSync(path.join(ROOT, "wrangler.toml"));
const MAIN_CLASSES = ["BenchObject", "FleetDirectory", "ProbeObject", "RunArchive"];
/** The sizes of the wasm modules an upload carried. */
const wasmSizes = (script) => Object.entries(script.moduleSizes ?? {}).filter(([p]) => p.endsWith(".wasm")).map(([, size]) => size);

let pgDir;
let pgUrl;
before(() => {
  pgDir = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-deploy-pg-"));
});
after(() => {
  if (pgUrl) execFileSync("bash", [path.join(ROOT, "scripts/postgres.sh"), "stop", pgDir]);
  fs.rmSync(pgDir, { recursive: true, force: true });
  assert.ok(WRANGLER_TOML.equals(fs.readFileSync(path.join(ROOT, "wrangler.toml"))), "a deploy wrote to wrangler.toml");
});

async function postgres() {
  if (!pgUrl) {
    const port = await freePort();
    pgUrl = execFileSync("bash", [path.join(ROOT, "scripts/postgres.sh"), "start", pgDir, String(port), PG_PASSWORD], { encoding: "utf8" }).trim();
  }
  return pgUrl;
}

/** `npm run deploy` against `api`, stdin closed and output piped (no terminal), bounded in time. */
function deploy(api, dir, env = {}) {
  return new Promise((resolve) => {
    const child = spawn("npm", ["run", "--silent", "deploy"], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        ...api.env,
        KVBENCH_DEPLOY_DIR: dir,
        KVBENCH_DEPLOY_CHECK: "0",
        KVBENCH_SKIP_SETUP: "1",
        BENCH_TOKEN: "",
        POSTGRES_URL: "",
        ...env,
      },
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 15 * 60_000);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

/** `fn(api, dir)` with a fresh stand-in and a deploy state directory, both removed after. */
async function withApi(prefix, fn) {
  const api = await startCfApi({ token: API_TOKEN });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  try {
    await fn(api, dir);
  } finally {
    await api.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const creates = (api) => api.requests.filter((r) => r.method === "POST" && /\/(storage\/kv\/namespaces|d1\/database|r2\/buckets|hyperdrive\/configs)$/.test(r.path) && r.status === 200);
const lifecycleSets = (api) => api.requests.filter((r) => r.method === "PUT" && /\/r2\/buckets\/[^/]+\/lifecycle$/.test(r.path) && r.status === 200);
const byRoute = (api) => {
  const counts = {};
  for (const r of api.requests) {
    const route = `${r.method} ${r.path.replace(/^\/accounts\/[^/]+/, "/accounts/:account").replace(/\/scripts\/[^/]+/, "/scripts/:name").replace(/\/services\/[^/]+/, "/services/:name").replace(/\/(database|namespaces)\/[0-9a-f-]{32,36}/, "/$1/:id").replace(/\/secrets\/[^/]+/, "/secrets/:name")}`;
    counts[route] = (counts[route] ?? 0) + 1;
  }
  return counts;
};
const binding = (script, name) => script.bindings.find((b) => b.name === name);

/** What every deploy must have made, whatever the fleet. */
function checkMain(api, dir, out, { postgres: pg = false } = {}) {
  const { state } = api;
  const token = fs.readFileSync(path.join(dir, "bench-token"), "utf8").trim();
  assert.equal(fs.statSync(path.join(dir, "bench-token")).mode & 0o777, 0o600);
  // One of each resource, by the names of wrangler.toml.
  assert.deepEqual([...state.kv.values()].map((n) => n.title), ["kvbench-bench-kv"]);
  assert.deepEqual([...state.d1.values()].map((d) => d.name), ["kvbench"]);
  assert.deepEqual([...state.r2.keys()], ["kvbench"]);
  // The bucket's lifecycle rule, the sweep's backstop: the r2 store's namespace, a day after
  // the last write (the longest TTL), exactly one rule.
  assert.deepEqual(state.r2Lifecycle.get("kvbench"), [
    { id: "kvbench-r2-expired", enabled: true, conditions: { prefix: "kvbench:r2:" }, deleteObjectsTransition: { condition: { maxAge: 86400, type: "Age" } } },
  ]);
  assert.equal(state.hyperdrive.size, pg ? 1 : 0);
  // The D1 table, made by the remote migration in a real SQLite.
  const db = [...state.d1.values()][0];
  const tables = execFileSync("sqlite3", [db.file, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"], { encoding: "utf8" }).trim().split("\n");
  assert.ok(tables.includes("kvbench"), `D1 tables: ${tables}`);
  assert.ok(tables.includes("d1_migrations"), `D1 tables: ${tables}`);
  // The report worker: no URL, no bindings of its own.
  const report = state.scripts.get("kvbench-report");
  assert.ok(report, "the report worker was uploaded");
  assert.equal(report.subdomain.enabled, false, "the report worker has no workers.dev URL");
  // The main worker: every binding, the flag, the migrations, the cron, the token.
  const main = state.scripts.get("kvbench");
  assert.ok(main, "the main worker was uploaded");
  assert.equal(main.subdomain.enabled, true);
  assert.ok(main.compatibility_flags.includes("global_fetch_strictly_public"), "the probes can reach same-account workers (error 1042)");
  assert.equal(binding(main, "BENCH_KV").namespace_id, [...state.kv.keys()][0]);
  assert.equal(binding(main, "BENCH_D1").id, db.uuid);
  assert.equal(binding(main, "BENCH_R2").bucket_name, "kvbench");
  assert.equal(binding(main, "REPORT").service, "kvbench-report");
  for (const [name, cls] of [["BENCH_DO", "BenchObject"], ["BENCH_PROBES", "ProbeObject"], ["BENCH_RUNS", "RunArchive"], ["BENCH_DIRECTORY", "FleetDirectory"]]) {
    assert.equal(binding(main, name)?.class_name, cls, name);
  }
  assert.deepEqual([...main.classes].sort(), MAIN_CLASSES);
  assert.deepEqual(wasmSizes(main), [fs.statSync(path.join(ROOT, "build/index_bg.wasm")).size], "the main worker uploads the main build");
  assert.equal(main.migrationTag, "v4");
  assert.deepEqual(main.schedules.map((s) => s.cron), ["*/5 * * * *"]);
  assert.equal(main.secrets.get("BENCH_TOKEN"), token);
  // The build reports name (GET /'s provenance): this checkout's commit and wrangler's version.
  const built = JSON.parse(binding(main, "KVBENCH_PROVENANCE").text);
  assert.equal(built.stack, "deployed");
  assert.match(built.commit, /^[0-9a-f]{12}(-dirty)?$/);
  assert.equal(built.wrangler, JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules/wrangler/package.json"), "utf8")).version);
  if (pg) {
    assert.equal(binding(main, "BENCH_HYPERDRIVE").id, [...state.hyperdrive.keys()][0]);
    assert.equal(main.secrets.get("POSTGRES_URL"), pgUrl);
    assert.match(binding(main, "STORES").text, /postgres,hyperdrive/);
  } else {
    assert.equal(binding(main, "BENCH_HYPERDRIVE"), undefined);
  }
  // Nothing secret printed, and wrangler.toml untouched.
  for (const secret of [token, API_TOKEN, PG_PASSWORD]) assert.ok(!out.includes(secret), "a secret was printed");
  assert.ok(WRANGLER_TOML.equals(fs.readFileSync(path.join(ROOT, "wrangler.toml"))), "the deploy wrote to wrangler.toml");
  return { main, token };
}

/** The members of `regions`: placed, flagged, bound to the main worker's objects, no cron. */
function checkMembers(api, regions, token, { postgres: pg = false } = {}) {
  const { state } = api;
  const main = state.scripts.get("kvbench");
  const members = [...state.scripts.keys()].filter((n) => n !== "kvbench" && n !== "kvbench-report").sort();
  assert.deepEqual(members, regions.map((r) => `kvbench-${envName(r)}`).sort());
  for (const region of regions) {
    const name = `kvbench-${envName(region)}`;
    const m = state.scripts.get(name);
    assert.deepEqual(m.placement, { mode: "targeted", region }, name);
    assert.equal(binding(m, "FLEET_REGION").text, region);
    assert.equal(m.subdomain.enabled, true, `${name} has a URL`);
    assert.equal(m.secrets.get("BENCH_TOKEN"), token, `${name}: BENCH_TOKEN`);
    assert.ok(m.compatibility_flags.includes("global_fetch_strictly_public"), name);
    assert.deepEqual(m.schedules, [], `${name} runs no cron`);
    assert.equal(binding(m, "KVBENCH_PROVENANCE").text, binding(main, "KVBENCH_PROVENANCE").text, `${name}: the same build`);
    assert.equal(m.classes.size, 0, `${name} has no Durable Object classes of its own`);
    // The member build (scripts/build.sh member), not the main worker's.
    assert.deepEqual(wasmSizes(m), [fs.statSync(path.join(ROOT, "build-member/index_bg.wasm")).size], `${name} uploads the member build`);
    assert.equal(m.migrationTag, undefined);
    for (const [b, cls] of [["BENCH_DO", "BenchObject"], ["BENCH_RUNS", "RunArchive"]]) {
      assert.deepEqual({ c: binding(m, b)?.class_name, s: binding(m, b)?.script_name }, { c: cls, s: "kvbench" }, `${name} ${b}`);
    }
    assert.equal(binding(m, "BENCH_KV").namespace_id, binding(main, "BENCH_KV").namespace_id);
    assert.equal(binding(m, "BENCH_D1").id, binding(main, "BENCH_D1").id);
    if (pg) assert.equal(binding(m, "BENCH_HYPERDRIVE").id, binding(main, "BENCH_HYPERDRIVE").id);
  }
  const fleet = main.secrets.get("FLEET");
  if (regions.length) {
    assert.deepEqual(fleet.split(",").sort(), regions.map((r) => `${r}=https://kvbench-${envName(r)}.${state.subdomain}.workers.dev`).sort());
  } else {
    assert.equal(fleet, undefined, "no fleet: no FLEET secret");
  }
}

test("a first deploy without a terminal, a few members and Postgres; the second creates nothing; an API error at member k names it and the rerun completes", { timeout: 30 * 60_000 }, async () => {
  await withApi("kvbench deploy ", async (api, dir) => {
    const pg = await postgres();
    const regions = REGIONS.slice(0, 3).map((r) => r.region);
    const first = await deploy(api, dir, { FLEET_REGIONS: regions.join(","), POSTGRES_URL: pg });
    assert.equal(first.code, 0, first.out);
    const { token } = checkMain(api, dir, first.out, { postgres: true });
    checkMembers(api, regions, token, { postgres: true });
    assert.equal(creates(api).length, 4, "KV, D1, R2, Hyperdrive: each created once");
    assert.equal(lifecycleSets(api).length, 1, "the R2 lifecycle rule: set once");
    console.log("requests of one deploy (3 members, Postgres), by route:", JSON.stringify(byRoute(api), null, 1));

    // Again: every resource found, nothing created, the same ids.
    const before = creates(api).length;
    const second = await deploy(api, dir, { FLEET_REGIONS: regions.join(","), POSTGRES_URL: pg });
    assert.equal(second.code, 0, second.out);
    assert.equal(creates(api).length, before, "the second deploy created a resource");
    assert.equal(lifecycleSets(api).length, 1, "the second deploy found the lifecycle rule");
    checkMain(api, dir, second.out, { postgres: true });
    checkMembers(api, regions, token, { postgres: true });

    // An API error while deploying member k — its upload refused until the fault is cleared,
    // whichever of the two upload routes wrangler takes (wrangler retries a 5xx a few times, so
    // one refusal alone is retried away): the deploy stops, naming it; the rerun completes.
    const k = regions[1];
    api.failOn("PUT", new RegExp(`/workers/scripts/kvbench-${envName(k)}$`), { times: 1000, status: 500, code: 10013 });
    api.failOn("POST", new RegExp(`/workers/scripts/kvbench-${envName(k)}/versions$`), { times: 1000, status: 500, code: 10013 });
    const failed = await deploy(api, dir, { FLEET_REGIONS: regions.join(","), POSTGRES_URL: pg });
    assert.notEqual(failed.code, 0, failed.out);
    assert.match(failed.out, new RegExp(`deploying fleet member kvbench-${envName(k)} \\(${k}\\) failed`));
    assert.match(failed.out, /An unknown error has occurred \(injected by the stand-in\)/, "wrangler's own error shown");
    assert.doesNotMatch(failed.out, new RegExp(`-> kvbench-${envName(regions[2])}`), "nothing deployed after the failure");
    api.clearFaults();
    const rerun = await deploy(api, dir, { FLEET_REGIONS: regions.join(","), POSTGRES_URL: pg });
    assert.equal(rerun.code, 0, rerun.out);
    checkMembers(api, regions, token, { postgres: true });
    assert.equal(creates(api).length, before);
  });
});

test("FLEET_REGIONS=none: the main worker alone, no FLEET secret, no Postgres stores", { timeout: 10 * 60_000 }, async () => {
  await withApi("kvbench-deploy-none-", async (api, dir) => {
    const r = await deploy(api, dir, { FLEET_REGIONS: "none" });
    assert.equal(r.code, 0, r.out);
    const { token } = checkMain(api, dir, r.out);
    checkMembers(api, [], token);
    assert.equal(creates(api).length, 3);
  });
});

test("the full default fleet: one placed member per region of the list", { timeout: 30 * 60_000 }, async () => {
  await withApi("kvbench-deploy-all-", async (api, dir) => {
    const given = `given-${crypto.randomBytes(8).toString("hex")}`;
    const r = await deploy(api, dir, { BENCH_TOKEN: given });
    assert.equal(r.code, 0, r.out);
    assert.ok(!fs.existsSync(path.join(dir, "bench-token")), "a given BENCH_TOKEN is not written down");
    assert.ok(!r.out.includes(given));
    assert.ok(REGIONS.length >= 20);
    fs.writeFileSync(path.join(dir, "bench-token"), given, { mode: 0o600 });
    const { token } = checkMain(api, dir, r.out);
    checkMembers(api, REGIONS.map((x) => x.region), token);
    console.log(`requests of one full deploy (${REGIONS.length} members), by route:`, JSON.stringify(byRoute(api), null, 1));
  });
});
