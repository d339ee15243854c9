// The built worker (build/index.js + wasm) under Miniflare, with Miniflare's local KV and a scripted
// Upstash REST fixture on loopback: it can answer what a real server never does (non-JSON 200s,
// echoed tokens, a hang), and records the exact commands. The same flows against the real stack
// (gateway + redis-server, injected faults) are in stack.test.mjs. Run `npm run build` first
// (scripts/test.sh does).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startFixture } from "./upstash-fixture.mjs";
import { startWorker, assertMs } from "./procs.mjs";

const TOKEN = "e2e-upstash-token-9d7c1f";
const BENCH_TOKEN = "e2e-bench-token-3a8e55";
const bodies = [];

// Deno KV is measured in denokv.test.mjs; these tests keep the two stores they were written for.
const worker = (bindings) => startWorker({ STORES: "kv,upstash", ...bindings });

async function get(mf, url, init) {
  const res = await mf.dispatchFetch(`http://localhost${url}`, init);
  const text = await res.text();
  bodies.push(text);
  return { res, text, json: res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : null };
}

let fixture;
let mf;
before(async () => {
  fixture = await startFixture(TOKEN);
  mf = await worker({ UPSTASH_REDIS_REST_URL: fixture.url, UPSTASH_REDIS_REST_TOKEN: TOKEN });
});
after(async () => {
  await mf?.dispose();
  await fixture?.close();
  for (const body of bodies) {
    assert.ok(!body.includes(TOKEN), `Upstash token leaked: ${body}`);
    assert.ok(!body.includes(BENCH_TOKEN), `bench token leaked: ${body}`);
  }
});

test("GET /healthz and GET / describe the worker without secrets", async () => {
  const health = await get(mf, "/healthz");
  assert.equal(health.res.status, 200);
  assert.equal(health.text, "ok");
  const index = await get(mf, "/");
  assert.equal(index.res.status, 200);
  assert.equal(index.json.stores.kv.configured, true);
  assert.equal(index.json.stores.upstash.configured, true);
  assert.equal(index.json.defaults.ttl, 60);
  // Every route is a request in flight of the isolate (a /test's `concurrent` counts it): GET /
  // counts itself, alone.
  assert.equal(index.json.isolate.in_flight, 1, JSON.stringify(index.json.isolate));
});

test("a miss writes the same value to both stores with a 60 s TTL; the next call hits", async () => {
  fixture.state.fault = null;
  const first = await get(mf, "/test?key=e2e-1");
  assert.equal(first.res.status, 200);
  assert.equal(first.res.headers.get("cache-control"), "no-store");
  const a = first.json;
  assert.equal(a.key, "e2e-1");
  // Miniflare supplies a placeholder `request.cf` (colo "DFW"); deployed, it is the real colo.
  assert.match(a.colo, /^[A-Z]{3}$/);
  assert.deepEqual([...a.order].sort(), ["kv", "upstash"]);
  for (const name of ["kv", "upstash"]) {
    const s = a.stores[name];
    assert.equal(s.error, null, `${name}: ${JSON.stringify(s.error)}`);
    assert.equal(s.hit, false);
    assertMs(s.read_ms, "read_ms");
    assertMs(s.write_ms, "write_ms");
    assert.ok(s.value_bytes >= 4096 && s.value_bytes <= 65536, `${s.value_bytes}`);
  }
  assert.equal(a.stores.kv.value_bytes, a.stores.upstash.value_bytes);
  assert.equal(a.kvLatency, a.stores.kv.read_ms);
  assert.equal(a.redisLatency, a.stores.upstash.read_ms);

  const kv = await mf.getKVNamespace("BENCH_KV");
  const kvValue = await kv.get("e2e-1", "arrayBuffer");
  const redis = fixture.state.data.get("e2e-1");
  assert.equal(kvValue.byteLength, a.stores.kv.value_bytes);
  assert.equal(Buffer.from(kvValue).toString("latin1"), redis.value, "both stores got the same bytes");
  assert.match(redis.value, /^[A-Za-z0-9_-]+$/);
  assert.equal(redis.ttl, 60, "Upstash TTL is in seconds");
  const listed = (await kv.list({ prefix: "e2e-1" })).keys[0];
  const remaining = listed.expiration - Date.now() / 1000;
  assert.ok(remaining > 50 && remaining <= 61, `KV expires in ${remaining} s`);

  const second = (await get(mf, "/test?key=e2e-1")).json;
  assert.ok(second.isolate_requests > a.isolate_requests);
  for (const name of ["kv", "upstash"]) {
    assert.equal(second.stores[name].hit, true, name);
    assert.equal(second.stores[name].write_ms, null);
    assert.equal(second.stores[name].value_bytes, a.stores[name].value_bytes);
  }
});

test("ttl, sizes and a fixed order are honoured", async () => {
  fixture.state.fault = null;
  const { json } = await get(mf, "/test?key=e2e-2&ttl=120&min_bytes=70000&max_bytes=70000&order=upstash,kv");
  assert.deepEqual(json.order, ["upstash", "kv"]);
  assert.equal(json.stores.kv.value_bytes, 70000);
  assert.equal(json.stores.upstash.value_bytes, 70000);
  assert.equal(fixture.state.data.get("e2e-2").ttl, 120);
  assert.equal(fixture.state.data.get("e2e-2").value.length, 70000);
});

test("a bad parameter answers 400 naming it and touches no store", async () => {
  const before = fixture.state.commands.length;
  for (const [query, parameter] of [
    ["ttl=10", "ttl"],
    ["keys=0", "keys"],
    ["min_bytes=10&max_bytes=5", "min_bytes"],
    ["stores=kv,dynamo", "stores"],
    ["nope=1", "nope"],
  ]) {
    const { res, json } = await get(mf, `/test?key=e2e-bad&${query}`);
    assert.equal(res.status, 400, query);
    assert.equal(json.error.parameter, parameter, query);
  }
  assert.equal(fixture.state.commands.length, before);
  const kv = await mf.getKVNamespace("BENCH_KV");
  assert.equal(await kv.get("e2e-bad"), null);
});

test("Upstash failures are data: KV is still measured and the answer is 200", async () => {
  const cases = [
    [{ status: 500, body: "<html>boom</html>" }, "http"],
    [{ status: 401, body: { error: "Unauthorized" } }, "auth"],
    [{ status: 429, body: { error: "ERR max requests limit exceeded" } }, "rate_limited"],
    [{ status: 200, body: "not json" }, "decode"],
    [{ status: 400, body: { error: `ERR echo Bearer ${TOKEN}` } }, "http"],
  ];
  for (const [fault, kind] of cases) {
    fixture.state.fault = fault;
    const { res, json } = await get(mf, "/test?key=e2e-fault&order=upstash,kv");
    assert.equal(res.status, 200);
    assert.equal(json.stores.upstash.error.kind, kind, JSON.stringify(fault));
    assert.equal(json.stores.upstash.hit, null);
    assert.equal(json.stores.kv.error, null);
  }
  fixture.state.fault = null;
});

test("a hung Upstash times out after timeout_ms and the fetch is abandoned", async () => {
  fixture.state.fault = { hang: true };
  const { res, json } = await get(mf, "/test?key=e2e-hang&timeout_ms=300&order=upstash,kv");
  fixture.state.fault = null;
  assert.equal(res.status, 200);
  assert.equal(json.stores.upstash.error.kind, "timeout");
  assert.ok(json.stores.upstash.read_ms >= 290, `${json.stores.upstash.read_ms}`);
  assert.equal(json.stores.kv.error, null);
});

test("not configured stores and a wrong Upstash token are reported per store", async () => {
  const bare = await worker({});
  try {
    const { json } = await get(bare, "/test?key=e2e-bare");
    assert.equal(json.stores.upstash.error.kind, "not_configured");
    assert.equal(json.stores.kv.error, null);
  } finally {
    await bare.dispose();
  }
  const wrong = await worker({ UPSTASH_REDIS_REST_URL: fixture.url, UPSTASH_REDIS_REST_TOKEN: "wrong-token-123" });
  try {
    const { json } = await get(wrong, "/test?key=e2e-wrong");
    assert.equal(json.stores.upstash.error.kind, "auth");
  } finally {
    await wrong.dispose();
  }
});

test("BENCH_TOKEN guards /test", async () => {
  const guarded = await worker({ UPSTASH_REDIS_REST_URL: fixture.url, UPSTASH_REDIS_REST_TOKEN: TOKEN, BENCH_TOKEN });
  try {
    const none = await get(guarded, "/test?key=e2e-guard");
    assert.equal(none.res.status, 401);
    assert.equal(none.json.error.parameter, "Authorization");
    const wrong = await get(guarded, "/test?key=e2e-guard", { headers: { Authorization: "Bearer nope" } });
    assert.equal(wrong.res.status, 401);
    const kv = await guarded.getKVNamespace("BENCH_KV");
    assert.equal(await kv.get("e2e-guard"), null, "a refused call writes nothing");
    const ok = await get(guarded, "/test?key=e2e-guard", { headers: { Authorization: `Bearer ${BENCH_TOKEN}` } });
    assert.equal(ok.res.status, 200);
  } finally {
    await guarded.dispose();
  }
  // With a token, BENCH_OPEN opens nothing: the token is the rule.
  const both = await worker({ STORES: "kv", BENCH_TOKEN, BENCH_OPEN: "true" });
  try {
    const none = await get(both, "/test?key=e2e-both");
    assert.equal(none.res.status, 401);
    assert.equal(none.res.headers.get("www-authenticate"), 'Bearer realm="kvbench"');
    assert.equal(await (await both.getKVNamespace("BENCH_KV")).get("e2e-both"), null);
    const ok = await get(both, "/test?key=e2e-both", { headers: { Authorization: `Bearer ${BENCH_TOKEN}` } });
    assert.equal(ok.res.status, 200);
  } finally {
    await both.dispose();
  }
});

test("closed by default: without BENCH_TOKEN, /test and the probes' control answer 403 naming BENCH_TOKEN and touch no store, unless BENCH_OPEN is true", async () => {
  // `BENCH_OPEN: undefined`: a worker deployed by hand without a token (procs.mjs opens a test
  // worker otherwise).
  const closed = await worker({ STORES: "kv,do,d1,r2", PROBE_COLO_URL: "none", BENCH_OPEN: undefined });
  const open = await worker({ STORES: "kv,do,d1,r2", PROBE_COLO_URL: "none", BENCH_OPEN: "true" });
  try {
    const refused = [
      ["GET", "/test"],
      ["GET", "/test?key=e2e-closed"],
      ["HEAD", "/test?key=e2e-closed"],
      ["GET", "/test?key=e2e-closed&run=someone-elses"],
      ["GET", "/test?key=e2e-closed&max_bytes=1048576&min_bytes=1048576"],
      ["POST", "/probes/start"],
      ["POST", "/probes/stop"],
    ];
    for (const [method, p] of refused) {
      const res = await closed.dispatchFetch(`http://localhost${p}`, { method });
      const text = await res.text();
      assert.equal(res.status, 403, `${method} ${p}: ${text}`);
      if (method === "HEAD") continue;
      const json = JSON.parse(text);
      assert.equal(json.error.parameter, "BENCH_TOKEN");
      assert.match(json.error.message, /BENCH_OPEN/);
      if (p.startsWith("/test")) {
        assert.match(json.error.message, /writes to this deployment's stores/, "it says why");
        assert.match(json.error.message, /wrangler secret put BENCH_TOKEN/, "and how to set one");
      }
    }
    const header = await closed.dispatchFetch("http://localhost/test?key=e2e-closed", { headers: { "Kvbench-Run": "r1" } });
    assert.equal(header.status, 403, "the header form of a run is closed too");
    const bearer = await closed.dispatchFetch("http://localhost/test?key=e2e-closed", { headers: { Authorization: "Bearer guess" } });
    assert.equal(bearer.status, 403, "no bearer opens a worker that has no token");
    // No store was touched: KV, D1 and R2 are empty, and no Durable Object answered.
    assert.deepEqual((await (await closed.getKVNamespace("BENCH_KV")).list()).keys, []);
    const d1 = await closed.getD1Database("BENCH_D1");
    assert.equal((await d1.prepare("SELECT COUNT(*) AS n FROM kvbench").first()).n, 0);
    assert.deepEqual((await (await closed.getR2Bucket("BENCH_R2")).list()).objects, []);
    // GET / says what a missing token means.
    const index = await (await closed.dispatchFetch("http://localhost/")).json();
    assert.equal(index.auth.bearer_token_required, false);
    assert.equal(index.auth.open, false);
    assert.match(index.auth.without_token, /\/test, POST \/probes\/start, \/probes\/stop and \/probes\/check answer 403 naming BENCH_TOKEN \(closed\) unless the var BENCH_OPEN = "true"/);
    assert.equal((await (await open.dispatchFetch("http://localhost/")).json()).auth.open, true, "GET / says BENCH_OPEN opened it");
    // The read routes stay readable without a token (they keep nothing new).
    assert.equal((await closed.dispatchFetch("http://localhost/probes")).status, 200);
    // BENCH_OPEN = "true" (what npm run dev sets) allows all of it.
    const measured = await open.dispatchFetch("http://localhost/test?key=e2e-open&run=r1");
    assert.equal(measured.status, 200, await measured.text());
    assert.notEqual(await (await open.getKVNamespace("BENCH_KV")).get("e2e-open"), null, "an open /test writes");
    const stopped = await open.dispatchFetch("http://localhost/probes/stop", { method: "POST" });
    assert.equal(stopped.status, 200, await stopped.text());
  } finally {
    await closed.dispose();
    await open.dispose();
  }
});

test("a start projected over PROBE_BUDGET_USD is refused with its figure; GET /probes shows the projection", async () => {
  const w = await worker({ STORES: "kv", PROBE_COLO_URL: "none", BENCH_OPEN: "true", PROBE_HINTS: "weur,enam", PROBE_BUDGET_USD: "5" });
  try {
    // Two hints every second: 2 x 2,592,000 x 2 answers x $0.00005 (no answer measured yet).
    const res = await w.dispatchFetch("http://localhost/probes/start?every=1", { method: "POST" });
    const json = await res.json();
    assert.equal(res.status, 400, JSON.stringify(json));
    assert.equal(json.error.parameter, "every");
    assert.match(json.error.message, /\$518\.40 a month/);
    assert.match(json.error.message, /PROBE_BUDGET_USD = \$5/);
    const list = await (await w.dispatchFetch("http://localhost/probes")).json();
    for (const p of list.probes) assert.notEqual(p.every_s, 1, "nothing was started");
    assert.equal(list.budget.budget_usd, 5);
    assert.equal(list.budget.answers_per_month, 0, "nothing runs");
    assert.equal(list.running.probes, 0);
    const slow = await w.dispatchFetch("http://localhost/probes/start?every=1h", { method: "POST" });
    assert.equal(slow.status, 200, await slow.text());
    // What runs: two hints every hour, 2 x 720 wakes x 2 answers, $0.14 at the ceiling.
    const after = await (await w.dispatchFetch("http://localhost/probes")).json();
    assert.deepEqual([after.budget.answers_per_month, after.budget.monthly_usd, after.budget.per_answer_from], [2880, 0.14, "ceiling"]);
    assert.deepEqual([after.running.probes, after.running.wakes_per_s], [2, 2 / 3600]);
    assert.equal(after.every_s, 300, "the vars' interval, apart from what runs");
    assert.equal((await w.dispatchFetch("http://localhost/probes/stop", { method: "POST" })).status, 200);
  } finally {
    await w.dispose();
  }
});

test("the budget counts what already runs: starts one at a time are refused once together they pass it, and the cron arms nothing over it", async () => {
  const w = await worker({ STORES: "kv", PROBE_COLO_URL: "none", BENCH_OPEN: "true", PROBE_HINTS: "weur,enam", PROBE_BUDGET_USD: "5" });
  const start = async (q) => {
    const res = await w.dispatchFetch(`http://localhost/probes/start?${q}`, { method: "POST" });
    return { status: res.status, json: await res.json() };
  };
  try {
    // One hint every minute: 43,200 wakes x 2 answers x $0.00005 = $4.32, within $5.
    const first = await start("hints=weur&every=60");
    assert.equal(first.status, 200, JSON.stringify(first.json));
    // A second one alone would fit too, but not beside the first: refused, saying so.
    const second = await start("hints=enam&every=60");
    assert.equal(second.status, 400, JSON.stringify(second.json));
    assert.equal(second.json.error.parameter, "every");
    assert.match(second.json.error.message, /2 would run after this start: 1 started at every=60 s and 1 already running, about \$8\.64 a month/);
    let list = await (await w.dispatchFetch("http://localhost/probes")).json();
    assert.deepEqual(list.probes.filter((p) => p.running).map((p) => p.label), ["weur"], "enam was not started");
    // The cron's tick would arm enam at the vars' 300 s beside weur's 60 s: $5.18, over $5.
    assert.equal(list.cron.arms, false, JSON.stringify(list.cron));
    assert.match(list.cron.why, /2 would run after this tick/);
    // Re-starting the running one at a longer interval replaces it, never counts it twice.
    assert.equal((await start("hints=weur&every=3600")).status, 200);
    list = await (await w.dispatchFetch("http://localhost/probes")).json();
    assert.equal(list.cron.arms, true, JSON.stringify(list.cron));
    assert.equal(list.cron.to_arm, 1, "enam, never started, is what the tick would arm");
    assert.equal((await w.dispatchFetch("http://localhost/probes/stop", { method: "POST" })).status, 200);
    // Everything stopped: the tick arms nothing, and checks nothing.
    list = await (await w.dispatchFetch("http://localhost/probes")).json();
    assert.deepEqual(list.cron, { arms: true, to_arm: 0 });
  } finally {
    await w.dispose();
  }
});

test("binary values come back byte for byte: the GET asks for base64 and value_bytes is the stored length", async () => {
  fixture.state.fault = null;
  // 1,000 bytes of 0xFF, written by another client: not UTF-8, so without base64 they would
  // arrive as 1,000 U+FFFD (3,000 bytes).
  fixture.state.data.set("e2e-binary", { value: Buffer.alloc(1000, 0xff), ttl: 60 });
  const { res, json } = await get(mf, "/test?key=e2e-binary&stores=upstash");
  assert.equal(res.status, 200);
  assert.equal(json.stores.upstash.error, null, JSON.stringify(json.stores.upstash));
  assert.equal(json.stores.upstash.hit, true);
  assert.equal(json.stores.upstash.value_bytes, 1000);
  assert.equal(fixture.state.gets.at(-1).base64, true, "GET sent Upstash-Encoding: base64");
});

test("a key that does not percent-decode to UTF-8 is a 400 naming key, never a lossy key", async () => {
  const before = fixture.state.commands.length;
  for (const raw of ["%FF%FE", "%C0%AF", "%ED%A0%80"]) {
    const { res, json } = await get(mf, `/test?key=${raw}`);
    assert.equal(res.status, 400, raw);
    assert.equal(json.error.parameter, "key", raw);
  }
  assert.equal(fixture.state.commands.length, before, "nothing reached a store");
  const ok = await get(mf, "/test?key=%E2%82%AC&stores=upstash");
  assert.equal(ok.json.key, "€");
});

test("other methods get 405 with Allow; HEAD answers like GET without a body", async () => {
  for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
    const { res, json } = await get(mf, "/test", { method });
    assert.equal(res.status, 405, method);
    assert.equal(res.headers.get("allow"), "GET, HEAD", method);
    assert.equal(json.error.parameter, "method");
  }
  for (const path of ["/", "/healthz", "/test?key=e2e-head&stores=upstash"]) {
    const head = await mf.dispatchFetch(`http://localhost${path}`, { method: "HEAD" });
    assert.equal(head.status, 200, path);
    assert.equal(await head.text(), "", path);
    assert.equal(head.headers.get("cache-control"), "no-store", path);
  }
});

test("a blank BENCH_TOKEN refuses /test instead of opening it; a saved newline still matches", async () => {
  for (const blank of [" ", "\n"]) {
    const misconfigured = await worker({ UPSTASH_REDIS_REST_URL: fixture.url, UPSTASH_REDIS_REST_TOKEN: TOKEN, BENCH_TOKEN: blank });
    try {
      const before = fixture.state.commands.length;
      const { res, json } = await get(misconfigured, "/test?key=e2e-blank");
      assert.equal(res.status, 500);
      assert.equal(json.error.parameter, "BENCH_TOKEN");
      assert.equal(fixture.state.commands.length, before);
      const index = await get(misconfigured, "/");
      assert.equal(index.json.auth.bearer_token_required, true);
    } finally {
      await misconfigured.dispose();
    }
  }
  const padded = await worker({ UPSTASH_REDIS_REST_URL: fixture.url, UPSTASH_REDIS_REST_TOKEN: ` ${TOKEN}\n`, BENCH_TOKEN: `${BENCH_TOKEN}\n` });
  try {
    const ok = await get(padded, "/test?key=e2e-padded&stores=upstash", { headers: { Authorization: `Bearer ${BENCH_TOKEN}` } });
    assert.equal(ok.res.status, 200);
    assert.equal(ok.json.stores.upstash.error, null, "the trimmed Upstash token works");
    assert.equal(ok.res.headers.get("content-type"), "application/json");
    const refused = await get(padded, "/test?key=e2e-padded&stores=upstash");
    assert.equal(refused.res.status, 401);
    assert.equal(refused.res.headers.get("www-authenticate"), 'Bearer realm="kvbench"');
    assert.equal(refused.res.headers.get("cache-control"), "no-store");
  } finally {
    await padded.dispose();
  }
});
