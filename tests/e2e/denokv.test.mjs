// Deno KV end to end: a real self-hosted `denokv` (DENOKV_BIN, else `denokv` on PATH) on loopback,
// the built worker under Miniflare measuring it beside KV and the Upstash fixture, and the npm
// client `@deno/kv` as an independent KV Connect implementation cross-checking what the worker
// wrote and read. Expiry is read from denokv's SQLite file (`sqlite3` CLI): KV Connect hides it.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { openKv } from "@deno/kv";
import { startFixture } from "./upstash-fixture.mjs";
import { startDenoKv, startWorker, assertMs } from "./procs.mjs";

const UPSTASH_TOKEN = "e2e-upstash-token-d3n0kv";
const DENO_TOKEN = "e2e-denokv-access-token-7a41c9";
const bodies = [];

/** [v_encoding, expiration_ms] of the Deno key [key], from denokv's SQLite file. */
function storedRow(sqlite, key) {
  const hex = Buffer.concat([Buffer.from([2]), Buffer.from(key, "utf8"), Buffer.from([0])]).toString("hex").toUpperCase();
  const out = execFileSync("sqlite3", [sqlite, `select v_encoding, expiration_ms from kv where hex(k) = '${hex}'`], {
    encoding: "utf8",
  }).trim();
  return out ? out.split("|").map(Number) : null;
}

// The three stores this suite was written for (the other stores are measured in stores.test.mjs).
const worker = (bindings) => startWorker({ STORES: "kv,upstash,denokv", ...bindings });

async function get(mf, url) {
  const res = await mf.dispatchFetch(`http://localhost${url}`);
  const text = await res.text();
  bodies.push(text);
  return { res, json: JSON.parse(text) };
}

let denokv;
let fixture;
let mf;
let client;
before(async () => {
  denokv = await startDenoKv(DENO_TOKEN);
  fixture = await startFixture(UPSTASH_TOKEN);
  mf = await worker({
    UPSTASH_REDIS_REST_URL: fixture.url,
    UPSTASH_REDIS_REST_TOKEN: UPSTASH_TOKEN,
    DENO_KV_URL: denokv.url,
    DENO_KV_ACCESS_TOKEN: DENO_TOKEN,
  });
  client = await openKv(denokv.url, { accessToken: DENO_TOKEN });
});
after(async () => {
  client?.close();
  await mf?.dispose();
  await fixture?.close();
  await denokv?.stop();
  if (denokv) fs.rmSync(denokv.dir, { recursive: true, force: true });
  for (const body of bodies) {
    assert.ok(!body.includes(DENO_TOKEN), `Deno KV token leaked: ${body}`);
    assert.ok(!body.includes(UPSTASH_TOKEN), `Upstash token leaked: ${body}`);
  }
});

test("GET / shows denokv configured, and strong reads by default", async () => {
  const { json } = await get(mf, "/");
  assert.equal(json.stores.denokv.configured, true);
  assert.deepEqual(json.defaults.stores, ["kv", "upstash", "denokv"]);
  assert.equal(json.defaults.consistency, "strong");
  const bare = await worker({});
  try {
    const { json: index } = await get(bare, "/");
    assert.equal(index.stores.denokv.configured, false);
    const { json: answer } = await get(bare, "/test?key=e2e-deno-bare");
    assert.equal(answer.stores.denokv.error.kind, "not_configured");
    assert.equal(answer.stores.kv.error, null);
  } finally {
    await bare.dispose();
  }
});

test("miss → write → hit in all three stores in one request; @deno/kv reads the same bytes", async () => {
  const key = "e2e-deno-1";
  const t0 = Date.now();
  const first = (await get(mf, `/test?key=${key}&ttl=120`)).json;
  const t1 = Date.now();
  assert.deepEqual([...first.order].sort(), ["denokv", "kv", "upstash"]);
  for (const name of ["kv", "upstash", "denokv"]) {
    const s = first.stores[name];
    assert.equal(s.error, null, `${name}: ${JSON.stringify(s.error)}`);
    assert.equal(s.hit, false, name);
    assertMs(s.read_ms, `${name} read_ms`);
    assertMs(s.write_ms, `${name} write_ms`);
    assert.equal(s.value_bytes, first.stores.kv.value_bytes, name);
  }
  // First request of this isolate: the metadata exchange is reported apart, for denokv only.
  assertMs(first.stores.denokv.connect_ms, JSON.stringify(first.stores.denokv));
  assert.equal(first.stores.kv.connect_ms, undefined);

  const entry = await client.get([key]);
  assert.ok(entry.value instanceof Uint8Array, `value is ${entry.value?.constructor?.name}`);
  const kvValue = new Uint8Array(await (await mf.getKVNamespace("BENCH_KV")).get(key, "arrayBuffer"));
  assert.deepEqual(Buffer.from(entry.value), Buffer.from(kvValue), "same bytes in Deno KV and KV");
  assert.equal(Buffer.from(entry.value).toString("latin1"), fixture.state.data.get(key).value);
  const [encoding, expirationMs] = storedRow(denokv.sqlite, key);
  assert.equal(encoding, 3, "VE_BYTES");
  // TTL 120 s, in milliseconds: the write happened between t0 and t1.
  assert.ok(expirationMs >= t0 + 120_000 && expirationMs <= t1 + 120_000, `${expirationMs} vs [${t0}, ${t1}] + 120 s`);

  const second = (await get(mf, `/test?key=${key}`)).json;
  for (const name of ["kv", "upstash", "denokv"]) {
    assert.equal(second.stores[name].hit, true, name);
    assert.equal(second.stores[name].write_ms, null, name);
    assert.equal(second.stores[name].value_bytes, first.stores[name].value_bytes, name);
  }
  assert.equal(second.stores.denokv.connect_ms, undefined, "metadata is cached per isolate");
});

test("the worker reads a Uint8Array that @deno/kv wrote under [key], strong and eventual", async () => {
  const key = "e2e-deno-from-client";
  const bytes = new Uint8Array(5000).map((_, i) => (i * 7) & 0xff);
  const res = await client.set([key], bytes, { expireIn: 120_000 });
  assert.equal(res.ok, true);
  for (const consistency of ["strong", "eventual"]) {
    const { json } = await get(mf, `/test?key=${key}&stores=denokv&consistency=${consistency}`);
    assert.equal(json.stores.denokv.error, null, JSON.stringify(json.stores.denokv.error));
    assert.equal(json.stores.denokv.hit, true, consistency);
    assert.equal(json.stores.denokv.value_bytes, 5000);
  }
  assert.deepEqual(storedRow(denokv.sqlite, key)[0], 3, "@deno/kv stores a Uint8Array as VE_BYTES too");
});

test("Deno KV limits answer 400 naming the parameter, only when denokv is measured", async () => {
  for (const [query, parameter] of [
    ["max_bytes=65537", "max_bytes"],
    [`stores=denokv&key=${"k".repeat(2047)}`, "key"],
    ["consistency=linearizable", "consistency"],
  ]) {
    const { res, json } = await get(mf, `/test?${query}`);
    assert.equal(res.status, 400, query);
    assert.equal(json.error.parameter, parameter, query);
  }
  const { res } = await get(mf, "/test?key=e2e-deno-big&stores=kv,upstash&min_bytes=70000&max_bytes=70000");
  assert.equal(res.status, 200);
});

test("local latencies (diagnostic, not asserted)", async (t) => {
  const samples = { kv: [], upstash: [], denokv: [] };
  const writes = { kv: [], upstash: [], denokv: [] };
  for (let i = 0; i < 20; i++) {
    const { json } = await get(mf, `/test?key=e2e-deno-lat-${i % 10}&min_bytes=4096&max_bytes=4096`);
    for (const name of Object.keys(samples)) {
      samples[name].push(json.stores[name].read_ms);
      if (json.stores[name].write_ms !== null) writes[name].push(json.stores[name].write_ms);
    }
  }
  const median = (xs) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] : null);
  for (const name of Object.keys(samples)) {
    t.diagnostic(`${name}: median read ${median(samples[name])} ms, median write ${median(writes[name])} ms (4 KiB)`);
  }
});

test("a stopped denokv is an error for that store only", async () => {
  await denokv.stop();
  const { res, json } = await get(mf, "/test?key=e2e-deno-down");
  assert.equal(res.status, 200);
  assert.equal(json.stores.denokv.error.op, "read");
  assert.ok(["runtime", "http"].includes(json.stores.denokv.error.kind), JSON.stringify(json.stores.denokv.error));
  assert.equal(json.stores.denokv.hit, null);
  for (const name of ["kv", "upstash"]) {
    assert.equal(json.stores[name].error, null, name);
    assert.equal(json.stores[name].hit, false, name);
  }
  // A fresh isolate must exchange metadata first: that fails the same way.
  const cold = await worker({ DENO_KV_URL: denokv.url, DENO_KV_ACCESS_TOKEN: DENO_TOKEN });
  try {
    const { json: answer } = await get(cold, "/test?key=e2e-deno-down-cold&stores=denokv");
    assert.match(answer.stores.denokv.error.message, /^metadata exchange: /);
    assertMs(answer.stores.denokv.connect_ms, "denokv connect_ms");
  } finally {
    await cold.dispose();
  }
});
