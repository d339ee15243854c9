// The stores of issue 10 end to end, on Miniflare's real emulations: the worker's own Durable
// Object class with SQLite storage, D1 with the table of migrations/, R2, the Cache API — and a
// real redis-server (password-protected) over a TCP socket from the worker. Each store's bytes are
// checked in the store itself, under its namespace; expiry, the DO's alarm, do_scope, d1_session,
// bad input, missing bindings, *.workers.dev and a silent Redis are each a test. Run
// `npm run build` first (scripts/test.sh does).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { redisCommand, sleep, startGateway, startRedis, startWorker, stop, assertMs } from "./procs.mjs";

const PASSWORD = "e2e-redis-password-5d1c7a";
const TOKEN = "e2e-stores-upstash-token-8b2f";
const NEW = ["do", "d1", "r2", "cache", "redis"];
const bodies = [];

let redis;
let mf;
before(async () => {
  redis = await startRedis(["--requirepass", PASSWORD]);
  mf = await startWorker({ REDIS_URL: `redis://default:${PASSWORD}@127.0.0.1:${redis.port}` });
});
after(async () => {
  await mf?.dispose();
  await stop(redis?.proc);
  for (const body of bodies) assert.ok(!body.includes(PASSWORD), `the Redis password leaked: ${body}`);
});

async function get(worker, path, origin = "http://localhost") {
  const res = await worker.dispatchFetch(`${origin}${path}`);
  const text = await res.text();
  bodies.push(text);
  return { res, json: JSON.parse(text) };
}

/** One RESP command to a redis-server (after AUTH when `password`), its raw reply. */
function resp(port, args, password) {
  const encode = (a) => Buffer.concat([
    Buffer.from(`*${a.length}\r\n`),
    ...a.flatMap((x) => {
      const b = Buffer.from(x);
      return [Buffer.from(`$${b.length}\r\n`), b, Buffer.from("\r\n")];
    }),
  ]);
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1");
    let buf = Buffer.alloc(0);
    const skip = password ? 5 : 0; // "+OK\r\n"
    sock.on("connect", () => {
      if (password) sock.write(encode(["AUTH", password]));
      sock.write(encode(args));
    });
    sock.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      const rest = buf.subarray(skip);
      const line = rest.indexOf("\r\n");
      if (line < 0) return;
      const head = rest.subarray(0, line).toString();
      if (head.startsWith("$") && head !== "$-1") {
        const len = Number(head.slice(1));
        if (rest.length < line + 2 + len + 2) return;
        sock.destroy();
        return resolve(rest.subarray(line + 2, line + 2 + len).toString("latin1"));
      }
      sock.destroy();
      resolve(head === "$-1" ? null : head);
    });
    sock.on("error", reject);
  });
}

const kvValue = async (key) => {
  const kv = await mf.getKVNamespace("BENCH_KV");
  return kv.get(key);
};
const doFetch = async (object, path) => {
  const ns = await mf.getDurableObjectNamespace("BENCH_DO");
  return ns.get(ns.idFromName(object)).fetch(`https://kvbench.do${path}`);
};
const doStats = async (object) => (await doFetch(object, "/.stats")).json();
const d1Row = async (key) => {
  const db = await mf.getD1Database("BENCH_D1");
  return db.prepare("SELECT value, expires_at FROM kvbench WHERE key = ?").bind(key).first();
};

test("GET / describes every store with its namespace, limits and billing units, and says which are configured", async () => {
  const { json } = await get(mf, "/");
  for (const name of NEW) assert.equal(json.stores[name].configured, true, name);
  assert.equal(json.stores.upstash.configured, false);
  assert.match(json.stores.upstash.not_configured, /UPSTASH_REDIS_REST_URL/);
  assert.equal(json.stores.redis.key_namespace, "kvbench:redis:");
  assert.equal(json.stores.r2.key_max_bytes, 1024);
  assert.deepEqual(json.stores.r2.billing.read, [{ unit: "Class B operation", count: { each: 1 } }]);
  assert.deepEqual(json.stores.cache.billing.read, []);
  assert.match(json.stores.denokv.notes.join(" "), /2026-07-20/);
  assert.match(json.stores.cache.notes.join(" "), /workers\.dev/);
  assert.deepEqual(json.defaults.stores, ["kv", "upstash", "denokv", "do", "d1", "r2", "cache", "redis"]);
  assert.equal(json.defaults.do_scope, "key");
  assert.ok(json.parameters.includes("d1_session"));
});

test("miss → write → hit in do, d1, r2, cache and redis: the same bytes, under each store's namespace, expiring as asked", async () => {
  const key = "e2e-1";
  const t0 = Date.now();
  const first = (await get(mf, `/test?key=${key}&ttl=120&stores=kv,${NEW}`)).json;
  const value = await kvValue(key);
  assert.ok(value.length >= 4096 && value.length <= 65536);
  for (const name of NEW) {
    const s = first.stores[name];
    assert.equal(s.error, null, `${name}: ${JSON.stringify(s.error)}`);
    assert.equal(s.hit, false, name);
    assert.equal(s.value_bytes, value.length, name);
    assertMs(s.read_ms, `${name} read_ms`);
    assertMs(s.write_ms, `${name} write_ms`);
  }
  assertMs(first.stores.redis.connect_ms, "Redis's setup is connect_ms");

  // Durable Object: the per-key object holds the row, with the alarm at its expiry.
  const row = await doFetch(`kvbench:do:${key}`, `/${encodeURIComponent(`kvbench:do:${key}`)}`);
  assert.equal(await row.text(), value);
  const stats = await doStats(`kvbench:do:${key}`);
  assert.equal(stats.rows, 1);
  assert.ok(Math.abs(stats.next_expiry_ms - (t0 + 120_000)) < 5000, JSON.stringify(stats));
  // D1: the migrated table, the value as text, the expiry in ms.
  const d1 = await d1Row(`kvbench:d1:${key}`);
  assert.equal(d1.value, value);
  assert.ok(Math.abs(d1.expires_at - (t0 + 120_000)) < 5000);
  // R2: the object with its expiry in custom metadata.
  const r2 = await (await mf.getR2Bucket("BENCH_R2")).get(`kvbench:r2:${key}`);
  assert.equal(await r2.text(), value);
  assert.ok(Math.abs(Number(r2.customMetadata["expires-at-ms"]) - (t0 + 120_000)) < 5000);
  // Cache API: the entry on the worker's origin, max-age = ttl.
  const caches = await mf.getCaches();
  const cached = await caches.default.match(`http://localhost/${encodeURIComponent(`kvbench:cache:${key}`)}`);
  assert.equal(cached.headers.get("cache-control"), "max-age=120");
  assert.equal(await cached.text(), value);
  // Redis: SET with EX on the namespaced key.
  assert.equal(await resp(redis.port, ["GET", `kvbench:redis:${key}`], PASSWORD), value);
  const ttl = Number((await resp(redis.port, ["TTL", `kvbench:redis:${key}`], PASSWORD)).slice(1));
  assert.ok(ttl > 110 && ttl <= 120, `TTL ${ttl}`);
  assert.equal(await resp(redis.port, ["GET", key], PASSWORD), null, "nothing under the bare key");

  const second = (await get(mf, `/test?key=${key}&stores=${NEW}`)).json;
  for (const name of NEW) {
    assert.equal(second.stores[name].error, null, name);
    assert.equal(second.stores[name].hit, true, name);
    assert.equal(second.stores[name].write_ms, null, name);
    assert.equal(second.stores[name].value_bytes, value.length, name);
  }
  assertMs(second.stores.redis.connect_ms, "a connection per request");
});

test("1 MiB values are written and read whole in every new store", async () => {
  const { json } = await get(mf, `/test?key=e2e-big&min_bytes=1048576&max_bytes=1048576&stores=${NEW}`);
  const again = (await get(mf, `/test?key=e2e-big&min_bytes=1048576&max_bytes=1048576&stores=${NEW}`)).json;
  for (const name of NEW) {
    assert.equal(json.stores[name].error, null, `${name}: ${JSON.stringify(json.stores[name].error)}`);
    assert.equal(json.stores[name].value_bytes, 1048576, name);
    assert.equal(again.stores[name].hit, true, name);
    assert.equal(again.stores[name].value_bytes, 1048576, name);
  }
});

test("an expired value is a miss and is overwritten; the object's alarm deletes expired rows, then its storage", async () => {
  const key = "e2e-expiry";
  const query = `key=${key}&ttl=1&stores=${NEW}`;
  const first = (await get(mf, `/test?${query}`)).json;
  for (const name of NEW) assert.equal(first.stores[name].hit, false, name);
  const written = (await d1Row(`kvbench:d1:${key}`)).value;
  await sleep(2500);
  // The alarm ran: the per-key object is empty again — no table, no alarm (and reading its stats
  // did not create the table again: a read never writes).
  assert.deepEqual(await doStats(`kvbench:do:${key}`), {
    table: false,
    rows: 0,
    next_expiry_ms: null,
    alarm_ms: null,
  });
  const second = (await get(mf, `/test?${query}&min_bytes=100&max_bytes=100`)).json;
  for (const name of NEW) {
    assert.equal(second.stores[name].error, null, name);
    assert.equal(second.stores[name].hit, false, `${name} after its TTL`);
    assert.equal(second.stores[name].value_bytes, 100, name);
    assertMs(second.stores[name].write_ms, `${name} rewrote`);
  }
  // D1 has no alarm: the expired row was overwritten in place.
  const row = await d1Row(`kvbench:d1:${key}`);
  assert.equal(row.value.length, 100);
  assert.notEqual(row.value, written);
});

test("do_scope=shared keeps every key in one object; do_location places an object of that hint's own", async () => {
  for (const key of ["e2e-shared-a", "e2e-shared-b"]) {
    const { json } = await get(mf, `/test?key=${key}&stores=do&do_scope=shared&do_location=weur&ttl=300`);
    assert.equal(json.stores.do.error, null, JSON.stringify(json.stores.do.error));
    assert.equal(json.stores.do.hit, false);
  }
  // An object placed by a hint is that hint's own: the shared object of weur.
  assert.equal((await doStats("weur|kvbench:do")).rows, 2);
  assert.equal((await doStats("kvbench:do")).rows, 0, "the unplaced shared object was not written");
  assert.equal((await doStats("kvbench:do:e2e-shared-a")).rows, 0, "no per-key object was written");
  const { json } = await get(mf, "/test?key=e2e-shared-a&stores=do&do_scope=shared&do_location=weur");
  assert.equal(json.stores.do.hit, true);
  assert.equal(json.stores.do.location_hint, "weur", "the answer says which hint placed the object");
  const unplaced = (await get(mf, "/test?key=e2e-shared-a&stores=do&do_scope=shared")).json;
  assert.equal(unplaced.stores.do.hit, false, "another object: the unplaced one");
  assert.equal(unplaced.stores.do.location_hint, undefined);
});

test("do_scope=colo measures the colo's own object of the key, and the answer names the colo", async () => {
  const key = "e2e-colo-a";
  const first = (await get(mf, `/test?key=${key}&stores=do&ttl=300`)).json;
  assert.equal(first.stores.do.hit, false);
  const near = (await get(mf, `/test?key=${key}&stores=do&do_scope=colo&ttl=300`)).json;
  assert.equal(near.stores.do.error, null, JSON.stringify(near.stores.do.error));
  assert.equal(near.stores.do.hit, false, "another object than the key's");
  assert.equal(near.stores.do.near_colo, near.colo);
  assert.equal((await doStats(`colo:${near.colo}|kvbench:do:${key}`)).rows, 1);
  const again = (await get(mf, `/test?key=${key}&stores=do&do_scope=colo`)).json;
  assert.equal(again.stores.do.hit, true);
  assert.equal(first.stores.do.near_colo, undefined);
});

/** A D1 call's report as Miniflare 5.20261117 gives it: the primary, one attempt, the SQL time
 * in whole milliseconds (its emulated database times it with workerd's coarse clock), no colo. */
function assertMiniflareD1Meta(meta, what) {
  assert.equal(typeof meta, "object", `${what}: ${JSON.stringify(meta)}`);
  assert.deepEqual(Object.keys(meta).sort(), ["attempts", "served_by_primary", "sql_ms"], what);
  assert.equal(meta.served_by_primary, true, what);
  assert.equal(meta.attempts, 1, what);
  assert.ok(Number.isInteger(meta.sql_ms), `${what}: sql_ms ${meta.sql_ms} is a whole number of ms`);
}

test("D1 reports where and how long (read_meta, write_meta) as Miniflare gives it; KV's null cacheStatus and the other stores report nothing", async () => {
  const key = "e2e-meta";
  const first = (await get(mf, `/test?key=${key}&stores=kv,${NEW}`)).json;
  const d1 = first.stores.d1;
  assert.equal(d1.error, null, JSON.stringify(d1.error));
  assert.equal(d1.hit, false);
  assertMiniflareD1Meta(d1.read_meta, "the miss's read");
  assertMiniflareD1Meta(d1.write_meta, "the write's batch");
  assert.equal(d1.read_retried, undefined, "one attempt: not flagged");
  // Miniflare's getWithMetadata gives cacheStatus null: nothing to carry, no made-up value.
  assert.equal(first.stores.kv.error, null);
  assert.equal(first.stores.kv.read_meta, undefined, JSON.stringify(first.stores.kv));
  for (const name of NEW.filter((n) => n !== "d1")) {
    assert.equal(first.stores[name].read_meta, undefined, name);
    assert.equal(first.stores[name].write_meta, undefined, name);
  }
  const second = (await get(mf, `/test?key=${key}&stores=d1&d1_session=first-primary`)).json;
  assert.equal(second.stores.d1.hit, true);
  assertMiniflareD1Meta(second.stores.d1.read_meta, "a hit's read in a session");
  assert.equal(second.stores.d1.write_meta, undefined, "no write, no write_meta");
});

test("d1_session runs the read and the write through the Sessions API", async () => {
  for (const session of ["first-unconstrained", "first-primary"]) {
    const key = `e2e-session-${session}`;
    const first = (await get(mf, `/test?key=${key}&stores=d1&d1_session=${session}`)).json;
    assert.equal(first.stores.d1.error, null, JSON.stringify(first.stores.d1.error));
    assert.equal(first.stores.d1.hit, false);
    const second = (await get(mf, `/test?key=${key}&stores=d1&d1_session=${session}`)).json;
    assert.equal(second.stores.d1.hit, true, session);
  }
});

test("every new parameter is validated: 400 naming it, and nothing is written anywhere", async () => {
  const key = "e2e-bad";
  for (const [query, parameter] of [
    ["do_scope=global", "do_scope"],
    ["do_location=mars", "do_location"],
    ["d1_session=bookmark", "d1_session"],
    ["stores=kv,redis&ttl=30", "ttl"],
    [`stores=r2&key=${"k".repeat(1014)}`, "key"],
    ["stores=do,dynamo", "stores"],
  ]) {
    const { res, json } = await get(mf, `/test?key=${key}&${query}`);
    assert.equal(res.status, 400, query);
    assert.equal(json.error.parameter, parameter, query);
  }
  const { res, json } = await get(mf, "/test?key=kvbench:redis:x&stores=upstash");
  assert.equal(res.status, 400);
  assert.equal(json.error.parameter, "key", "the namespaces' prefix is reserved");
  assert.equal(await d1Row(`kvbench:d1:${key}`), null);
  assert.equal((await (await mf.getR2Bucket("BENCH_R2")).list({ prefix: `kvbench:r2:${key}` })).objects.length, 0);
  assert.equal((await doStats(`kvbench:do:${key}`)).rows, 0);
  assert.equal(await resp(redis.port, ["EXISTS", `kvbench:redis:${key}`], PASSWORD), ":0");
});

test("a store whose binding is missing is not_configured and the others are measured", async () => {
  const bare = await startWorker({}, { durableObjects: {}, d1Databases: [], r2Buckets: [] });
  try {
    const { json } = await get(bare, `/test?key=e2e-bare&stores=kv,${NEW}`);
    for (const [name, binding] of [["do", "BENCH_DO"], ["d1", "BENCH_D1"], ["r2", "BENCH_R2"], ["redis", "REDIS_URL"]]) {
      assert.equal(json.stores[name].error.kind, "not_configured", name);
      assert.match(json.stores[name].error.message, new RegExp(binding), name);
      assert.equal(json.stores[name].read_ms, null, name);
    }
    assert.equal(json.stores.kv.error, null);
    assert.equal(json.stores.cache.error, null);
    const index = (await get(bare, "/")).json;
    assert.equal(index.stores.d1.configured, false);
    assert.match(index.stores.d1.not_configured, /BENCH_D1/);
  } finally {
    await bare.dispose();
  }
});

test("on *.workers.dev the Cache API does nothing: cache is not_configured there, and says why", async () => {
  const origin = "https://kvbench.someone.workers.dev";
  const { json } = await get(mf, "/test?key=e2e-wd&stores=cache,kv", origin);
  assert.equal(json.stores.cache.error.kind, "not_configured");
  assert.match(json.stores.cache.error.message, /workers\.dev/);
  assert.equal(json.stores.kv.error, null);
  const index = (await get(mf, "/", origin)).json;
  assert.equal(index.stores.cache.configured, false);
});

test("Redis over TCP: a wrong password is auth, a stopped server is runtime, a silent one times out; the others are measured", async () => {
  const cases = [
    [`redis://default:wrong-password@127.0.0.1:${redis.port}`, "auth"],
    [`redis://127.0.0.1:${redis.port}`, "auth"], // NOAUTH
  ];
  for (const [url, kind] of cases) {
    const worker = await startWorker({ REDIS_URL: url });
    try {
      const { json } = await get(worker, "/test?key=e2e-redis-fail&stores=redis,do");
      assert.equal(json.stores.redis.error.kind, kind, JSON.stringify(json.stores.redis));
      assert.ok(!JSON.stringify(json).includes("wrong-password"));
      assert.equal(json.stores.do.error, null);
    } finally {
      await worker.dispose();
    }
  }
  // Accepts connections, never answers: the GET times out (no password, so no AUTH first).
  const accepted = [];
  const silent = net.createServer((c) => {
    accepted.push(c);
    c.resume(); // read (and drop) what arrives, so the worker closing the socket is seen
    c.on("error", () => {});
  });
  await new Promise((r) => silent.listen(0, "127.0.0.1", r));
  const quiet = await startWorker({ REDIS_URL: `redis://127.0.0.1:${silent.address().port}` });
  try {
    const { json } = await get(quiet, "/test?key=e2e-redis-silent&stores=redis,r2&timeout_ms=300");
    assert.equal(json.stores.redis.error.kind, "timeout", JSON.stringify(json.stores.redis));
    assert.ok(json.stores.redis.read_ms >= 290, `${json.stores.redis.read_ms}`);
    assert.equal(json.stores.r2.error, null);
    // The abandoned connection is closed, not left open until the runtime collects it.
    for (let i = 0; i < 50 && !accepted.every((c) => c.readableEnded); i++) await sleep(20);
    assert.equal(accepted.length, 1);
    assert.ok(accepted[0].readableEnded, "the worker closed the timed-out connection");
  } finally {
    await quiet.dispose();
    for (const c of accepted) c.destroy();
    await new Promise((r) => silent.close(r));
  }
  // A stopped server: the connection is refused.
  const gone = await startRedis();
  await stop(gone.proc);
  const refused = await startWorker({ REDIS_URL: `redis://127.0.0.1:${gone.port}` });
  try {
    const { json } = await get(refused, "/test?key=e2e-redis-gone&stores=redis,kv");
    assert.equal(json.stores.redis.error.kind, "connect", JSON.stringify(json.stores.redis));
    assertMs(json.stores.redis.connect_ms, "redis connect_ms");
    assert.equal(json.stores.kv.error, null);
  } finally {
    await refused.dispose();
  }
});

test("redis and upstash pointed at one database (REST through the gateway, RESP direct) never read each other's values", async () => {
  const shared = await startRedis();
  const gateway = await startGateway(shared.port, TOKEN);
  const worker = await startWorker({
    UPSTASH_REDIS_REST_URL: gateway.url,
    UPSTASH_REDIS_REST_TOKEN: TOKEN,
    REDIS_URL: `redis://127.0.0.1:${shared.port}`,
  });
  try {
    await redisCommand(gateway.url, TOKEN, ["SET", "e2e-one-db", "written-by-another-client"]);
    const { json } = await get(worker, "/test?key=e2e-one-db&stores=upstash,redis&min_bytes=100&max_bytes=100");
    assert.equal(json.stores.upstash.hit, true);
    assert.equal(json.stores.upstash.value_bytes, 25);
    assert.equal(json.stores.redis.hit, false, "the bare key is not Redis's");
    assert.equal(json.stores.redis.value_bytes, 100);
    assert.equal(await redisCommand(gateway.url, TOKEN, ["GET", "e2e-one-db"]), "written-by-another-client");
    assert.equal((await redisCommand(gateway.url, TOKEN, ["GET", "kvbench:redis:e2e-one-db"])).length, 100);
    const again = (await get(worker, "/test?key=e2e-one-db&stores=upstash,redis")).json;
    assert.equal(again.stores.redis.hit, true);
    assert.equal(again.stores.redis.value_bytes, 100);
    assert.equal(again.stores.upstash.value_bytes, 25);
  } finally {
    await worker.dispose();
    await stop(gateway.proc);
    await stop(shared.proc);
  }
});
