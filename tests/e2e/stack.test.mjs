// The worker on the real local stack: Miniflare's KV, and Upstash REST served by our gateway over a
// real redis-server. Gateway faults (delay, 500, 401, dropped connections) must show up as the
// right `error.kind` for upstash while KV is still measured.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { startRedis, startGateway, startWorker, stop, redisCommand } from "./procs.mjs";

const TOKEN = "stack-e2e-token-" + process.pid;
const ADMIN = "stack-e2e-admin-" + process.pid;
let redis, gateway, mf;

before(async () => {
  redis = await startRedis();
  gateway = await startGateway(redis.port, TOKEN, ["--fault-seed", "7"], { GATEWAY_ADMIN_TOKEN: ADMIN });
  mf = await startWorker({ UPSTASH_REDIS_REST_URL: gateway.url, UPSTASH_REDIS_REST_TOKEN: TOKEN });
});
after(async () => {
  await mf?.dispose();
  await stop(gateway?.proc);
  await stop(redis?.proc);
});

async function probe(query) {
  const res = await mf.dispatchFetch(`http://localhost/test?stores=kv,upstash&${query}`);
  const text = await res.text();
  assert.ok(!text.includes(TOKEN) && !text.includes(ADMIN), `secret leaked: ${text}`);
  assert.equal(res.status, 200, text);
  return JSON.parse(text);
}

async function faults(config) {
  const res = await fetch(`${gateway.url}/admin/faults`, {
    method: "PUT",
    headers: { Authorization: `Bearer ${ADMIN}` },
    body: JSON.stringify(config),
  });
  assert.equal(res.status, 200, await res.text());
}

test("miss → write → hit through the gateway; Redis holds the same bytes with the requested TTL", async () => {
  const first = await probe("key=stack-1&ttl=90");
  for (const name of ["kv", "upstash"]) {
    assert.equal(first.stores[name].error, null, JSON.stringify(first.stores[name].error));
    assert.equal(first.stores[name].hit, false);
  }
  const stored = await redisCommand(gateway.url, TOKEN, ["GET", "stack-1"]);
  assert.equal(stored.length, first.stores.upstash.value_bytes);
  const kv = await mf.getKVNamespace("BENCH_KV");
  assert.equal(await kv.get("stack-1"), stored, "KV and Redis got the same value");
  const ttl = await redisCommand(gateway.url, TOKEN, ["TTL", "stack-1"]);
  assert.ok(ttl > 80 && ttl <= 90, `TTL in Redis is ${ttl} s`);

  const second = await probe("key=stack-1");
  assert.equal(second.stores.upstash.hit, true);
  assert.equal(second.stores.kv.hit, true);
  assert.equal(second.stores.upstash.value_bytes, first.stores.upstash.value_bytes);
});

test("gateway faults become per-store errors and KV is still measured", async () => {
  const cases = [
    [{ status_fraction: 1, status: 500 }, "http", ""],
    [{ status_fraction: 1, status: 503 }, "http", ""],
    [{ status_fraction: 1, status: 401 }, "auth", ""],
    [{ status_fraction: 1, status: 429 }, "rate_limited", ""],
    [{ drop_fraction: 1 }, "runtime", ""],
    [{ delay_min_ms: 400, delay_max_ms: 400 }, "timeout", "&timeout_ms=150"],
  ];
  try {
    for (const [config, kind, extra] of cases) {
      await faults(config);
      const a = await probe(`key=stack-fault-${kind}&order=upstash,kv${extra}`);
      assert.equal(a.stores.upstash.error?.kind, kind, `${JSON.stringify(config)} → ${JSON.stringify(a.stores.upstash)}`);
      assert.equal(a.stores.upstash.hit, null);
      assert.equal(a.stores.kv.error, null);
      assert.equal(typeof a.stores.kv.read_ms, "number");
      if (kind === "timeout") assert.ok(a.stores.upstash.read_ms >= 140, `${a.stores.upstash.read_ms}`);
    }
  } finally {
    await faults({});
  }
  const healed = await probe("key=stack-healed");
  assert.equal(healed.stores.upstash.error, null);
});

test("a delay below the timeout is measured, not an error", async () => {
  try {
    await faults({ delay_min_ms: 60, delay_max_ms: 60 });
    const a = await probe("key=stack-slow&order=upstash,kv");
    assert.equal(a.stores.upstash.error, null);
    assert.ok(a.stores.upstash.read_ms >= 55, `read_ms ${a.stores.upstash.read_ms}`);
    assert.ok(a.stores.upstash.write_ms >= 55, `write_ms ${a.stores.upstash.write_ms}`);
  } finally {
    await faults({});
  }
});

/** SET key <bytes> straight into redis-server (RESP), as another client would. */
function redisSetRaw(port, key, bytes) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1");
    const k = Buffer.from(key);
    sock.on("connect", () =>
      sock.write(Buffer.concat([
        Buffer.from(`*3\r\n$3\r\nSET\r\n$${k.length}\r\n`), k,
        Buffer.from(`\r\n$${bytes.length}\r\n`), bytes, Buffer.from("\r\n"),
      ])),
    );
    sock.once("data", (d) => {
      sock.destroy();
      d.toString().startsWith("+OK") ? resolve() : reject(new Error(d.toString()));
    });
    sock.on("error", reject);
  });
}

test("bytes that are not UTF-8, written by another client, are measured at their stored length", async () => {
  await redisSetRaw(redis.port, "stack-binary", Buffer.alloc(1000, 0xff));
  const a = await probe("key=stack-binary");
  assert.equal(a.stores.upstash.error, null, JSON.stringify(a.stores.upstash));
  assert.equal(a.stores.upstash.hit, true);
  assert.equal(a.stores.upstash.value_bytes, 1000, "not 3,000 bytes of U+FFFD");
});
