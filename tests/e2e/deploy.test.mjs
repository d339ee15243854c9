// The deploy path, offline: wrangler.toml has no placeholder ids (scripts/resources.mjs finds or
// creates the KV namespace, D1 database and R2 bucket; tests/e2e/deploy-api.test.mjs runs the
// whole deploy against the Cloudflare API stand-in), and the post-deploy check
// (scripts/check-deploy.mjs, what `npm run deploy` runs last) against the local stack: stores
// without their secrets are reported and nothing fails; a configured store that fails fails the
// check by name; a worker with a BENCH_TOKEN is checked with the token from the environment, which
// never appears in the output; one with neither a token nor BENCH_OPEN fails it (its /test is
// closed). `wrangler deploy --dry-run` of both configs runs in scripts/test.sh.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { ROOT, startRedis, startStack, stop } from "./procs.mjs";

let redis;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await stop(redis?.proc);
});

function check(url, env = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, "scripts/check-deploy.mjs"), url], {
      env: { ...process.env, BENCH_TOKEN: "", ...env },
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.on("close", (code) => resolve({ code, out }));
  });
}

async function withStack(vars, fn) {
  const mf = await startStack(vars, { host: "127.0.0.1", port: 0 });
  try {
    return await fn((await mf.ready).toString().replace(/\/$/, ""));
  } finally {
    await mf.dispose();
  }
}

test("wrangler.toml has no placeholder ids: the deploy finds or creates the resources", () => {
  for (const file of ["wrangler.toml", "crates/report-worker/wrangler.toml"]) {
    const toml = fs.readFileSync(path.join(ROOT, file), "utf8");
    assert.doesNotMatch(toml, /0{8}/, `${file}: a placeholder id`);
    assert.doesNotMatch(toml, /^\s*(id|database_id)\s*=/m, `${file}: a resource id to fill in`);
  }
});

test("the check reports stores without secrets and passes", async () => {
  await withStack({ REDIS_URL: `redis://127.0.0.1:${redis.port}` }, async (url) => {
    const { code, out } = await check(url);
    assert.equal(code, 0, out);
    assert.match(out, /– upstash\s+not configured: .*UPSTASH_REDIS_REST_URL/);
    assert.match(out, /– denokv\s+not configured: .*DENO_KV_URL/);
    for (const s of ["kv", "do", "d1", "r2", "redis"]) assert.match(out, new RegExp(`✓ ${s}\\s+read \\d`), s);
    assert.match(out, /11 hints, 0 fleet members, every 300 s/);
    assert.match(out, /store\(s\) configured and answering; report: http:\/\/127\.0\.0\.1:\d+\/report/);
  });
});

test("a configured store that fails fails the check, by name", async () => {
  await withStack({ REDIS_URL: "redis://127.0.0.1:1", STORES: "kv,redis" }, async (url) => {
    const { code, out } = await check(url);
    assert.equal(code, 1, out);
    assert.match(out, /✗ redis\s+connect/);
    assert.match(out, /1 problem\(s\)/);
  });
});

test("a worker with BENCH_TOKEN: /test is skipped without it, checked with it, the token never printed", async () => {
  const TOKEN = "deploy-check-token-4f1e";
  await withStack({ BENCH_TOKEN: TOKEN, STORES: "kv" }, async (url) => {
    const without = await check(url);
    assert.equal(without.code, 0, without.out);
    assert.match(without.out, /skipped: the worker has a BENCH_TOKEN/);
    const withToken = await check(url, { BENCH_TOKEN: TOKEN });
    assert.equal(withToken.code, 0, withToken.out);
    assert.match(withToken.out, /✓ kv\s+read/);
    assert.ok(!withToken.out.includes(TOKEN));
  });
});

test("a worker without BENCH_TOKEN or BENCH_OPEN fails the check: /test is closed, and the check says why", async () => {
  // What a plain `wrangler deploy` without a token leaves (the other stacks here are open, as
  // npm run dev runs them).
  await withStack({ STORES: "kv", BENCH_OPEN: undefined }, async (url) => {
    const { code, out } = await check(url);
    assert.equal(code, 1, out);
    assert.match(out, /\/test answered 403: .*so \/test is closed: every \/test writes to this deployment's stores.*wrangler secret put BENCH_TOKEN/);
  });
});

test("a 500 from any route the check calls fails it, naming the route", async () => {
  // A worker whose / and /test answer, and one other route answers 500 (a broken deploy that
  // printing alone would let pass).
  const INDEX = JSON.stringify({ name: "kvbench", version: "0", stores: { kv: { configured: true } }, auth: {} });
  const TEST = JSON.stringify({ colo: "LOC", stores: { kv: { read_ms: 1, hit: true } } });
  const PROBES = JSON.stringify({ every_s: 300, probes: [] });
  for (const broken of ["/probes", "/test", "/"]) {
    const worker = await fakeMember((n, req) => {
      const route = req.url.split("?")[0];
      if (route === broken) return { status: 500, headers: { "content-type": "text/plain" }, body: `internal error on ${route}` };
      return { status: 200, headers: {}, body: route === "/" ? INDEX : route === "/test" ? TEST : PROBES };
    });
    try {
      const { code, out } = await check(worker.url, { BENCH_TOKEN: "check-500-token" });
      assert.equal(code, 1, `${broken}: ${out}`);
      assert.match(out, new RegExp(`${broken === "/" ? `GET ${worker.url}/` : `(GET )?\\${broken}`} answered 500`), broken);
    } finally {
      worker.server.close();
    }
  }
});

test("a worker that is not there fails the check", async () => {
  const { code, out } = await check("http://127.0.0.1:1");
  assert.equal(code, 1, out);
  assert.match(out, /GET http:\/\/127\.0\.0\.1:1\/ answered 0/);
});

test("the fleet's config: a placed member per default region, deployable (dry run), only after the main worker's ids exist", { timeout: 240_000 }, async () => {
  const { spawnSync } = await import("node:child_process");
  const os = await import("node:os");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench fleet "));
  const fleet = (from, regions = "all") =>
    spawnSync(process.execPath, [path.join(ROOT, "scripts/fleet.mjs"), "--from", from, "--out", path.join(dir, "out/wrangler.jsonc"), "--regions", regions], { encoding: "utf8" });
  // Before the first deploy (no ids): refused, naming what is missing.
  const before = fleet(path.join(ROOT, "wrangler.toml"));
  assert.notEqual(before.status, 0);
  assert.match(before.stderr, /BENCH_KV has no id in wrangler\.toml: find or create the resources first \(scripts\/resources\.mjs/);
  // With the ids (as scripts/resources.mjs writes them): one environment per region.
  const main = fs.readFileSync(path.join(ROOT, "wrangler.toml"), "utf8")
    .replace(/^binding = "BENCH_KV"$/m, 'binding = "BENCH_KV"\nid = "0123456789abcdef0123456789abcdef"')
    .replace(/^migrations_dir = "migrations"$/m, 'migrations_dir = "migrations"\ndatabase_id = "11111111-2222-3333-4444-555555555555"');
  // And the Hyperdrive binding scripts/resources.mjs adds when POSTGRES_URL is given.
  const hyperdrive = '\n[[hyperdrive]]\nbinding = "BENCH_HYPERDRIVE"\nid = "fedcba9876543210fedcba9876543210"\n';
  fs.writeFileSync(path.join(dir, "wrangler.toml"), main + hyperdrive);
  const r = fleet(path.join(dir, "wrangler.toml"));
  assert.equal(r.status, 0, r.stderr);
  const members = r.stdout.trim().split("\n").map((l) => l.split(" "));
  const regions = JSON.parse(fs.readFileSync(path.join(ROOT, "crates/core/fleet-regions.json"), "utf8")).regions;
  assert.equal(members.length, regions.length);
  assert.ok(members.length >= 20);
  const config = JSON.parse(fs.readFileSync(path.join(dir, "out/wrangler.jsonc"), "utf8").replace(/^\/\/.*$/gm, ""));
  for (const [env, region, name] of members) {
    const e = config.env[env];
    assert.deepEqual(e.placement, { region }, env);
    assert.equal(e.name, name);
    assert.equal(e.vars.FLEET_REGION, region);
    assert.equal(e.kv_namespaces[0].id, "0123456789abcdef0123456789abcdef");
    assert.deepEqual(e.hyperdrive, [{ binding: "BENCH_HYPERDRIVE", id: "fedcba9876543210fedcba9876543210" }], env);
    assert.deepEqual(e.durable_objects.bindings, [
      { name: "BENCH_DO", class_name: "BenchObject", script_name: "kvbench" },
      { name: "BENCH_RUNS", class_name: "RunArchive", script_name: "kvbench" },
    ]);
    assert.deepEqual(e.triggers, { crons: [] }, "members run no cron of their own");
  }
  assert.deepEqual(config.compatibility_flags, ["global_fetch_strictly_public"], "the members run with the main worker's flags");
  // Fewer, spread over the continents; an unknown region is refused.
  const five = fleet(path.join(dir, "wrangler.toml"), "5");
  assert.equal(five.status, 0, five.stderr);
  const continents = new Set(five.stdout.trim().split("\n").map((l) => regions.find((x) => x.region === l.split(" ")[1]).continent));
  assert.equal(continents.size, 5);
  const typo = fleet(path.join(dir, "wrangler.toml"), "aws:us-east-9");
  assert.notEqual(typo.status, 0);
  assert.match(typo.stderr, /aws:us-east-9 is not in crates\/core\/fleet-regions\.json/);
  // wrangler accepts the placed members as they would be deployed (first and last of the list).
  fleet(path.join(dir, "wrangler.toml"));
  for (const [env] of [members[0], members.at(-1)]) {
    const dry = spawnSync(path.join(ROOT, "node_modules/.bin/wrangler"), ["deploy", "--dry-run", "-c", path.join(dir, "out/wrangler.jsonc"), "--env", env, "--outdir", path.join(dir, "dry")], {
      encoding: "utf8",
      env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
      timeout: 120_000,
    });
    assert.equal(dry.status, 0, `${env}: ${dry.stdout}${dry.stderr}`);
    assert.match(dry.stdout, /env\.BENCH_DO \(BenchObject, defined in kvbench\)/);
    assert.match(dry.stdout, /env\.BENCH_HYPERDRIVE/, "the member's hyperdrive binding");
    assert.doesNotMatch(dry.stdout + dry.stderr, /WARNING/, env);
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A stand-in member on loopback: `answer(n)` gives the nth call's { status, headers, body }. */
async function fakeMember(answer) {
  const http = await import("node:http");
  let n = 0;
  const server = http.createServer((req, res) => {
    const a = answer(++n, req);
    res.writeHead(a.status, { "content-type": "application/json", ...a.headers });
    res.end(a.body);
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  return { server, url: `http://127.0.0.1:${server.address().port}`, calls: () => n };
}

const ANSWER = JSON.stringify({ key: "1", colo: "IAD", isolate_requests: 2, stores: { kv: {} } });
const answered = (placement) => ({
  status: 200,
  headers: { "server-timing": "kvbench;dur=2.5", ...(placement ? { "cf-placement": placement } : {}) },
  body: ANSWER,
});

test("the check calls each member through the worker and names every one that is unreachable, unplaced or placed elsewhere", { timeout: 120_000 }, async () => {
  const members = {
    "aws:us-east-1": await fakeMember(() => answered("remote-IAD")),
    // What Cloudflare answers a worker's fetch to a sibling on the same zone without the flag.
    "aws:eu-central-1": await fakeMember(() => ({ status: 404, headers: { "content-type": "text/plain" }, body: "error code: 1042" })),
    "aws:ap-northeast-1": await fakeMember(() => answered(null)),
    "aws:sa-east-1": await fakeMember(() => answered("remote-IAD")),
    "aws:eu-west-2": await fakeMember(() => answered("local-LHR")),
    // Placement applies a moment after the deploy: unplaced twice, then in its metro.
    "gcp:europe-west9": await fakeMember((n) => answered(n <= 2 ? "local-CDG" : "remote-CDG")),
    // A member of another build: an answer without its handler time.
    "aws:us-west-2": await fakeMember(() => ({ ...answered("remote-PDX"), headers: { "cf-placement": "remote-PDX" } })),
  };
  const FLEET = [...Object.entries(members).map(([l, m]) => `${l}=${m.url}`), "gone=http://127.0.0.1:1"].join(",");
  try {
    await withStack({ STORES: "kv", FLEET, BENCH_OPEN: "true", PROBE_COLO_URL: "none" }, async (url) => {
      const { code, out } = await check(url, { KVBENCH_MEMBER_WAIT_S: "8", KVBENCH_MEMBER_LOOK_S: "1" });
      assert.equal(code, 1, out);
      assert.match(out, /✓ aws:us-east-1: remote-IAD \(IAD\), handler 2\.5 ms, call [\d.]+ ms/);
      assert.match(out, /✓ gcp:europe-west9: remote-CDG/, "a member placed a moment late passes once it is");
      assert.match(out, /look 1: 1 of 8 ready/);
      assert.match(out, /member aws:eu-central-1: answered 404 with Cloudflare's error 1042 .*global_fetch_strictly_public/);
      assert.match(out, /member aws:ap-northeast-1: unplaced: the answer has no cf-placement header/);
      assert.match(out, /member aws:sa-east-1: placed elsewhere: cf-placement remote-IAD where aws:sa-east-1 expects GRU \(São Paulo, Brazil\)/);
      assert.match(out, /member aws:eu-west-2: unplaced: cf-placement local-LHR/);
      assert.match(out, /member aws:us-west-2: malformed: its \/test answer has no Server-Timing/);
      assert.match(out, /member gone: unreachable \(connect\)/);
      assert.match(out, /6 problem\(s\)/);
      // Bounded: only the members not ready were asked again, about once a second for 8 s.
      assert.ok(members["aws:us-east-1"].calls() === 1, `a ready member was asked again: ${members["aws:us-east-1"].calls()}`);
      assert.ok(members["aws:sa-east-1"].calls() <= 10, `asked ${members["aws:sa-east-1"].calls()} times`);
      // A member that is not in FLEET is a 400 naming the parameter.
      const res = await fetch(`${url}/probes/check?members=nope`, { method: "POST" });
      assert.equal(res.status, 400);
      assert.equal((await res.json()).error.parameter, "members");
    });
    // Only members that answer from their region: the check passes.
    const good = `aws:us-east-1=${members["aws:us-east-1"].url}`;
    await withStack({ STORES: "kv", FLEET: good, BENCH_OPEN: "true", PROBE_COLO_URL: "none" }, async (url) => {
      const { code, out } = await check(url, { KVBENCH_MEMBER_WAIT_S: "5", KVBENCH_MEMBER_LOOK_S: "1" });
      assert.equal(code, 0, out);
      assert.match(out, /✓ aws:us-east-1: remote-IAD/);
    });
  } finally {
    for (const m of Object.values(members)) m.server.close();
  }
});
