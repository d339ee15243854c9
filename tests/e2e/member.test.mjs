// The fleet member's build (build-member/, `scripts/build.sh member`: the benchmark worker without
// the operations plane) against the main build, each in a Miniflare of its own with the same
// stores: the same request sequence gets answers that are byte for byte the same once every
// timing is masked (the same measured code: keys, order, hits and misses, value sizes, errors,
// field order); the member answers only /, /healthz and /test (every operations route a 404,
// as for a path nobody serves); and a run sent to a member is kept in the main worker's archive
// through the BENCH_RUNS binding by script name, where the main build's /runs/<id>/answers reads
// it — as deployed (scripts/fleet.mjs). Only the member says where it runs (its isolate's trace,
// from a stand-in, in the kvbench-trace-colo header beside the answer), asked once. `npm run
// build` first (scripts/test.sh does).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { sleep, startRedis, startStack, stop } from "./procs.mjs";
import { MAIN_WORKER } from "../../scripts/worker-options.mjs";
import { startTraceStandIn } from "../../scripts/trace-standin.mjs";

const STORES = "kv,do,d1,r2,cache,redis";
const redis = [];
let main;
let member;
let traces;

before(async () => {
  // A Redis each: both builds start from empty stores.
  for (let i = 0; i < 2; i++) redis.push(await startRedis());
  traces = await startTraceStandIn({ both: "FRA" });
  const vars = (r) => ({ REDIS_URL: `redis://127.0.0.1:${r.port}`, STORES, PROBE_COLO_URL: traces.url("both") });
  main = await startStack(vars(redis[0]));
  member = await startStack(vars(redis[1]), {}, { member: true });
});

after(async () => {
  await member?.dispose();
  await main?.dispose();
  for (const r of redis) await stop(r.proc);
  traces?.server.close();
});

/** An answer with every timing masked: a number under a key that ends in `_ms` (or one of the
 * seed's two latency fields) becomes "<ms>"; null stays null, so a timing that is absent in one
 * and present in the other still differs. Everything else, and the order of keys, is kept. */
function masked(text) {
  return JSON.stringify(JSON.parse(text), (key, value) =>
    typeof value === "number" && (key.endsWith("_ms") || key === "kvLatency" || key === "redisLatency") ? "<ms>" : value,
  );
}

const get = (mf, path, init) => mf.dispatchFetch(`http://127.0.0.1${path}`, init);

test("the same request sequence gets the same answers from the member and the main build", async () => {
  // A miss and its write, then the hit, then a second key: the same value size everywhere so
  // value_bytes match; a fixed order so the order field does.
  const sizes = "min_bytes=4096&max_bytes=4096";
  const order = `order=${STORES}`;
  const sequence = [`/test?key=7&${sizes}&${order}`, `/test?key=7&${sizes}&${order}`, `/test?key=8&${sizes}&stores=kv,d1,redis&order=kv,d1,redis`];
  for (const path of sequence) {
    const answers = [];
    for (const mf of [main, member]) {
      const res = await get(mf, path);
      assert.equal(res.status, 200, path);
      assert.match(res.headers.get("server-timing") ?? "", /^kvbench;dur=\d/, path);
      assert.equal(res.headers.get("content-type"), "application/json", path);
      // The member's trace colo beside its answer; the main build's /test asks none.
      assert.equal(res.headers.get("kvbench-trace-colo"), mf === member ? "FRA" : null, path);
      answers.push(await res.text());
    }
    const [fromMain, fromMember] = answers.map(masked);
    assert.equal(fromMember, fromMain, `${path}: the member's answer differs from the main build's beyond its timings`);
  }
  // Asked when the member's isolate was new, not again within the hour.
  assert.equal(traces.asked.both, 1);
  // Not vacuous: the sequence did miss, write and then hit in every store, on both.
  const hit = JSON.parse(await (await get(member, sequence[0])).text());
  assert.deepEqual(Object.keys(hit.stores), STORES.split(","));
  for (const [store, r] of Object.entries(hit.stores)) assert.equal(r.hit, true, `${store} hit on the member`);
});

test("a member answers only /, /healthz and /test", async () => {
  const index = await (await get(member, "/")).json();
  assert.equal(index.build, "member");
  assert.deepEqual(Object.keys(index.routes), ["GET /", "GET /healthz", "GET /test"]);
  const mainIndex = await (await get(main, "/")).json();
  assert.equal(mainIndex.build, "main");
  assert.ok(Object.keys(mainIndex.routes).includes("GET /report"));
  assert.equal(await (await get(member, "/healthz")).text(), "ok");
  const head = await get(member, "/test?stores=kv", { method: "HEAD" });
  assert.equal(head.status, 200);
  assert.equal(await head.text(), "");
  const post = await get(member, "/test", { method: "POST" });
  assert.equal(post.status, 405);
  assert.equal(post.headers.get("allow"), "GET, HEAD");
  for (const [method, path] of [["GET", "/probes"], ["POST", "/probes/start"], ["POST", "/probes/stop"], ["POST", "/probes/check"], ["GET", "/probes/answers"], ["GET", "/runs/r1/answers"], ["GET", "/report"]]) {
    const res = await get(member, path, { method });
    assert.equal(res.status, 404, `${method} ${path} on a member`);
    await res.arrayBuffer();
    // The main build has each route (a 404 there would make this test vacuous): PUT is a 405
    // naming the methods it answers, without starting or reading anything.
    const onMain = await get(main, path, { method: "PUT" });
    assert.equal(onMain.status, 405, `PUT ${path} on the main build`);
    assert.equal(onMain.headers.get("allow"), method === "POST" ? "POST" : "GET, HEAD", path);
    await onMain.arrayBuffer();
  }
});

test("a run sent to a member is kept in the main worker's archive", async () => {
  const run = `member-run-${process.pid}`;
  const n = 5;
  for (let i = 0; i < n; i++) {
    const res = await get(member, `/test?stores=kv,redis&key=${i}&run=${run}`);
    assert.equal(res.status, 200);
    await res.arrayBuffer();
  }
  // The main build beside the member (the classes' script) reads the run as deployed.
  const archive = await member.getWorker(MAIN_WORKER);
  let lines = [];
  for (let tries = 0; tries < 100; tries++) {
    const res = await archive.fetch(`http://127.0.0.1/runs/${run}/answers`);
    const text = await res.text();
    lines = res.status === 200 ? text.trim().split("\n").map((l) => JSON.parse(l)) : [];
    if (lines.filter((l) => l.answer).length === n) break;
    await sleep(100);
  }
  const answers = lines.filter((l) => l.answer);
  assert.equal(answers.length, n, `kept ${answers.length} of ${n}: ${JSON.stringify(lines.at(-1))}`);
  assert.ok(answers.every((l) => l.vantage === "run"));
  assert.deepEqual(answers.map((l) => l.answer.key).sort(), ["0", "1", "2", "3", "4"]);
});
