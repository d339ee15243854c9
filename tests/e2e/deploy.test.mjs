// The deploy path, offline: wrangler.toml has no placeholder ids (wrangler provisions the KV
// namespace, D1 database and R2 bucket on the first deploy), and the post-deploy check
// (scripts/check-deploy.mjs, what `npm run deploy` runs last) against the local stack: stores
// without their secrets are reported and nothing fails; a configured store that fails fails the
// check by name; a worker with a BENCH_TOKEN is checked with the token from the environment, which
// never appears in the output. `wrangler deploy --dry-run` of both configs runs in scripts/test.sh.
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

test("wrangler.toml has no placeholder ids: the first deploy provisions the resources", () => {
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
    assert.match(out, /✗ redis\s+runtime/);
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

test("a worker that is not there fails the check", async () => {
  const { code, out } = await check("http://127.0.0.1:1");
  assert.equal(code, 1, out);
  assert.match(out, /GET http:\/\/127\.0\.0\.1:1\/ answered 0/);
});
