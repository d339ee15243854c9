// The official @upstash/redis client, unmodified, against our gateway over a private redis-server.
// Run from the repo root: node --test tests/e2e/upstash-client.test.mjs
// Env: GATEWAY_BIN (default target/debug/upstash-gateway), REDIS_SERVER_BIN
// (default redis-server on PATH). Both processes are spawned on free loopback ports and killed after.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Redis } from "@upstash/redis";
import { startRedis, startGateway, stop, sleep } from "./procs.mjs";

const TOKEN = "e2e-test-token-" + process.pid;

let redisProc;
let gatewayProc;
let url;
let redis;

before(async () => {
  const r = await startRedis();
  redisProc = r.proc;
  const g = await startGateway(r.port, TOKEN);
  gatewayProc = g.proc;
  url = g.url;
  redis = new Redis({ url, token: TOKEN });
});

after(async () => {
  await stop(gatewayProc);
  await stop(redisProc);
});

test("strings: set, get, mset, mget, del, exists", async () => {
  assert.equal(await redis.set("s:1", "hello"), "OK");
  assert.equal(await redis.get("s:1"), "hello");
  assert.equal(await redis.get("s:missing"), null);
  assert.equal(await redis.mset({ "s:a": "x", "s:b": "y" }), "OK");
  assert.deepEqual(await redis.mget("s:a", "s:b", "s:none"), ["x", "y", null]);
  assert.equal(await redis.exists("s:a", "s:b", "s:none"), 2);
  assert.equal(await redis.del("s:a", "s:b"), 2);
  assert.equal(await redis.set("s:nx", "1", { nx: true }), "OK");
  assert.equal(await redis.set("s:nx", "2", { nx: true }), null);
  assert.equal(await redis.append("s:1", " world"), 11);
  assert.equal(await redis.strlen("s:1"), 11);
  // The client serialises objects as JSON and parses them back.
  await redis.set("s:obj", { a: 1, b: [true, null] });
  assert.deepEqual(await redis.get("s:obj"), { a: 1, b: [true, null] });
});

test("expiry: EX and PX with TTL/PTTL, and real expiry", async () => {
  await redis.set("e:ex", "v", { ex: 60 });
  const ttl = await redis.ttl("e:ex");
  assert.ok(ttl > 0 && ttl <= 60, `ttl ${ttl}`);
  await redis.set("e:px", "v", { px: 50_000 });
  const pttl = await redis.pttl("e:px");
  assert.ok(pttl > 0 && pttl <= 50_000, `pttl ${pttl}`);
  assert.equal(await redis.ttl("s:missing"), -2);
  await redis.set("e:none", "v");
  assert.equal(await redis.ttl("e:none"), -1);
  assert.equal(await redis.expire("e:none", 100), 1);
  assert.ok((await redis.ttl("e:none")) > 0);
  assert.equal(await redis.persist("e:none"), 1);
  assert.equal(await redis.setex("e:setex", 30, "v"), "OK");
  assert.ok((await redis.ttl("e:setex")) > 0);

  await redis.set("e:short", "v", { px: 30 });
  let gone = false;
  for (let i = 0; i < 200 && !gone; i++) {
    gone = (await redis.get("e:short")) === null;
    if (!gone) await sleep(25);
  }
  assert.ok(gone, "key with px:30 never expired");
});

test("hashes", async () => {
  assert.equal(await redis.hset("h:1", { name: "ada", age: 36, city: "Zürich" }), 3);
  assert.equal(await redis.hget("h:1", "name"), "ada");
  assert.equal(await redis.hget("h:1", "age"), 36);
  assert.deepEqual(await redis.hgetall("h:1"), { name: "ada", age: 36, city: "Zürich" });
  assert.deepEqual(await redis.hmget("h:1", "name", "nope"), { name: "ada", nope: null });
  assert.equal(await redis.hincrby("h:1", "age", 2), 38);
  assert.equal(await redis.hexists("h:1", "city"), 1);
  assert.equal(await redis.hdel("h:1", "city"), 1);
  assert.equal(await redis.hlen("h:1"), 2);
  assert.deepEqual((await redis.hkeys("h:1")).sort(), ["age", "name"]);
  assert.equal(await redis.hgetall("h:none"), null);
});

test("lists", async () => {
  assert.equal(await redis.rpush("l:1", "a", "b", "c"), 3);
  assert.equal(await redis.lpush("l:1", "z"), 4);
  assert.deepEqual(await redis.lrange("l:1", 0, -1), ["z", "a", "b", "c"]);
  assert.equal(await redis.llen("l:1"), 4);
  assert.equal(await redis.lpop("l:1"), "z");
  assert.equal(await redis.rpop("l:1"), "c");
  assert.equal(await redis.lindex("l:1", 1), "b");
  assert.deepEqual(await redis.lpop("l:1", 5), ["a", "b"]);
  assert.equal(await redis.lpop("l:1"), null);
});

test("sets", async () => {
  assert.equal(await redis.sadd("set:1", "a", "b", "c"), 3);
  assert.equal(await redis.sadd("set:1", "a"), 0);
  assert.deepEqual((await redis.smembers("set:1")).sort(), ["a", "b", "c"]);
  assert.equal(await redis.sismember("set:1", "b"), 1);
  assert.equal(await redis.sismember("set:1", "q"), 0);
  assert.equal(await redis.scard("set:1"), 3);
  assert.equal(await redis.srem("set:1", "a"), 1);
  await redis.sadd("set:2", "b", "x");
  assert.deepEqual(await redis.sinter("set:1", "set:2"), ["b"]);
});

test("sorted sets", async () => {
  assert.equal(
    await redis.zadd("z:1", { score: 1, member: "a" }, { score: 2.5, member: "b" }, { score: -3, member: "c" }),
    3,
  );
  assert.equal(await redis.zscore("z:1", "b"), 2.5);
  assert.equal(await redis.zscore("z:1", "none"), null);
  assert.deepEqual(await redis.zrange("z:1", 0, -1), ["c", "a", "b"]);
  assert.deepEqual(await redis.zrange("z:1", 0, -1, { withScores: true }), ["c", -3, "a", 1, "b", 2.5]);
  assert.equal(await redis.zincrby("z:1", 10, "a"), 11);
  assert.equal(await redis.zrank("z:1", "a"), 2);
  assert.equal(await redis.zcard("z:1"), 3);
  assert.deepEqual(await redis.zrange("z:1", 0, 10, { byScore: true }), ["b"]);
  assert.equal(await redis.zrem("z:1", "c"), 1);
});

test("counters", async () => {
  assert.equal(await redis.incr("c:1"), 1);
  assert.equal(await redis.incrby("c:1", 41), 42);
  assert.equal(await redis.decr("c:1"), 41);
  assert.equal(await redis.decrby("c:1", 40), 1);
  assert.equal(await redis.incrbyfloat("c:f", 1.25), 1.25);
  assert.equal(await redis.get("c:1"), 1);
  await redis.set("c:text", "abc");
  await assert.rejects(redis.incr("c:text"), /not an integer/);
});

test("pipeline: results in order, not atomic, errors reported per command", async () => {
  const p = redis.pipeline();
  p.set("p:1", "one");
  p.get("p:1");
  p.incr("p:n");
  p.hset("p:h", { f: "v" });
  p.hgetall("p:h");
  assert.deepEqual(await p.exec(), ["OK", "one", 1, 1, { f: "v" }]);

  const bad = redis.pipeline();
  bad.set("p:2", "two");
  bad.incr("p:1"); // not an integer
  bad.get("p:2");
  await assert.rejects(bad.exec(), /Command 2 \[ incr \] failed: ERR value is not an integer/);
  // Not atomic: the first command ran although the second failed.
  assert.equal(await redis.get("p:2"), "two");

  const kept = redis.pipeline();
  kept.incr("p:1");
  kept.get("p:2");
  const res = await kept.exec({ keepErrors: true });
  assert.match(res[0].error, /not an integer/);
  assert.equal(res[1].result, "two");
});

test("auto-pipelining client works", async () => {
  const auto = new Redis({ url, token: TOKEN, enableAutoPipelining: true });
  // Commands of one tick may leave as more than one pipeline, sent at once (a fresh clone's
  // run saw a GET of the key a SET in the same Promise.all wrote come back null): a write and a
  // read of one key are not batched together here, each batch's own results are checked.
  const [a, c] = await Promise.all([auto.set("ap:1", "x"), auto.incr("ap:n")]);
  assert.deepEqual([a, c], ["OK", 1]);
  const [b, d, e] = await Promise.all([auto.get("ap:1"), auto.incr("ap:n"), auto.get("ap:none")]);
  assert.deepEqual([b, d, e], ["x", 2, null]);
});

test("multi/exec transactions", async () => {
  const tx = redis.multi();
  tx.set("t:1", "a");
  tx.incr("t:n");
  tx.incr("t:n");
  tx.get("t:1");
  assert.deepEqual(await tx.exec(), ["OK", 1, 2, "a"]);

  // A runtime error inside EXEC fails only that command; the others are applied.
  const mixed = redis.multi();
  mixed.set("t:2", "b");
  mixed.incr("t:2");
  const kept = await mixed.exec({ keepErrors: true });
  assert.equal(kept[0].result, "OK");
  assert.match(kept[1].error, /not an integer/);
  assert.equal(await redis.get("t:2"), "b");

  // A command Redis refuses to queue aborts the whole transaction.
  const aborted = redis.multi();
  aborted.set("t:3", "c");
  aborted.hset("t:3", {}); // HSET without field/value: wrong number of arguments
  await assert.rejects(aborted.exec(), /EXECABORT/);
  assert.equal(await redis.get("t:3"), null);
});

test("unicode keys and values round-trip", async () => {
  const value = "héllo wörld — 日本語 — emoji 🚀🇨🇭 — עברית — \u2028\u2029";
  await redis.set("u:ключ:🔑", value);
  assert.equal(await redis.get("u:ключ:🔑"), value);
  await redis.hset("u:h", { "поле": value });
  assert.deepEqual(await redis.hgetall("u:h"), { "поле": value });
  await redis.rpush("u:l", value, "ß");
  assert.deepEqual(await redis.lrange("u:l", 0, -1), [value, "ß"]);
});

test("binary-ish content round-trips", async () => {
  // Every code point 0..255, including NUL, control characters and latin-1 high bytes.
  let all = "";
  for (let i = 0; i < 256; i++) all += String.fromCharCode(i);
  await redis.set("b:all", all);
  assert.equal(await redis.get("b:all"), all);
  // Text that looks like base64, like "OK", or like JSON numbers must come back as written.
  await redis.set("b:ok", "OK");
  assert.equal(await redis.get("b:ok"), "OK");
  await redis.set("b:b64", "aGVsbG8=");
  assert.equal(await redis.get("b:b64"), "aGVsbG8=");
  const big = "x".repeat(64 * 1024) + "\u0000" + "é".repeat(1000);
  await redis.set("b:big", big);
  assert.equal(await redis.get("b:big"), big);
});

test("bytes that are not UTF-8 come back as U+FFFD", async () => {
  const res = await fetch(`${url}/set/b:raw/%FF%FEab`, { headers: { Authorization: `Bearer ${TOKEN}` } });
  assert.equal(res.status, 200);
  assert.equal(await redis.get("b:raw"), "\uFFFD\uFFFDab");
});

test("eval scripts", async () => {
  assert.equal(await redis.eval("return ARGV[1] .. KEYS[1]", ["k"], ["v"]), "vk");
});

test("wrong or missing token is refused", async () => {
  const wrong = new Redis({ url, token: "not-the-token", retry: false });
  await assert.rejects(wrong.get("s:1"), (err) => {
    assert.match(err.message, /Unauthorized/);
    assert.ok(!err.message.includes(TOKEN), "error must not echo the real token");
    return true;
  });
  const res = await fetch(url, { method: "POST", body: '["GET","s:1"]' });
  assert.equal(res.status, 401);
  assert.match((await res.json()).error, /Unauthorized/);
});
