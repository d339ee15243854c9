// `npm run deploy` as a deployer's script or CI runs it — no terminal — with the project's pinned
// wrangler pointed at the Cloudflare API stand-in (tests/e2e/cf-api.mjs, through
// CLOUDFLARE_API_BASE_URL, CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID), and the requests of
// each run checked apart: each resource created once and found on the next deploy; the D1 table
// created; every worker uploaded with the bindings it needs (members placed in their own region, the
// same-zone fetch flag, BENCH_TOKEN wherever there is a URL, cron and Durable Object migrations
// on the main worker only); the R2 bucket's lifecycle rule set once; the Hyperdrive configuration
// created once when POSTGRES_URL is given; no secret in anything printed; wrangler.toml never
// written to; every non-2xx answer of the stand-in expected by name (a swallowed error fails the
// test). From a fresh account: an API error at member k stops the deploy naming it with nothing
// uploaded after k, and the rerun uploads k and the rest. An upgrade from a deployment at the
// Durable Object migration v3 takes v4 (FleetDirectory). Going from members to FLEET_REGIONS=none
// deletes the FLEET secret and names the members left deployed; that deploy's check runs against
// the workers.dev URL the deploy printed, served through the stand-in's front door by a local run
// of the built worker with the uploaded vars and secrets. The stand-in itself refuses what
// Cloudflare refuses (a placement region outside Cloudflare's list, a future compatibility date,
// two bindings of one name) and honours keep_bindings. Run `npm run build` first (scripts/test.sh
// does): the main worker's upload is build/, each member's build-member/.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { PLACEMENT_REGIONS, startCfApi } from "./cf-api.mjs";
import { FIRST_DEPLOY_404S, NEW_BUCKET_404, deploy as deployRun, unexpectedErrors, withApi as withStandIn } from "./deploy-run.mjs";
import { ROOT, freePort, startStack } from "./procs.mjs";

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

/** `npm run deploy` against `api` with the test's API token (deploy-run.mjs), its fleet chosen by
 * `env.FLEET_REGIONS`. */
const deploy = (api, dir, env = {}) => deployRun(api, dir, env);

/** `fn(api, dir)` with a fresh stand-in that takes the test's API token. */
const withApi = (prefix, fn, options = {}) => withStandIn(prefix, fn, { token: API_TOKEN, ...options });

/** The non-2xx answers of one run that nothing named: the test fails on any. */
function onlyExpectedErrors(run, expected = []) {
  assert.deepEqual(unexpectedErrors(run.requests, expected), [], `unexpected API errors in this run:\n${run.out.slice(-2000)}`);
}

/** The uploads of `run` (first deploys PUT the script, later ones POST a version), by worker name. */
const uploadsOf = (run) =>
  run.requests
    .filter((r) => (r.method === "PUT" && /\/workers\/scripts\/[^/]+$/.test(r.path)) || (r.method === "POST" && /\/workers\/scripts\/[^/]+\/versions$/.test(r.path)))
    .map((r) => ({ name: r.path.match(/\/workers\/scripts\/([^/]+)/)[1], status: r.status, how: r.method === "PUT" ? "first" : "version", metadata: r.metadata }));

const creates = (api) => api.requests.filter((r) => r.method === "POST" && /\/(storage\/kv\/namespaces|d1\/database|r2\/buckets|hyperdrive\/configs)$/.test(r.path) && r.status === 200);
const lifecycleSets = (api) => api.requests.filter((r) => r.method === "PUT" && /\/r2\/buckets\/[^/]+\/lifecycle$/.test(r.path) && r.status === 200);
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

/** The first deploy's expected non-2xx: each new worker's 404s, and the bucket not there yet. */
const FIRST = [...FIRST_DEPLOY_404S, NEW_BUCKET_404];

test("a first deploy without a terminal, a few members and Postgres; the second creates nothing and meets no API error", { timeout: 30 * 60_000 }, async () => {
  await withApi("kvbench deploy ", async (api, dir) => {
    const pg = await postgres();
    const regions = REGIONS.slice(0, 3).map((r) => r.region);
    const first = await deploy(api, dir, { FLEET_REGIONS: regions.join(","), POSTGRES_URL: pg });
    assert.equal(first.code, 0, first.out);
    onlyExpectedErrors(first, FIRST);
    const { token } = checkMain(api, dir, first.out, { postgres: true });
    checkMembers(api, regions, token, { postgres: true });
    assert.equal(creates(api).length, 4, "KV, D1, R2, Hyperdrive: each created once");
    assert.equal(lifecycleSets(api).length, 1, "the R2 lifecycle rule: set once");
    assert.deepEqual(uploadsOf(first).map((u) => `${u.name} ${u.how} ${u.status}`), ["kvbench-report", "kvbench", ...regions.map((r) => `kvbench-${envName(r)}`)].map((n) => `${n} first 200`));

    // Again: every resource found, nothing created, the same ids, and no API error at all.
    const before = creates(api).length;
    const second = await deploy(api, dir, { FLEET_REGIONS: regions.join(","), POSTGRES_URL: pg });
    assert.equal(second.code, 0, second.out);
    onlyExpectedErrors(second);
    assert.equal(creates(api).length, before, "the second deploy created a resource");
    assert.equal(lifecycleSets(api).length, 1, "the second deploy found the lifecycle rule");
    assert.deepEqual(uploadsOf(second).map((u) => `${u.name} ${u.how} ${u.status}`), ["kvbench-report", "kvbench", ...regions.map((r) => `kvbench-${envName(r)}`)].map((n) => `${n} version 200`));
    checkMain(api, dir, second.out, { postgres: true });
    checkMembers(api, regions, token, { postgres: true });
  });
});

test("from a fresh account, an API error at member k: the deploy stops naming it, uploads nothing after k; the rerun uploads k and the rest", { timeout: 30 * 60_000 }, async () => {
  await withApi("kvbench-deploy-fail-", async (api, dir) => {
    const regions = REGIONS.slice(0, 4).map((r) => r.region);
    const names = regions.map((r) => `kvbench-${envName(r)}`);
    const k = 1;
    // Its upload refused until the fault is cleared, whichever of the two upload routes wrangler
    // takes (wrangler retries a 5xx a few times, so one refusal alone is retried away).
    const kPath = new RegExp(`/workers/scripts/${names[k]}(/versions)?$`);
    api.failOn("PUT", kPath, { times: 1000, status: 500, code: 10013 });
    api.failOn("POST", kPath, { times: 1000, status: 500, code: 10013 });
    const failed = await deploy(api, dir, { FLEET_REGIONS: regions.join(",") });
    assert.equal(failed.code, 1, failed.out);
    assert.match(failed.out, new RegExp(`deploying fleet member ${names[k]} \\(${regions[k]}\\) failed`));
    assert.match(failed.out, /An unknown error has occurred \(injected by the stand-in\)/, "wrangler's own error shown");
    // Observed at the API: the members before k uploaded, k refused (only), nothing after k.
    const up = uploadsOf(failed);
    assert.deepEqual([...new Set(up.filter((u) => u.status === 200).map((u) => u.name))], ["kvbench-report", "kvbench", ...names.slice(0, k)]);
    assert.ok(up.some((u) => u.name === names[k] && u.status === 500), "member k's upload reached the API");
    assert.deepEqual(up.filter((u) => names.slice(k + 1).includes(u.name)), [], "an upload after member k");
    assert.deepEqual([...api.state.scripts.keys()].filter((n) => names.includes(n)), names.slice(0, k));
    assert.equal(api.state.scripts.get("kvbench").secrets.get("FLEET"), undefined, "FLEET was set by a deploy that failed");
    onlyExpectedErrors(failed, [...FIRST, { route: "PUT /accounts/:a/workers/scripts/:name", status: 500, why: "the injected refusal of member k's upload" }]);
    assert.ok(failed.requests.filter((r) => r.status === 500).every((r) => kPath.test(r.path)), "a 500 on another worker");

    api.clearFaults();
    const rerun = await deploy(api, dir, { FLEET_REGIONS: regions.join(",") });
    assert.equal(rerun.code, 0, rerun.out);
    // Member k and the ones after it are first uploads now; the ones before it new versions.
    const again = uploadsOf(rerun);
    for (const [i, n] of names.entries()) {
      assert.deepEqual(again.filter((u) => u.name === n).map((u) => `${u.how} ${u.status}`), [i < k ? "version 200" : "first 200"], n);
    }
    onlyExpectedErrors(rerun, FIRST_DEPLOY_404S);
    assert.ok(rerun.requests.filter((r) => r.status === 404).every((r) => names.slice(k).some((n) => r.path.includes(`/${n}`))), "a 404 for a worker the failed run had made");
    const token = fs.readFileSync(path.join(dir, "bench-token"), "utf8").trim();
    checkMembers(api, regions, token);
  });
});

/** The uploaded worker, run locally: the built worker under Miniflare with the vars and secrets
 * its last upload carried (its stores' bindings are local ones). */
function localRunOf(stacks) {
  return async (script) => {
    if (!stacks.has(script.name)) {
      const vars = Object.fromEntries(script.bindings.filter((b) => b.type === "plain_text").map((b) => [b.name, b.text]));
      for (const [k, v] of script.secrets) vars[k] = v;
      stacks.set(script.name, startStack(vars, { host: "127.0.0.1", port: 0 }));
    }
    const mf = await stacks.get(script.name);
    return (await mf.ready).toString().replace(/\/$/, "");
  };
}

test("members, then FLEET_REGIONS=none: FLEET deleted, the members left named; the check runs at the printed workers.dev URL", { timeout: 20 * 60_000 }, async () => {
  const stacks = new Map();
  try {
    await withApi("kvbench-deploy-none-", async (api, dir) => {
      api.serveWorkers(localRunOf(stacks));
      const regions = REGIONS.slice(0, 2).map((r) => r.region);
      const two = await deploy(api, dir, { FLEET_REGIONS: regions.join(",") });
      assert.equal(two.code, 0, two.out);
      const { token } = checkMain(api, dir, two.out);
      checkMembers(api, regions, token);

      const none = await deploy(api, dir, { FLEET_REGIONS: "none", KVBENCH_DEPLOY_CHECK: "1", KVBENCH_WORKERS_DEV_VIA: api.origin, KVBENCH_MEMBER_WAIT_S: "0" });
      assert.equal(none.code, 0, none.out);
      onlyExpectedErrors(none);
      const main = api.state.scripts.get("kvbench");
      assert.equal(main.secrets.get("FLEET"), undefined, "the FLEET secret is deleted");
      assert.ok(none.requests.some((r) => r.method === "DELETE" && /\/scripts\/kvbench\/secrets\/FLEET$/.test(r.path) && r.status === 200));
      assert.match(none.out, new RegExp(`left deployed, no longer called by the probes \\(delete each with 'npx wrangler delete --name <worker>'\\): ${regions.map((r) => `kvbench-${envName(r)}`).sort().join(" ")}`));
      for (const r of regions) assert.ok(api.state.scripts.has(`kvbench-${envName(r)}`), "a member was deleted");
      assert.equal(creates(api).length, 3);
      // The hand-off: the check ran at the URL wrangler printed from the stand-in's subdomain, and
      // the front door served it from the uploaded worker, with the uploaded token.
      assert.match(none.out, /deployed: https:\/\/kvbench\.standin\.workers\.dev/);
      assert.match(none.out, /worker https:\/\/kvbench\.standin\.workers\.dev \(kvbench-worker \d/);
      assert.match(none.out, /✓ kv\s+read/, "the check's /test went through with the uploaded token");
      assert.match(none.out, /store\(s\) configured and answering; report: https:\/\/kvbench\.standin\.workers\.dev\/report/);
      const seen = api.frontDoor.map((r) => `${r.method} ${r.host} ${r.path.split("?")[0]} ${r.status}`);
      for (const want of ["GET kvbench.standin.workers.dev / 200", "GET kvbench.standin.workers.dev /test 200", "GET kvbench.standin.workers.dev /probes 200"]) assert.ok(seen.includes(want), `${want} not in ${seen}`);
      assert.ok(!none.out.includes(token), "the token was printed");
    });
  } finally {
    for (const mf of stacks.values()) await (await mf).dispose();
  }
});

test("an upgrade from a deployment at migration v3 (before FleetDirectory) takes v4", { timeout: 20 * 60_000 }, async () => {
  await withApi("kvbench-deploy-v3-", async (api, dir) => {
    // What a deploy of the v3 layout left: the worker with its three classes, at tag v3 — made
    // by wrangler itself from wrangler.toml's own migrations up to v3.
    const { experimental_readRawConfig } = await import("wrangler");
    const { rawConfig } = experimental_readRawConfig({ config: path.join(ROOT, "wrangler.toml") });
    const v3 = rawConfig.migrations.slice(0, rawConfig.migrations.findIndex((m) => m.tag === "v3") + 1);
    const classes = new Set(v3.flatMap((m) => [...(m.new_sqlite_classes ?? []), ...(m.new_classes ?? [])]));
    assert.deepEqual([...classes].sort(), ["BenchObject", "ProbeObject", "RunArchive"]);
    const old = {
      name: rawConfig.name,
      main: path.join(ROOT, "build/index.js"),
      compatibility_date: rawConfig.compatibility_date,
      compatibility_flags: rawConfig.compatibility_flags,
      workers_dev: true,
      durable_objects: { bindings: rawConfig.durable_objects.bindings.filter((b) => classes.has(b.class_name)) },
      migrations: v3,
    };
    fs.writeFileSync(path.join(dir, "v3.json"), JSON.stringify(old));
    const made = await wrangler(api, ["deploy", "-c", path.join(dir, "v3.json")]);
    assert.equal(made.status, 0, `${made.stdout}${made.stderr}`);
    assert.equal(api.state.scripts.get("kvbench").migrationTag, "v3");

    const up = await deploy(api, dir, {});
    assert.equal(up.code, 0, up.out);
    onlyExpectedErrors(up, FIRST);
    assert.deepEqual(up.requests.filter((r) => r.status === 404 && /\/workers\/(scripts|services|workers)\/kvbench(\/|$)/.test(r.path)).map((r) => r.path), [], "the v3 worker was taken for a new one");
    const main = uploadsOf(up).find((u) => u.name === "kvbench");
    assert.deepEqual(main.metadata.migrations, { old_tag: "v3", new_tag: "v4", steps: [{ new_sqlite_classes: ["FleetDirectory"] }] });
    checkMain(api, dir, up.out);
  });
});

test("the full default fleet: one placed member per region of the list", { timeout: 30 * 60_000 }, async () => {
  await withApi("kvbench-deploy-all-", async (api, dir) => {
    const given = `given-${crypto.randomBytes(8).toString("hex")}`;
    const r = await deploy(api, dir, { BENCH_TOKEN: given, FLEET_REGIONS: "" });
    assert.equal(r.code, 0, r.out);
    onlyExpectedErrors(r, FIRST);
    assert.ok(!fs.existsSync(path.join(dir, "bench-token")), "a given BENCH_TOKEN is not written down");
    assert.ok(!r.out.includes(given));
    assert.ok(REGIONS.length >= 20);
    fs.writeFileSync(path.join(dir, "bench-token"), given, { mode: 0o600 });
    const { token } = checkMain(api, dir, r.out);
    checkMembers(api, REGIONS.map((x) => x.region), token);
  });
});

/** wrangler ARGS against `api`, no terminal (async: the stand-in runs in this process), `input` on
 * its stdin; resolves `{ status, stdout, stderr }`. */
function wrangler(api, args, { input } = {}) {
  return new Promise((resolve) => {
    const child = spawn(path.join(ROOT, "node_modules/.bin/wrangler"), args, { env: { ...process.env, ...api.env }, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 300_000);
    child.on("close", (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
    child.stdin.end(input ?? "");
  });
}

// The stand-in refuses what Cloudflare refuses, driven by the real client where it sends the
// request (wrangler refuses two bindings of one name itself, so that upload is sent by hand).
const TINY = { name: "tiny", main: "index.js", compatibility_date: "2026-11-17", workers_dev: true };
function tinyDeploy(api, dir, config, args = []) {
  fs.writeFileSync(path.join(dir, "index.js"), 'export default { fetch() { return new Response("hi") } }\n');
  fs.writeFileSync(path.join(dir, "wrangler.json"), JSON.stringify({ ...TINY, ...config }));
  return wrangler(api, ["deploy", "-c", path.join(dir, "wrangler.json"), ...args]);
}
async function rawUpload(api, name, metadata) {
  const form = new FormData();
  form.set("metadata", JSON.stringify({ main_module: "index.js", compatibility_date: "2026-11-17", ...metadata }));
  form.set("index.js", new File(['export default { fetch() { return new Response("hi") } }'], "index.js", { type: "application/javascript+module" }));
  const res = await fetch(`${api.url}/accounts/${api.accountId}/workers/scripts/${name}`, { method: "PUT", headers: { authorization: `Bearer ${api.token}` }, body: form });
  return { status: res.status, body: await res.json() };
}

test("the stand-in refuses a placement region outside Cloudflare's list, a future compatibility date, two bindings of one name; it honours keep_bindings", { timeout: 5 * 60_000 }, async () => {
  // The project's fleet list is a subset of Cloudflare's published one.
  for (const r of REGIONS) assert.ok(PLACEMENT_REGIONS.has(r.region), `${r.region} is not in tests/e2e/cf-placement-regions.json`);
  await withApi("kvbench-standin-", async (api, dir) => {
    const region = await tinyDeploy(api, dir, { placement: { region: "aws:us-east-9" } });
    assert.notEqual(region.status, 0);
    assert.match(region.stdout + region.stderr, /placement region 'aws:us-east-9' is not a supported region/);
    const placed = await tinyDeploy(api, dir, { placement: { region: "azure:southafricanorth" } });
    assert.equal(placed.status, 0, placed.stdout + placed.stderr);
    assert.deepEqual(api.state.scripts.get("tiny").placement, { mode: "targeted", region: "azure:southafricanorth" });

    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    const future = await tinyDeploy(api, dir, { compatibility_date: tomorrow });
    assert.notEqual(future.status, 0, "wrangler 4.164 sends a future date; Cloudflare refuses it");
    assert.match(future.stdout + future.stderr, new RegExp(`Invalid compatibility_date ${tomorrow}`));

    const dup = await rawUpload(api, "tiny-dup", { bindings: [{ type: "plain_text", name: "A", text: "1" }, { type: "plain_text", name: "A", text: "2" }] });
    assert.equal(dup.status, 400);
    assert.match(dup.body.errors[0].message, /Binding name 'A' is used more than once/);

    // keep_bindings: wrangler deploy keeps secrets (["secret_text", "secret_key"]); a var the new
    // upload does not set goes; an upload without keep_bindings drops the secret too.
    assert.equal((await tinyDeploy(api, dir, { vars: { A: "1" } })).status, 0);
    const put = await wrangler(api, ["secret", "put", "S", "-c", path.join(dir, "wrangler.json")], { input: "kept" });
    assert.equal(put.status, 0, put.stdout + put.stderr);
    const again = await tinyDeploy(api, dir, { vars: { B: "2" } });
    assert.equal(again.status, 0, again.stdout + again.stderr);
    const tiny = api.state.scripts.get("tiny");
    assert.deepEqual(api.requests.filter((r) => r.metadata && r.path.endsWith("/tiny/versions")).at(-1).metadata.keep_bindings, ["secret_text", "secret_key"]);
    assert.equal(tiny.secrets.get("S"), "kept");
    assert.deepEqual(tiny.bindings.filter((b) => b.type === "plain_text").map((b) => b.name), ["B"]);
    const bare = await rawUpload(api, "tiny", { bindings: [] });
    assert.equal(bare.status, 200);
    assert.equal(api.state.scripts.get("tiny").secrets.size, 0, "no keep_bindings: the secret goes");
  });
});
